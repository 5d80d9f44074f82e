"""Bad input through the CLI: a clear error naming the file/line or argument, a non-zero
exit, and nothing changed on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scenario_util import ml, ml_started, write_script

EXAMPLE = "list the files and summarise README.md"


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _init(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    return proj


def test_reading_commands_outside_an_rtws_fail_and_create_nothing(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for cmd in (
        ["dialogs", "list"],
        ["dialogs", "list", "--json"],
        ["dialogs", "show", "abc"],
        ["dialogs", "tree", "tasks/x.tsk"],
        ["questions"],
        ["questions", "--json"],
        ["answer", "q4h-x", "yes"],
        ["run"],
        ["chat", "hi"],
    ):
        out = ml(*cmd, "-C", str(plain), cwd=tmp_path)
        assert out.returncode == 1, cmd
        assert "Traceback" not in out.stderr and out.stderr.startswith("error: "), cmd
        assert _tree(plain) == [], cmd


def test_reading_commands_on_a_fresh_rtws_show_nothing_and_create_no_state(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    assert ml("dialogs", "list", "-C", str(proj), cwd=tmp_path).stdout.strip() == "no dialogs yet"
    assert json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout) == []
    assert json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout) == []
    shown = ml("dialogs", "show", "abc", "-C", str(proj), cwd=tmp_path)
    assert shown.returncode == 1 and "no dialog with id 'abc'" in shown.stderr
    assert not (proj / ".mindloop").exists()


def test_tree_accepts_the_task_as_users_type_it_and_names_an_unknown_one(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    assert (
        ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", EXAMPLE, cwd=tmp_path).returncode
        == 0
    )
    for spelling in ("./tasks/example.tsk/", str(proj / "tasks" / "example.tsk")):
        out = ml("dialogs", "tree", "-C", str(proj), spelling, cwd=tmp_path)
        assert out.returncode == 0 and " root @dev [idle]" in out.stdout, spelling
        listed = ml("dialogs", "list", "--json", "--task", spelling, "-C", str(proj), cwd=tmp_path)
        assert len(json.loads(listed.stdout)) == 1, spelling
    bad = ml("dialogs", "tree", "-C", str(proj), "tasks/nope.tsk", cwd=tmp_path)
    assert bad.returncode == 1
    assert "'tasks/nope.tsk' is neither a task with dialogs nor a dialog id" in bad.stderr


def test_unknown_toolset_or_tool_is_a_file_line_error_before_anything_runs(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    team = proj / ".minds" / "team.yaml"
    team.write_text(
        team.read_text()
        + "  ux:\n    toolsets: [fss, '!shel', '!read_file']\n    tools: [read_fil, '!list_dir']\n"
    )
    lines = team.read_text().splitlines()
    toolsets_line = next(i for i, line in enumerate(lines, 1) if "fss" in line)
    tools_line = next(i for i, line in enumerate(lines, 1) if "read_fil," in line)
    check = ml("check", "-C", str(proj), cwd=tmp_path)
    assert check.returncode == 1
    assert check.stderr.splitlines()[:3] == [
        f".minds/team.yaml:{toolsets_line}: members.ux.toolsets.0: unknown toolset 'fss' "
        "(did you mean fs?); '*' selects all, '!name' excludes a toolset or one tool",
        f".minds/team.yaml:{toolsets_line}: members.ux.toolsets.1: unknown toolset 'shel' "
        "(did you mean shell?); '*' selects all, '!name' excludes a toolset or one tool",
        f".minds/team.yaml:{tools_line}: members.ux.tools.0: unknown tool 'read_fil' "
        "(did you mean read_file?); toolsets go under toolsets",
    ]
    # chat refuses too, even though the typo is in a member it would not talk to.
    chat = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", EXAMPLE, cwd=tmp_path)
    assert chat.returncode == 1 and "members.ux.toolsets.0: unknown toolset 'fss'" in chat.stderr
    assert not (proj / ".mindloop").exists()


def test_check_reports_a_missing_mock_script_and_warns_about_an_unset_key(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    (proj / ".minds" / "mock" / "mock-model.yaml").unlink()
    missing = ml("check", "-C", str(proj), cwd=tmp_path)
    assert missing.returncode == 1
    assert (
        ".minds/mock/mock-model.yaml: missing: mock model 'mock-model' of provider 'mock' "
        "(used by @dev) answers from this file" in missing.stderr
    )
    team = proj / ".minds" / "team.yaml"
    team.write_text(
        team.read_text()
        .replace("provider: mock", "provider: openai")
        .replace("model: mock-model", "model: gpt-4o-mini")
    )
    warned = ml("check", "-C", str(proj), cwd=tmp_path)
    assert warned.returncode == 0, warned.stderr
    assert (
        "warning: .minds/llm.yaml: providers.openai.api_key_env: the environment variable "
        "OPENAI_API_KEY is not set here; @dev cannot generate until it is" in warned.stderr
    )
    keyed = ml("check", "-C", str(proj), cwd=tmp_path, env={"OPENAI_API_KEY": "k"})
    assert keyed.returncode == 0 and "warning" not in keyed.stderr
    # The key is still needed at run time: chat fails with exit 1, naming the variable.
    chat = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "hi", cwd=tmp_path)
    assert chat.returncode == 1, chat.stdout
    assert "set the environment variable OPENAI_API_KEY" in chat.stdout + chat.stderr


def test_mock_script_problems_name_the_file_relative_to_the_rtws(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    script = proj / ".minds" / "mock" / "mock-model.yaml"
    script.write_text("responses:\n  - mtch: hi\n    response: yo\n")
    out = ml("check", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.startswith(".minds/mock/mock-model.yaml:2: ")
    assert str(proj) not in out.stderr


def test_the_entry_a_mock_miss_prints_can_be_pasted_into_the_scaffolded_script(
    tmp_path: Path,
) -> None:
    proj = _init(tmp_path)
    message = "hello there: what's new?\nsecond line"
    miss = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", message, cwd=tmp_path)
    assert miss.returncode == 1
    text = miss.stdout + miss.stderr
    assert text.count("Append this entry") == 1, text  # the full error is shown once
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Append this entry"))
    entry = [line for line in lines[start + 1 :] if line.strip()][:3]
    assert entry[0].startswith("  - match: ")
    script = proj / ".minds" / "mock" / "mock-model.yaml"
    with script.open("a") as fh:
        fh.write("\n".join(entry).replace("(what dev answers here)", "pasted answer") + "\n")
    assert "mindloop run --retry-errors -C" in miss.stdout
    assert ml("check", "-C", str(proj), cwd=tmp_path).returncode == 0
    # The failed dialog is driven again, answering the very message that missed …
    plain = ml("run", "-C", str(proj), cwd=tmp_path)
    assert plain.returncode == 0 and "0 drive(s)" in plain.stdout  # not without asking
    retried = ml("run", "--retry-errors", "-C", str(proj), cwd=tmp_path)
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert "@dev: pasted answer" in retried.stdout
    [dialog] = json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    shown = ml("dialogs", "show", dialog["id"], "--json", "-C", str(proj), cwd=tmp_path)
    kinds = [(m["kind"], m["data"].get("text")) for m in json.loads(shown.stdout)["messages"]]
    assert kinds == [("user", message), ("assistant", "pasted answer")]
    again = ml("run", "--retry-errors", "-C", str(proj), cwd=tmp_path).stdout
    assert "retrying 0 dialog(s)" in again and "0 drive(s)" in again  # answered: nothing to retry
    # … and a new dialog with the same message is answered too.
    hit = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", message, cwd=tmp_path)
    assert hit.returncode == 0 and "@dev: pasted answer" in hit.stdout


def test_a_message_with_rich_markup_is_printed_verbatim(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    write_script(proj, [{"match": "[bold]x[/bold]", "response": "ok"}])
    out = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "[bold]x[/bold]", cwd=tmp_path)
    assert out.returncode == 0 and "you: [bold]x[/bold]" in out.stdout


def test_ctrl_c_stops_cleanly_and_run_resumes_the_dialog(tmp_path: Path) -> None:
    import signal

    proj = _init(tmp_path)
    # The first word streams at once, the next only after a minute: Ctrl-C lands mid-answer.
    write_script(proj, [{"match": "go", "response": "partial words here", "chunk_delay_ms": 60000}])
    proc = ml_started("chat", "-C", str(proj), "-t", "tasks/example.tsk", "go", cwd=tmp_path)
    assert proc.stdout is not None
    seen = ""
    while "@dev: partial" not in seen:
        seen += proc.stdout.read(1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted; state is saved: `mindloop run -C" in err and "Traceback" not in err
    [dialog] = json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    assert (dialog["status"], dialog["needs_drive"]) == ("interrupted", True)
    # What was said before the interrupt is kept (shown apart: it is not a turn) …
    cut = ml("dialogs", "show", dialog["id"], "-C", str(proj), cwd=tmp_path).stdout
    assert "⏹ interrupted generation (re-run on resume, not in the history): partial" in cut
    write_script(proj, [{"match": "go", "response": "answer after resuming"}])
    resumed = ml("run", "-C", str(proj), cwd=tmp_path)
    assert resumed.returncode == 0 and "@dev: answer after resuming" in resumed.stdout
    shown = json.loads(
        ml("dialogs", "show", dialog["id"], "--json", "-C", str(proj), cwd=tmp_path).stdout
    )
    assert [m["kind"] for m in shown["messages"]] == ["user", "assistant"]
    [interrupted] = shown["interrupted_generations"]
    assert interrupted["text"].startswith("partial")


def test_an_empty_message_or_task_creates_no_dialog(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    empty = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "  ", cwd=tmp_path)
    assert empty.returncode == 1 and "the message is empty" in empty.stderr
    no_task = ml("chat", "-C", str(proj), "--task", "", "hi", cwd=tmp_path)
    assert no_task.returncode == 1 and "--task is empty" in no_task.stderr
    assert not (proj / ".mindloop").exists()


@pytest.mark.sqlite_only  # the state file itself
def test_a_damaged_state_file_is_a_one_line_error_and_is_left_alone(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    state = proj / ".mindloop" / "state.sqlite"
    state.parent.mkdir()
    state.write_bytes(b"not a database at all\n" * 100)
    for cmd in (["dialogs", "list"], ["chat", "--task", "tasks/example.tsk", "hi"], ["run"]):
        out = ml(*cmd, "-C", str(proj), cwd=tmp_path)
        assert out.returncode == 1, cmd
        assert out.stderr.strip().splitlines() == [
            f"error: {state.resolve()}: not a usable mindloop state database (file is not a "
            "database)"
        ], cmd
    assert state.read_bytes() == b"not a database at all\n" * 100


def test_the_example_chat_works_in_a_project_with_its_own_readme(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "README.md").write_text("# Their project\n\nSee README.md for details.\n")
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0  # keeps their README
    out = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", EXAMPLE, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr  # no loop up to the step limit
    assert out.stdout.count("⚙ read_file") == 1
    assert "@dev: I read README.md" in out.stdout
