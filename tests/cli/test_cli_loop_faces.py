"""The loop as the human sees it between runs (issue 12 audit, CLI): `questions` in an
80-column terminal, `answer` / `approve` / `ask` showing the loop like `run TASK`, the
exit codes in every driving command's help, `status` after an error and while a question
waits, one error line per failure, and a fresh `init` whose task runs at once."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.cli.test_cli_loop import COMPLETE, SCRIPT, TASK, _create, _end, _move
from tests.scenario_util import ml, write_script, write_team

NARROW = {"COLUMNS": "80"}
WRITE = {"name": "write_file", "arguments": {"path": "out.txt", "content": "hi\n"}}


def _project(tmp_path: Path, script: list[dict[str, Any]] = SCRIPT) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(proj, script)
    return proj


def _asked(tmp_path: Path) -> tuple[Path, str]:
    """A task whose DO asks the human: `run TASK` exits 4; the question's id."""
    proj = _project(tmp_path)
    out = ml("run", TASK, "-m", "greet the user, but ask first", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 4, out.stdout[-3000:] + out.stderr
    [q] = json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    return proj, q["id"]


def test_questions_show_whole_ids_and_the_task_in_80_columns(tmp_path: Path) -> None:
    proj, qid = _asked(tmp_path)
    out = ml("questions", "-C", str(proj), cwd=tmp_path, env=NARROW)
    assert out.returncode == 0, out.stderr
    assert max(len(line) for line in out.stdout.splitlines()) <= 80
    assert qid in out.stdout, out.stdout  # on one line, never cut
    assert "task" in out.stdout.splitlines()[1] and TASK in out.stdout, out.stdout
    [item] = json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    assert item["task"] == TASK


def test_answer_shows_the_loop_as_run_task_does(tmp_path: Path) -> None:
    proj, qid = _asked(tmp_path)
    out = ml("answer", qid, "casual", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    for line in ("━━ CHECK (entry", "━━ SELF_IMPROVE (entry", "→ CHECK", "1/1 nodes"):
        assert line in out.stdout, out.stdout[-3000:]
    assert f"task {TASK}: done" in out.stdout
    assert "--dialog" not in out.stdout
    assert f"`mindloop status {TASK}` shows it" in out.stdout


def test_approve_and_ask_show_the_loop_and_the_run_task_hint(tmp_path: Path) -> None:
    from tests.loop.router_util import route

    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_team(proj, {"dev": {"toolsets": ["fs"], "approval_required": ["write_file"]}})
    script = [
        route(match="write the file", target_task_id=TASK),
        {"contains": "Phase SELF_IMPROVE (entry", "tool_calls": [_end("END")]},
        {"contains": "Phase PLAN (entry", "tool_calls": [_create("file")]},
        {"role": "tool", "contains": "created n1", "tool_calls": [_end("DO")]},
        # n1 waits for the approval; DO takes it up again and the approved call runs first
        {"contains": "The human approved", "tool_calls": [_move("n1", "COMPLETE", **COMPLETE)]},
        {"contains": "Phase DO (entry", "tool_calls": [WRITE]},
        {"role": "tool", "contains": "IN_PROGRESS → COMPLETE", "tool_calls": [_end("CHECK")]},
        {
            "contains": "Phase CHECK (entry",
            "tool_calls": [_move("n1", "DONE", conclusion="written"), _end("END")],
        },
    ]
    write_script(proj, script)
    c = ("-C", str(proj))
    asked = ml("ask", "write the file", *c, cwd=tmp_path)
    assert asked.returncode == 4, asked.stdout[-3000:] + asked.stderr
    assert "━━ PLAN (entry 1)" in asked.stdout and "━━ DO (entry 2) · node n1" in asked.stdout
    assert f"task {TASK}: waiting" in asked.stdout
    assert "approve with: mindloop approve" in asked.stdout
    assert "--dialog" not in asked.stdout
    [item] = json.loads(ml("questions", "--json", *c, cwd=tmp_path).stdout)
    approved = ml("approve", item["id"], *c, cwd=tmp_path)
    assert approved.returncode == 0, approved.stdout[-3000:] + approved.stderr
    assert "━━ DO (entry 3) · node n1" in approved.stdout
    assert "━━ CHECK (entry 4)" in approved.stdout and "1/1 nodes" in approved.stdout
    assert f"task {TASK}: done" in approved.stdout and "--dialog" not in approved.stdout
    assert (proj / "out.txt").read_text() == "hi\n"


def test_a_stopped_loop_points_to_run_task_not_to_a_dialog(tmp_path: Path) -> None:
    """An answer after which the loop stops on an error: the hint is `run TASK`."""
    proj, qid = _asked(tmp_path)
    write_script(proj, [s for s in SCRIPT if s.get("contains") != "answer from the human"])
    out = ml("answer", qid, "casual", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr
    assert f"task {TASK}: error" in out.stdout
    assert f"mindloop run -C {proj} {TASK}" in out.stdout and "--dialog" not in out.stdout


def test_every_driving_command_lists_its_exit_codes_and_a_usage_error_exits_2(
    tmp_path: Path,
) -> None:
    for cmd in ("chat", "ask", "run", "answer", "approve", "reject"):
        out = ml(cmd, "--help", cwd=tmp_path)
        flat = " ".join(out.stdout.replace("│", " ").split())
        for code in ("0 done", "1 error", "2 usage error", "4 waiting", "5 the task FAILED", "130"):
            assert code in flat, (cmd, code, flat)
    bad = ml("answer", cwd=tmp_path)
    assert bad.returncode == 2, bad.stderr
    bad = ml("run", "--no-such-option", cwd=tmp_path)
    assert bad.returncode == 2, bad.stderr


def test_run_task_says_an_error_once_and_status_says_the_loop_stopped(tmp_path: Path) -> None:
    proj = _project(tmp_path, [])  # nothing scripted: PLAN's first request fails
    out = ml("run", TASK, "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 1
    # the whole error once, in the live transcript (with the entry to paste) …
    assert out.stdout.count("Mock Response Not Found") == 1, out.stdout
    assert out.stdout.count("Append this entry") == 1
    # … one line on stderr per dialog that stopped on one, and the task's line
    [line] = out.stderr.splitlines()
    assert line.startswith("error: dialog ") and "Mock Response Not Found" in line
    assert f"task {TASK}: error" in out.stdout
    assert f"mindloop run -C {proj} {TASK}" in out.stdout
    st = ml("status", TASK, "-C", str(proj), cwd=tmp_path)
    assert st.returncode == 0, st.stderr
    head = st.stdout.splitlines()[:3]
    assert any("stopped on an error" in h for h in head), st.stdout
    assert any("Mock Response Not Found" in h for h in head), st.stdout
    data = json.loads(ml("status", TASK, "--json", "-C", str(proj), cwd=tmp_path).stdout)
    assert data["root_status"] == "error" and "Mock Response Not Found" in data["root_error"]


def test_status_shows_a_question_once_with_its_due_time_in_words(tmp_path: Path) -> None:
    proj, qid = _asked(tmp_path)
    st = ml("status", TASK, "-C", str(proj), cwd=tmp_path)
    assert st.returncode == 0, st.stderr
    assert st.stdout.count(qid) == 1, st.stdout
    assert re.search(r"in 4[78]h", st.stdout), st.stdout
    assert not re.search(r"\b1[0-9]{9}\b", st.stdout), st.stdout  # no raw epoch


def test_a_fresh_init_runs_its_example_task_to_done(tmp_path: Path) -> None:
    proj = tmp_path / "fresh"
    init = ml("init", str(proj), cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert f"mindloop run -C {proj} tasks/example.tsk" in " ".join(init.stdout.split())
    out = ml("run", "tasks/example.tsk", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert "task tasks/example.tsk: done" in out.stdout and "1/1 nodes" in out.stdout
    # the README's chat example still answers from the same script
    chat = ml(
        "chat",
        "-C",
        str(proj),
        "--task",
        "tasks/example.tsk",
        "list the files and summarise README.md",
        cwd=tmp_path,
    )
    assert chat.returncode == 0, chat.stdout[-3000:] + chat.stderr
