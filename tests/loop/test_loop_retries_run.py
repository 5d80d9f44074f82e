"""Retries in the running loop (agent-loop §8.2–8.3, issue 12 part 6): DO records each
self-repair attempt and ADJUST each cycle with `retry_propose`; the runtime writes the
RetryRecord or rejects the retry (a repeated fingerprint, rules (a)–(e)); DO self-repair
ends at 2 attempts per entry with CHECK_FAILED(DO_EXHAUSTED); a node goes back to work
from ADJUST only on an accepted cycle, at most 3, after which the runtime fails it and
tells the user. `mindloop status TASK` lists the records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from mindloop.loop.api import task_status
from mindloop.loop.driver import LoopOutcome
from mindloop.store.retries import RetryRows
from mindloop.testing import Call, ScriptedModel, call
from mindloop.workspace import repo
from mindloop.workspace.models import NodeStatus
from tests.loop.loop_util import (
    TASK,
    WorkScript,
    complete,
    create,
    cycle,
    end,
    phases,
    retry,
    run_task,
    turn,
    verdict,
    work_phases,
)
from tests.scenario_util import write_team


def write(path: str, content: str) -> Call:
    return call("write_file", path=path, content=content)


def repair(summary: str, kind: str = "STRATEGY") -> Call:
    """A DO self-repair attempt, recorded after its change (the fingerprint is the
    workspace's diff as it is then)."""
    return call(
        "retry_propose",
        failure_class="VERIFY_FAIL",
        evidence="FAILED test_parse.py::test_empty - IndexError at parser.py:3",
        reflection=f"the parser indexes an empty list; {summary}",
        change_kind=kind,
        change_summary=summary,
    )


def results(rt: Any, root: str) -> list[dict[str, Any]]:
    return [m.data for m in rt.store.load_history(root) if m.kind == "tool_result"]


def moves(rt: Any, node: str = "n1") -> list[tuple[str, str, str, str]]:
    return [
        (e.data["from"], e.data["to"], e.data["by"], e.data["reason"])
        for e in repo.log(rt.store, TASK)
        if e.node_id == node and e.kind == "transition"
    ]


async def test_do_self_repair_is_recorded_a_repeat_is_rejected_and_two_end_the_entry(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("parser"), end("DO")),  # PLAN
            turn(write("parser.py", "def parse(s): return s.split()[0]\n")),  # DO: a try
            turn(write("parser.py", "def parse(s): return (s.split() or [''])[0]\n")),
            turn(repair("default to an empty token")),  # attempt 1: recorded
            turn(repair("retry with other params", kind="PARAMS")),  # nothing changed since
            turn(write("parser.py", "def parse(s):\n    return s.split()[0] if s else ''\n")),
            turn(repair("guard the empty string")),  # attempt 2: recorded
            turn(write("parser.py", "import shlex\ndef parse(s): return shlex.split(s)[:1]\n")),
            turn(repair("use shlex")),  # a third: DO_EXHAUSTED ends the entry
            # ADJUST sees the two reflections and gives up on the node
            turn(
                call(
                    "node_transition",
                    node_id="n1",
                    to="FAILED",
                    reason="TOO_HARD",
                    conclusion="two repairs failed",
                ),
                end("END"),
            ),
            turn(end("END")),  # SELF_IMPROVE
        ]
    )
    report, rt = await run_task(rtws, model, "write the parser")
    assert report.outcome is LoopOutcome.FAILED, report.reason
    assert model.remaining == 0
    assert phases(model) == ["PLAN", *["DO"] * 8, "ADJUST", "SELF_IMPROVE"]
    out = [r["content"] for r in results(rt, report.root_id) if r["name"] == "retry_propose"]
    assert out[0].startswith("ACCEPTED: DO self-repair attempt 1 of 2")
    assert out[1].startswith("Error [RETRY_FINGERPRINT_REPEATED]")
    assert out[2].startswith("ACCEPTED: DO self-repair attempt 2 of 2")
    assert out[3].startswith("DO_EXHAUSTED")
    records = RetryRows(rt.store).of_node(TASK, "n1")
    assert [(r.level, r.attempt, r.change_kind) for r in records] == [
        ("L2", 1, "STRATEGY"),
        ("L2", 2, "STRATEGY"),
    ]
    assert len({r.fingerprint for r in records}) == 2
    [failed] = [m for m in moves(rt) if m[1] == "CHECK_FAILED"]
    assert failed[:3] == ("IN_PROGRESS", "CHECK_FAILED", "RT")
    assert failed[3].startswith("DO_EXHAUSTED:")
    inputs = [m.data["text"] for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    adjust = next(t for t in inputs if t.startswith("[work loop] Phase ADJUST"))
    assert "DO_EXHAUSTED" in adjust and "guard the empty string" in adjust  # reflections
    st = task_status(rt.store, TASK)
    assert st.retries == 2 and [(r.node, r.level) for r in st.retry_records] == [
        ("n1", "L2"),
        ("n1", "L2"),
    ]
    await rt.aclose()


async def test_adjust_needs_an_accepted_cycle_and_the_fourth_fails_the_node(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    fail = turn(verdict("n1", ok=False), end("ADJUST"))
    again = [turn(complete("n1"), end("CHECK")), fail]  # DO, then CHECK fails it again
    model = WorkScript(
        [
            turn(create("parser"), end("DO")),  # PLAN
            *again,
            # ADJUST 1: straight back to work is refused; the cycle first
            turn(retry("n1")),
            turn(cycle("handle empty input first")),
            turn(retry("n1"), end("DO")),
            *again,
            # ADJUST 2: the same plan again is refused (fingerprint); another one is taken
            turn(cycle("Handle  EMPTY input first!")),
            turn(cycle("validate the input before parsing", kind="PARAMS")),
            turn(retry("n1"), end("DO")),
            *again,
            # ADJUST 3: the third cycle must be structural
            turn(cycle("split parsing into a lexer and a parser", kind="TOOL")),
            turn(cycle("split parsing into a lexer and a parser", kind="DECOMPOSE")),
            turn(retry("n1"), end("DO")),
            *again,
            # no ADJUST 4: the runtime fails the node and tells the user
        ]
    )
    report, rt = await run_task(rtws, model, "write the parser")
    assert report.outcome is LoopOutcome.FAILED and "n1" in report.reason
    assert model.remaining == 0
    assert phases(model).count("ADJUST") == 9 and work_phases(model)[-2:] == [
        "CHECK",
        "SELF_IMPROVE",
    ]
    out = [
        r["content"]
        for r in results(rt, report.root_id)
        if r["name"] in ("retry_propose", "node_transition")
    ]
    assert "RETRY_RECORD_REQUIRED" in out[2]  # after DO's COMPLETE and CHECK's CHECK_FAILED
    assert any(o.startswith("Error [RETRY_FINGERPRINT_REPEATED]") for o in out)
    assert any(o.startswith("Error [RETRY_NOT_STRUCTURAL]") for o in out)
    accepted = [o for o in out if o.startswith("ACCEPTED: ADJUST cycle")]
    assert [a.split(" of ")[0] for a in accepted] == [
        "ACCEPTED: ADJUST cycle 1",
        "ACCEPTED: ADJUST cycle 2",
        "ACCEPTED: ADJUST cycle 3",
    ]
    n1 = repo.load(rt.store, TASK).nodes["n1"]
    assert n1.status is NodeStatus.FAILED and n1.adjust_count == 3
    assert "3 ADJUST cycles" in n1.conclusion
    assert moves(rt)[-1][:3] == ("ADJUSTING", "FAILED", "RT")
    # the user is told: a note in the loop root, and the run's reason
    notes = [m.data["text"] for m in rt.store.load_history(report.root_id) if m.kind == "note"]
    assert any("n1" in n and "FAILED" in n and "loop.retries.adjust_per_node" in n for n in notes)
    st = task_status(rt.store, TASK)
    assert st.retries == 3 and {r.level for r in st.retry_records} == {"L3"}
    from mindloop.cli import loop_cmds

    console = Console(width=200, record=True)
    loop_cmds.console = console  # `mindloop status TASK`, as printed
    try:
        loop_cmds.show_status(st)
    finally:
        from mindloop.cli.common import console as shared

        loop_cmds.console = shared
    text = console.export_text()
    assert "retries 3" in text
    assert "n1 L3 #3 DECOMPOSE: split parsing into a lexer and a parser" in text
    await rt.aclose()


async def test_relaxing_a_criterion_waits_for_the_humans_approval_and_then_counts(
    rtws: Path,
) -> None:
    """Rule (e): an ADJUST cycle that relaxes an acceptance criterion does not run until
    the human approves it: the call waits (WAIT_USER_APPROVAL), the task stops waiting on
    the human (exit 4); approved, the very call runs under that approval and its record
    names it, and the node goes back to work."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    relax = call(
        "retry_propose",
        failure_class="CHECK_FAIL",
        evidence="check report: AC1 wants 1 s, the API answers in 1.4 s",
        reflection="the criterion is stricter than the user needs",
        change_kind="ACCEPTANCE",
        change_summary="accept answers within 2 s",
        plan="relax AC1 to 2 s",
        relaxes_acceptance=True,
    )
    model = WorkScript(
        [
            turn(create("api"), end("DO")),  # PLAN
            turn(complete("n1"), end("CHECK")),  # DO
            turn(verdict("n1", ok=False), end("ADJUST")),  # CHECK fails it
            turn(relax),  # ADJUST: waits for the human
            turn(retry("n1"), end("DO")),  # after the approval: back to work
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "build the api")
    assert report.outcome is LoopOutcome.WAITING and "approval" in report.reason
    [pending] = rt.pending_approvals()
    assert pending.tool == "retry_propose"
    assert RetryRows(rt.store).of_node(TASK, "n1") == []  # not run before the approval
    rt.approve(pending.id)
    await rt.aclose()
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE and model.remaining == 0, report.reason
    [record] = RetryRows(rt.store).of_node(TASK, "n1")
    assert (record.level, record.change_kind, record.approval_id) == (
        "L3",
        "ACCEPTANCE",
        pending.id,
    )
    assert work_phases(model) == [
        "PLAN",
        "DO",
        "CHECK",
        "ADJUST",
        "ADJUST",
        "DO",
        "CHECK",
        "SELF_IMPROVE",
    ]
    await rt.aclose()
