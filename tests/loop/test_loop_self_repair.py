"""DO self-repair in the running loop (agent-loop §8.1–8.3, L2): the runtime sees DO's
self-check fail — a shell call running a `verify` command of the node's criteria, or
test runners only (`loop.check.test_runners`), that exits non-zero after the entry
changed something — and counts it (VERIFY_FAIL). From then on the entry may not change
anything (file writes, other shell commands, COMPLETE) until `retry_propose` records the
repair attempt (a RetryRecord, L2); a failed self-check once `loop.retries.do_repairs`
attempts are used ends the entry with its node CHECK_FAILED(DO_EXHAUSTED), whether or
not the model proposes again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from mindloop.loop.driver import LoopOutcome
from mindloop.loop.self_repair import (
    REPAIR_NOT_PROPOSED,
    RepairState,
    VerifyFail,
    repair_state,
    shell_passed,
)
from mindloop.providers.base import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from mindloop.store.retries import RetryRows
from mindloop.testing import Call, call
from mindloop.workspace import repo
from mindloop.workspace.models import NodeStatus
from tests.loop.loop_util import (
    TASK,
    WorkScript,
    complete,
    create,
    end,
    give_up,
    run_task,
    turn,
    verdict,
    work_phases,
    workspace,
)
from tests.scenario_util import write_team

VERIFY = "grep -q fixed out.txt"
REFUSED = f"Error [{REPAIR_NOT_PROPOSED}]"


def team(rtws: Path, loop: dict[str, Any] | None = None) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs", "shell"]}})
    if loop:
        path = rtws / ".minds" / "team.yaml"
        data = yaml.safe_load(path.read_text("utf-8"))
        data["loop"] = loop
        path.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")


def write(content: str, path: str = "out.txt") -> Call:
    return call("write_file", path=path, content=content)


def shell(command: str = VERIFY) -> Call:
    return call("run_shell", command=command)


def repair(summary: str) -> Call:
    return call(
        "retry_propose",
        failure_class="VERIFY_FAIL",
        evidence=f"{VERIFY}: exit code 1",
        reflection=f"out.txt lacks the marker; {summary}",
        change_kind="STRATEGY",
        change_summary=summary,
    )


def results(rt: Any, root: str) -> list[tuple[str, bool, str]]:
    return [
        (m.data["name"], m.data["is_error"], m.data["content"])
        for m in rt.store.load_history(root)
        if m.kind == "tool_result"
    ]


def moves(rt: Any, node: str = "n1") -> list[tuple[str, str, str, str]]:
    return [
        (e.data["from"], e.data["to"], e.data["by"], e.data["reason"])
        for e in repo.log(rt.store, TASK)
        if e.node_id == node and e.kind == "transition"
    ]


async def test_a_failed_self_check_blocks_changes_until_a_repair_and_the_third_ends_do(
    rtws: Path,
) -> None:
    team(rtws)
    model = WorkScript(
        [
            turn(create("marker", verify=VERIFY, step_budget=20), end("DO")),  # PLAN
            turn(shell()),  # DO: a baseline run before any change is no self-check
            turn(write("broken\n")),
            turn(shell()),  # VERIFY_FAIL: the first self-check fails
            turn(write("still broken\n")),  # refused: no repair proposed yet
            turn(complete("n1")),  # refused: COMPLETE after a failed self-check
            turn(shell()),  # running the self-check again is allowed (still fails)
            turn(repair("write the marker")),  # attempt 1 of 2: recorded
            turn(write("nearly\n")),
            turn(shell()),  # fails again
            turn(repair("write the marker on its own line")),  # attempt 2 of 2
            turn(write("almost\n")),
            turn(shell()),  # the third failure: DO_EXHAUSTED, no proposal needed
            turn(give_up("n1", "the marker cannot be written"), end("END")),  # ADJUST
        ]
    )
    report, rt = await run_task(rtws, model, "write the marker")
    assert report.outcome is LoopOutcome.FAILED and model.remaining == 0, report.reason
    assert work_phases(model) == ["PLAN", *["DO"] * 12, "ADJUST", "SELF_IMPROVE"]
    out = [r for r in results(rt, report.root_id) if r[0] != "node_create"]
    do = out[1:]  # after PLAN's phase_end
    assert do[0][:2] == ("run_shell", False) and do[0][2].startswith("exit code 2")  # no file
    assert do[1][:2] == ("write_file", False)
    refused_write, refused_complete = do[3], do[4]
    assert refused_write[1] and refused_write[2].startswith(REFUSED), refused_write
    assert "VERIFY_FAIL" in refused_write[2] and VERIFY in refused_write[2]
    assert "retry_propose" in refused_write[2] and "attempt 1 of 2" in refused_write[2]
    assert refused_complete[0] == "node_transition" and refused_complete[2].startswith(REFUSED)
    assert do[5] == ("run_shell", False, "exit code 1\n(no output)")
    assert do[6][2].startswith("ACCEPTED: DO self-repair attempt 1 of 2")
    assert do[9][2].startswith("ACCEPTED: DO self-repair attempt 2 of 2")
    # nothing after the third failure: then ADJUST's two calls, a phase_end per review entry
    assert len(do) == 12 + 2 + model.self_improve
    assert (rtws / "out.txt").read_text() == "almost\n"  # the refused write never ran
    records = RetryRows(rt.store).of_node(TASK, "n1")
    assert [(r.level, r.attempt, r.failure_class) for r in records] == [
        ("L2", 1, "VERIFY_FAIL"),
        ("L2", 2, "VERIFY_FAIL"),
    ]
    [failed] = [m for m in moves(rt) if m[1] == "CHECK_FAILED"]
    assert failed[:3] == ("IN_PROGRESS", "CHECK_FAILED", "RT")
    assert failed[3].startswith("DO_EXHAUSTED:") and VERIFY in failed[3]
    assert "loop.retries.do_repairs" in failed[3]
    await rt.aclose()


async def test_a_repair_that_passes_its_self_check_completes_the_node(rtws: Path) -> None:
    team(rtws)
    model = WorkScript(
        [
            turn(create("marker", verify=VERIFY), end("DO")),  # PLAN
            turn(write("broken\n")),  # DO
            turn(shell()),  # VERIFY_FAIL
            turn(repair("write the marker")),
            turn(write("fixed\n")),
            turn(shell()),  # passes
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),  # CHECK
        ]
    )
    report, rt = await run_task(rtws, model, "write the marker")
    assert report.outcome is LoopOutcome.DONE and model.remaining == 0, report.reason
    assert not any(content.startswith(REFUSED) for _, _, content in results(rt, report.root_id))
    [record] = RetryRows(rt.store).of_node(TASK, "n1")
    assert (record.level, record.attempt, record.change_summary) == ("L2", 1, "write the marker")
    assert workspace(rt).nodes["n1"].status is NodeStatus.DONE
    await rt.aclose()


async def test_a_test_runner_failing_is_a_self_check_and_no_repairs_end_do_at_once(
    rtws: Path,
) -> None:
    """`loop.check.test_runners` names the project's checks (lint, types, tests): one that
    exits non-zero after a change is a failed self-check too; with
    `loop.retries.do_repairs: 0` the first one ends the entry."""
    team(rtws, {"retries": {"do_repairs": 0}, "check": {"test_runners": ["sh check.sh"]}})
    model = WorkScript(
        [
            turn(create("checked", verify="MANUAL: read it"), end("DO")),  # PLAN
            turn(write("exit 3\n", "check.sh")),  # DO
            turn(shell("sh check.sh")),  # exit code 3: VERIFY_FAIL, no repair allowed
            turn(give_up("n1", "the check cannot pass"), end("END")),  # ADJUST
        ]
    )
    report, rt = await run_task(rtws, model, "make the check pass")
    assert report.outcome is LoopOutcome.FAILED and model.remaining == 0, report.reason
    assert work_phases(model) == ["PLAN", "DO", "DO", "ADJUST", "SELF_IMPROVE"]
    [failed] = [m for m in moves(rt) if m[1] == "CHECK_FAILED"]
    assert failed[2] == "RT" and failed[3].startswith("DO_EXHAUSTED:")
    assert "sh check.sh" in failed[3] and "exit code 3" in failed[3]
    assert RetryRows(rt.store).of_node(TASK, "n1") == []
    await rt.aclose()


# ---------------------------------------------------------------------- the rule, pure


def _call(cid: str, name: str, **args: Any) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(id=cid, name=name, arguments=json.dumps(args))])


def _result(cid: str, name: str, content: str, is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(call_id=cid, name=name, content=content, is_error=is_error)


def _state(*messages: Any) -> RepairState:
    return repair_state(list(messages), lambda c: c.startswith(("pytest", VERIFY)))


DO_INPUT = UserMessage(text="[work loop] Phase DO (entry 2).\n\n## Node …")
WROTE = (_call("w", "write_file", path="a.py"), _result("w", "write_file", "wrote a.py"))


def _check(cid: str, status: str, command: str = "pytest -q") -> tuple[Any, Any]:
    return (_call(cid, "run_shell", command=command), _result(cid, "run_shell", status))


def test_a_failing_check_counts_only_after_a_change() -> None:
    assert _state(DO_INPUT, *_check("c", "exit code 1\nFAILED")).pending is None  # baseline
    st = _state(DO_INPUT, *WROTE, *_check("c", "exit code 1\nFAILED"))
    assert st.pending == VerifyFail(command="pytest -q", status="exit code 1")
    # timed out and killed fail too; a refused or unrun call is no self-check
    for status in ("timed out after 60s; process group killed\n", "killed by signal SIGKILL\n"):
        assert _state(DO_INPUT, *WROTE, *_check("c", status)).pending is not None
    refused = "Error [TOOL_NOT_ALLOWED_IN_PHASE]: …"
    assert _state(DO_INPUT, *WROTE, *_check("c", refused)).pending is None


def test_what_counts_as_a_change() -> None:
    failed_write = (
        _call("w", "write_file", path="a.py"),
        _result("w", "write_file", "Error: denied", is_error=True),
    )
    assert _state(DO_INPUT, *failed_write, *_check("c", "exit code 1\n")).pending is None
    other = _check("s", "exit code 0\n", command="sed -i s/a/b/ a.py")  # not a self-check
    assert _state(DO_INPUT, *other, *_check("c", "exit code 1\n")).pending is not None
    verify = _check("v", "exit code 1\n", command=VERIFY)  # the node's verify command
    assert _state(DO_INPUT, *WROTE, *verify).pending is not None


def test_a_pass_or_an_accepted_attempt_answers_it_and_only_this_entry_counts() -> None:
    failing = (*WROTE, *_check("c1", "exit code 1\n"))
    assert _state(DO_INPUT, *failing, *_check("c2", "exit code 0\n")).pending is None
    accepted = (
        _call("r", "retry_propose"),
        _result("r", "retry_propose", "ACCEPTED: DO self-repair attempt 1 of 2 for n1 …"),
    )
    st = _state(DO_INPUT, *failing, *accepted)
    assert (st.pending, st.attempts) == (None, 1)
    st = _state(DO_INPUT, *failing, *accepted, *_check("c3", "exit code 1\n"))  # no change yet
    assert (st.pending, st.attempts) == (None, 1)
    st = _state(DO_INPUT, *failing, *accepted, *WROTE, *_check("c4", "exit code 1\n"))
    assert st.pending is not None and st.attempts == 1
    rejected = (
        _call("r2", "retry_propose"),
        _result("r2", "retry_propose", "Error [RETRY_FINGERPRINT_REPEATED]: …", is_error=True),
    )
    assert _state(DO_INPUT, *failing, *rejected).pending is not None
    # an earlier DO entry (here a Chinese phase input starts the current one) is not counted
    zh = UserMessage(text="[工作循环] 阶段 DO（第 4 次进入）。")
    assert _state(DO_INPUT, *failing, zh).pending is None
    assert _state(DO_INPUT, *failing, zh, *WROTE, *_check("c", "exit code 2\n")).pending


@given(st.integers(min_value=-255, max_value=255), st.text(max_size=40))
def test_a_shell_status_line_is_read_as_the_tool_writes_it(code: int, output: str) -> None:
    assert shell_passed(f"exit code {code}\n{output}") is (code == 0)
    ran = ("exit code ", "timed out after ", "killed by signal ")
    assert shell_passed(output if not output.startswith(ran) else "x") is None
