"""The CLI end to end: real `mindloop` processes on a temporary rtws."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.scenario_util import ml, write_script

EXAMPLE = "list the files and summarise README.md"


def test_init_is_idempotent_and_force_overwrites(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    first = ml("init", str(proj))
    assert first.returncode == 0, first.stderr
    assert "provider: mock" in first.stdout
    for rel in (
        ".minds/team.yaml",
        ".minds/llm.yaml",
        "tasks/example.tsk/goals.md",
        ".minds/mock/mock-model.yaml",
    ):
        assert (proj / rel).is_file(), rel
    (proj / "README.md").write_text("mine\n")
    again = ml("init", str(proj))
    assert again.returncode == 0 and "kept" in again.stdout
    assert (proj / "README.md").read_text() == "mine\n"
    forced = ml("init", str(proj), "--force")
    assert forced.returncode == 0 and (proj / "README.md").read_text() != "mine\n"


def test_check_passes_then_reports_file_line_errors(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    ml("init", str(proj))
    ok = ml("check", "-C", str(proj))
    assert ok.returncode == 0 and "configuration OK" in ok.stdout
    team = proj / ".minds" / "team.yaml"
    data = yaml.safe_load(team.read_text())
    data["members"]["dev"]["fbr-effort"] = 101
    data["members"]["dev"]["colour"] = "blue"
    team.write_text(yaml.safe_dump(data, sort_keys=False))
    lines = team.read_text().splitlines()
    effort_line = next(i for i, line in enumerate(lines, 1) if "fbr-effort: 101" in line)
    bad = ml("check", "-C", str(proj))
    assert bad.returncode == 1
    assert (
        f".minds/team.yaml:{effort_line}: members.dev.fbr-effort: must be an integer in 0..100, got 101"
        in bad.stderr
    )
    assert "members.dev.colour" in bad.stderr and "Traceback" not in bad.stderr


def test_chat_runs_the_example_offline_and_dialogs_are_inspectable(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    ml("init", str(proj))
    out = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", EXAMPLE)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "list_dir" in out.stdout and "read_file" in out.stdout
    assert "README.md describes a small example project" in out.stdout
    listed = json.loads(ml("dialogs", "list", "-C", str(proj), "--json").stdout)
    assert (
        len(listed) == 1
        and listed[0]["kind"] == "root"
        and listed[0]["task_path"] == "tasks/example.tsk"
    )
    did = listed[0]["id"]
    shown = json.loads(ml("dialogs", "show", "-C", str(proj), did[:6], "--json").stdout)
    kinds = [m["kind"] for m in shown["messages"]]
    assert kinds[:3] == ["user", "assistant", "tool_call"] and kinds[-1] == "assistant"
    assert len(shown["generations"]) == 3
    text = ml("dialogs", "show", "-C", str(proj), did).stdout
    assert "list the files" in text
    # Continue the same dialog: the script has no entry for this, so the mock fails loudly.
    cont = ml("chat", "-C", str(proj), "--dialog", did, "and now?")
    assert cont.returncode == 1
    assert "Mock Response Not Found" in cont.stdout + cont.stderr


def test_user_mistakes_get_one_line_errors(tmp_path: Path) -> None:
    missing = ml("chat", "-C", str(tmp_path / "nope"), "--task", "tasks/x.tsk", "hi")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    proj = tmp_path / "p"
    ml("init", str(proj))
    not_tsk = ml("chat", "-C", str(proj), "--task", "README.md", "hi")
    assert (
        not_tsk.returncode == 1 and ".tsk" in not_tsk.stderr and "Traceback" not in not_tsk.stderr
    )
    unknown_task = ml("chat", "-C", str(proj), "--task", "tasks/none.tsk", "hi")
    assert unknown_task.returncode == 1 and "tasks/none.tsk" in unknown_task.stderr
    bad_id = ml("dialogs", "show", "-C", str(proj), "zzz")
    assert bad_id.returncode == 1 and "no dialog" in bad_id.stderr
    bad_q = ml("answer", "-C", str(proj), "q4h-nope", "yes")
    assert bad_q.returncode == 1 and "no question" in bad_q.stderr
    bad_member = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "-m", "ghost", "hi")
    assert bad_member.returncode == 1 and "ghost" in bad_member.stderr
    debug = ml("--debug", "dialogs", "show", "-C", str(proj), "zzz")
    assert "Traceback" in debug.stderr
    (proj / ".minds" / "llm.yaml").write_text("providers: [\n")
    broken = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "hi")
    assert broken.returncode == 1 and ".minds/llm.yaml:" in broken.stderr


def test_invalid_tool_arguments_go_back_to_the_model(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    ml("init", str(proj))
    write_script(
        proj,
        [
            {"match": "go", "tool_calls": [{"name": "read_file", "arguments": '{"path": '}]},
            {
                "role": "tool",
                "contains": "invalid JSON",
                "tool_calls": [{"name": "read_file", "arguments": {"pth": "x"}}],
            },
            {"role": "tool", "contains": "ACCESS_DENIED", "response": "understood"},
            {
                "role": "tool",
                "contains": "path",
                "tool_calls": [{"name": "read_file", "arguments": {"path": "../../etc/passwd"}}],
            },
        ],
    )
    out = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "go")
    assert out.returncode == 0, out.stdout + out.stderr
    did = json.loads(ml("dialogs", "list", "-C", str(proj), "--json").stdout)[0]["id"]
    shown = json.loads(ml("dialogs", "show", "-C", str(proj), did, "--json").stdout)
    results = [m["data"] for m in shown["messages"] if m["kind"] == "tool_result"]
    assert [r["is_error"] for r in results] == [True, True, True]
    assert "invalid JSON" in results[0]["content"] and "ACCESS_DENIED" in results[2]["content"]


def test_step_limit_is_reported_with_its_exit_code(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    ml("init", str(proj))
    write_script(proj, [{"default": True, "tool_calls": [{"name": "list_dir", "arguments": {}}]}])
    out = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "--max-steps", "3", "loop")
    assert out.returncode == 3 and "step limit" in out.stdout


def test_q4h_via_questions_and_answer_commands(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    ml("init", str(proj))
    write_script(
        proj,
        [
            {"match": "go", "response": "!?@human Which database?\n!?Postgres or SQLite?\n"},
            {"role": "user", "contains": "answer from the human", "response": "SQLite it is."},
        ],
    )
    asked = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "go")
    assert asked.returncode == 4 and "mindloop answer" in asked.stdout  # waits on the human
    qs = json.loads(ml("questions", "-C", str(proj), "--json").stdout)
    assert len(qs) == 1 and qs[0]["body"] == "Postgres or SQLite?"
    tree = ml("dialogs", "tree", "-C", str(proj), "tasks/example.tsk")
    assert "waiting for the human" in tree.stdout
    ans = ml("answer", "-C", str(proj), qs[0]["id"], "SQLite")
    assert ans.returncode == 0 and "SQLite it is." in ans.stdout
    assert json.loads(ml("questions", "-C", str(proj), "--json").stdout) == []


def test_demo_runs_offline(tmp_path: Path) -> None:
    out = ml("demo", "--dir", str(tmp_path / "d"))
    assert out.returncode == 0, out.stdout + out.stderr
    for needle in ("change_mind", "FBR side dialog", "@reviewer", "question", "state:"):
        assert needle in out.stdout, needle
    assert (tmp_path / "d" / "CHANGELOG.md").is_file()
    again = ml("demo", "--dir", str(tmp_path / "d"))
    assert again.returncode == 1 and "not empty" in again.stderr


def test_demo_init_only_creates_the_project(tmp_path: Path) -> None:
    """`demo --init`: the demo's rtws for a human to play (in the browser); nothing runs."""
    out = ml("demo", "--init", "--dir", str(tmp_path / "d"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"mindloop web -C {tmp_path / 'd'}" in out.stdout
    assert (tmp_path / "d" / ".minds" / "team.yaml").is_file()
    assert (tmp_path / "d" / "tasks" / "example.tsk").is_dir()
    assert not (tmp_path / "d" / ".mindloop").exists()  # nothing ran, no state
    assert not (tmp_path / "d" / "CHANGELOG.md").exists()


def test_chat_without_a_task_gets_its_own_package(tmp_path: Path) -> None:
    """Reference acceptance 59: a dialog started without a Taskdoc gets tasks/<slug>.tsk/;
    with one package that one is used; with several the user must choose."""
    proj = tmp_path / "p"
    ml("init", str(proj))
    shutil.rmtree(proj / "tasks" / "example.tsk")
    out = ml("chat", "-C", str(proj), EXAMPLE)
    assert out.returncode == 0, out.stdout + out.stderr
    pkg = proj / "tasks" / "list-the-files-and-summarise.tsk"
    assert (pkg / "goals.md").read_text("utf-8").strip() == EXAMPLE
    assert "created tasks/list-the-files-and-summarise.tsk" in out.stdout
    (listed,) = json.loads(ml("dialogs", "list", "-C", str(proj), "--json").stdout)
    assert listed["task_path"] == "tasks/list-the-files-and-summarise.tsk"
    again = ml("chat", "-C", str(proj), EXAMPLE)  # the only package now: reused
    assert again.returncode == 0 and "created tasks/" not in again.stdout
    ml("task", "new", "other", "-C", str(proj))
    several = ml("chat", "-C", str(proj), EXAMPLE)
    assert several.returncode == 1 and "choose one with --task" in several.stderr
