"""`mindloop run TASK` and `mindloop status TASK` as a user runs them (issue 12, part 5):
the live loop lines, the exit codes (0 DONE, 4 waiting on the human, 5 FAILED), a question
answered continuing the loop, and `run` without a task resuming task loops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.scenario_util import ml, write_script

TASK = "tasks/example.tsk"


def _create(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "node_create",
        "arguments": {
            "parent_id": "root",
            "kind": "EXECUTION",
            "title": title,
            "requirement": f"do {title}",
            "acceptance_criteria": [{"when": "done", "then": "works", "verify": "true"}],
            **extra,
        },
    }


def _end(hint: str, progress: str = "ok") -> dict[str, Any]:
    return {
        "name": "phase_end",
        "arguments": {"next_behavior": hint, "summary": {"progress": progress}, "reason": "r"},
    }


def _move(node: str, to: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "node_transition",
        "arguments": {"node_id": node, "to": to, "reason": "r", **extra},
    }


COMPLETE = {
    "self_check": [{"criterion": "AC1", "passed": True}],
    "no_artifacts_reason": "a demo node",
}

# One node, planned, done, checked; a question on the way when the task asks for it.
SCRIPT = [
    # first: SELF_IMPROVE's input quotes earlier messages of the dialog
    {"contains": "Phase SELF_IMPROVE (entry", "tool_calls": [_end("END", "tidied")]},
    # PLAN sees the user's message (it comes just before its input); the node's title
    # carries what later phases must know (their context is the last few turns)
    {"contains": ["Phase PLAN (entry", "ask first"], "tool_calls": [_create("careful greeting")]},
    {"contains": ["Phase PLAN (entry", "fail it"], "tool_calls": [_create("doomed greeting")]},
    {"contains": "Phase PLAN (entry", "tool_calls": [_create("greeting")]},
    {"role": "tool", "contains": "created n1", "tool_calls": [_end("DO", "planned")]},
    {"contains": ["Phase DO (entry", "careful"], "response": "!?@human Formal or casual?\n"},
    {"contains": "answer from the human", "tool_calls": [_move("n1", "COMPLETE", **COMPLETE)]},
    {"contains": "Phase DO (entry", "tool_calls": [_move("n1", "COMPLETE", **COMPLETE)]},
    {"role": "tool", "contains": "IN_PROGRESS → COMPLETE", "tool_calls": [_end("CHECK")]},
    {
        "contains": ["Phase CHECK (entry", "doomed"],
        "tool_calls": [_move("n1", "CHECK_FAILED"), _end("ADJUST")],
    },
    {
        "contains": "Phase CHECK (entry",
        "tool_calls": [_move("n1", "DONE", conclusion="greets"), _end("END", "all done")],
    },
    {
        "contains": "Phase ADJUST (entry",
        "tool_calls": [_move("n1", "FAILED", conclusion="cannot"), _end("END")],
    },
]


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(proj, SCRIPT)
    return proj


def test_run_task_drives_the_loop_to_done_with_live_lines_and_status(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    out = ml("run", TASK, "-m", "greet the user", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    for line in (
        "━━ PLAN (entry 1)",
        "━━ DO (entry 2) · node n1",
        "━━ CHECK (entry 3)",
        "━━ SELF_IMPROVE (entry 4)",
        "1/1 nodes",
        "task tasks/example.tsk: done",
    ):
        assert line in out.stdout, out.stdout[-3000:]
    st = ml("status", TASK, "--json", "-C", str(proj), cwd=tmp_path)
    assert st.returncode == 0, st.stderr
    data = json.loads(st.stdout)
    assert data["status"] == "DONE" and data["phase"] == "SELF_IMPROVE" and data["entry"] == 4
    assert [(n["id"], n["status"]) for n in data["nodes"]] == [("root", "DONE"), ("n1", "DONE")]
    assert data["done"] == data["total"] == 1 and data["usage"]["generations"] >= 5
    # the run's usage (its only drives so far) and the task's, in the one CLI format
    u = data["usage"]
    assert u["input_tokens"] > 0 and u["output_tokens"] > 0 and u["unpriced"] == 0
    usage = (
        f"usage: {u['generations']} generations · {u['input_tokens']:,} tokens in / "
        f"{u['output_tokens']:,} out · $0.00"
    )
    assert f"{usage} (this run)" in out.stdout.splitlines(), out.stdout[-3000:]
    human = ml("status", TASK, "-C", str(proj), cwd=tmp_path)
    assert usage in human.stdout.splitlines(), human.stdout
    assert "✓ n1 DONE TASK greeting" in human.stdout and "1/1 nodes" in human.stdout
    # again: nothing to do, still done
    again = ml("run", TASK, "--json", "-C", str(proj), cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["outcome"] == "done"


def test_a_question_exits_4_and_the_answer_continues_the_loop(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    out = ml("run", TASK, "-m", "greet the user, but ask first", *c, cwd=tmp_path)
    assert out.returncode == 4, out.stdout[-3000:] + out.stderr
    assert "answer with: mindloop answer" in out.stdout
    [q] = json.loads(ml("questions", "--json", *c, cwd=tmp_path).stdout)
    st = json.loads(ml("status", TASK, "--json", *c, cwd=tmp_path).stdout)
    assert st["status"] == "WAITING" and st["phase"] == "DO" and st["in_phase"]
    assert [x["id"] for x in st["questions"]] == [q["id"]]
    answered = ml("answer", q["id"], "casual", *c, cwd=tmp_path)
    assert answered.returncode == 0, answered.stdout[-3000:] + answered.stderr
    st = json.loads(ml("status", TASK, "--json", *c, cwd=tmp_path).stdout)
    assert st["status"] == "DONE" and st["questions"] == []


def test_a_failed_task_exits_5(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    out = ml("run", TASK, "-m", "greet, and fail it", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 5, out.stdout[-3000:] + out.stderr
    assert "task tasks/example.tsk: failed" in out.stdout


def test_run_without_a_task_resumes_task_loops(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    out = ml("run", TASK, "-m", "greet the user, but ask first", *c, cwd=tmp_path)
    assert out.returncode == 4
    [q] = json.loads(ml("questions", "--json", *c, cwd=tmp_path).stdout)
    assert ml("answer", q["id"], "casual", "--no-drive", *c, cwd=tmp_path).returncode == 0
    ran = ml("run", "--json", *c, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
    report = json.loads(ran.stdout)["report"]
    assert [(x["task"], x["outcome"]) for x in report["loops"]] == [(TASK, "done")]


def test_bad_input_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    missing = ml("run", "tasks/nope.tsk", *c, cwd=tmp_path)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert ml("run", "-m", "hi", *c, cwd=tmp_path).returncode != 0
    assert not (proj / ".mindloop" / "state.sqlite").exists()
    status = ml("status", TASK, "--json", *c, cwd=tmp_path)
    assert status.returncode == 0 and json.loads(status.stdout)["bound"] is False


def test_ask_exits_5_when_the_task_failed(tmp_path: Path) -> None:
    """`ask` reports the task's loop like `run TASK` does: a FAILED task exits 5."""
    from tests.loop.router_util import route

    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(proj, [route(match="greet", target_task_id=TASK), *SCRIPT])
    out = ml("ask", "greet, and fail it", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 5, out.stdout[-3000:] + out.stderr
    assert "task tasks/example.tsk: failed" in out.stdout
    data = json.loads(ml("status", TASK, "--json", "-C", str(proj), cwd=tmp_path).stdout)
    assert data["status"] == "FAILED"


def test_a_task_cap_ends_run_task_with_exit_3_naming_the_cap(tmp_path: Path) -> None:
    """`caps.task` is the task's budget: reached, `run TASK` stops with exit 3 and says
    which cap and where to raise it (a drive cap would ask instead: tests/loop)."""
    import yaml

    proj = _project(tmp_path)
    team = proj / ".minds" / "team.yaml"
    data = yaml.safe_load(team.read_text("utf-8"))
    data["caps"] = {"task": {"max_tokens": 50}}  # the first request is larger
    team.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    out = ml("run", TASK, "-m", "greet the user", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "caps.task.max_tokens" in out.stdout + out.stderr


def test_ctrl_c_during_run_task_exits_130_and_run_task_goes_on(tmp_path: Path) -> None:
    """Ctrl-C while a phase's generation streams: exit 130, the state saved; the next
    `run TASK` resumes the interrupted phase and carries the task to DONE."""
    import signal

    from tests.scenario_util import ml_started

    proj = _project(tmp_path)
    slow = {
        "contains": "Phase PLAN (entry",
        "response": "thinking it over",
        "chunk_delay_ms": 60000,
    }
    write_script(proj, [slow, *SCRIPT])
    proc = ml_started("run", TASK, "-m", "greet", "-C", str(proj), cwd=tmp_path)
    assert proc.stdout is not None
    seen = ""
    while "thinking" not in seen:  # the first word is out, the rest a minute away
        char = proc.stdout.read(1)
        assert char, proc.communicate(timeout=5)
        seen += char
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; state is saved" in err and "Traceback" not in err
    write_script(proj, SCRIPT)  # the model answers at once now
    again = ml("run", TASK, "-C", str(proj), cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    st = json.loads(ml("status", TASK, "--json", "-C", str(proj), cwd=tmp_path).stdout)
    assert st["status"] == "DONE"
