"""ADJUST in plan mode (agent-loop §4 R5): a NEW node blocked only by FAILED or
CANCELLED deps can never start; ADJUST (with no current node) gets one entry to resolve
it — rewire its deps, replace it or cancel it. An entry that leaves it blocked, with
nothing come in since (no answer, no reply), is not repeated: the runtime cancels the
node with a conclusion naming the failed deps, tells the user, and the task ends by R8
(FAILED: its failed node). An answer the entry did not see earns one more entry."""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop.driver import LoopOutcome
from mindloop.testing import call
from mindloop.workspace import repo
from mindloop.workspace.models import NodeStatus
from tests.loop.loop_util import (
    TASK,
    WorkScript,
    complete,
    create,
    end,
    give_up,
    phases,
    run_task,
    turn,
    verdict,
)
from tests.scenario_util import write_team

# n1 fails for good; n2 depends on it
N1_FAILS = [
    turn(create("a")),  # PLAN
    turn(create("b", deps=["n1"]), end("DO")),
    turn(complete("n1"), end("CHECK")),  # DO n1
    turn(verdict("n1", ok=False), end("ADJUST")),  # CHECK n1: fails
    turn(give_up("n1", "the api cannot be reached"), end("END")),  # ADJUST n1: infeasible
]


def _transitions(rt: DialogRuntime, node: str) -> list[tuple[str, str, str]]:
    """The node's moves after its creation: (from, to, by)."""
    return [
        (e.data["from"], e.data["to"], e.data["by"])
        for e in repo.log(rt.store, TASK)
        if e.node_id == node and e.kind == "transition" and e.data["from"] is not None
    ]


async def test_a_plan_mode_entry_that_leaves_a_node_blocked_ends_the_task(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = WorkScript([*N1_FAILS, turn(end("END", "nothing to change"))])  # plan mode
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.FAILED, report.reason
    assert "n1" in report.reason and model.remaining == 0
    assert phases(model).count("ADJUST") == 2  # n1's entry, one plan-mode entry
    n2 = repo.load(rt.store, TASK).nodes["n2"]
    assert n2.status is NodeStatus.CANCELLED
    assert "n1" in (n2.conclusion or "") and "FAILED" in (n2.conclusion or "")
    assert _transitions(rt, "n2") == [("NEW", "CANCELLED", "RT")]
    history = rt.store.load_history(report.root_id)
    notes = [m.data["text"] for m in history if m.kind == "note"]
    assert any("n2" in n and "CANCELLED" in n for n in notes)
    # the plan-mode entry was told which nodes it is for, and what happens if it leaves them
    adjust = [m.data["text"] for m in history if m.data.get("loop", {}).get("phase") == "ADJUST"]
    assert "n2" in adjust[-1] and "cancel" in adjust[-1]
    await rt.aclose()


async def test_a_plan_mode_entry_that_rewires_the_node_lets_it_run(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = WorkScript(
        [
            *N1_FAILS,
            # plan mode: a replacement for n1, and n2 is cancelled for a new node over it
            turn(create("a2")),
            turn(
                call(
                    "node_transition",
                    node_id="n2",
                    to="CANCELLED",
                    reason="rewired",
                    conclusion="replaced by n4",
                ),
                create("b2", deps=["n3"]),
            ),
            turn(end("DO")),
            turn(complete("n3"), end("CHECK")),
            turn(verdict("n3"), end("DO")),
            turn(complete("n4"), end("CHECK")),
            turn(verdict("n4"), end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.FAILED, report.reason  # n1 stays FAILED
    assert model.remaining == 0
    nodes = repo.load(rt.store, TASK).nodes
    assert [nodes[n].status for n in ("n3", "n4")] == [NodeStatus.DONE] * 2
    assert _transitions(rt, "n2") == [("NEW", "CANCELLED", "ADJUST")]
    await rt.aclose()


async def test_an_answer_after_a_plan_mode_entry_earns_another(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = WorkScript(
        [
            *N1_FAILS,
            # plan mode asks, and ends waiting: the answer comes after the entry ended
            turn(end("WAIT", "asked"), text="!?@human Drop b, or retry the api later?\n"),
        ]
    )
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.WAITING, report.reason
    [q] = rt.store.open_questions()
    rt.answer_question(q.id, "drop it")
    await rt.aclose()
    # the answer came after the entry ended: a new entry reads it, and cancels n2 itself
    model = WorkScript(
        [
            turn(
                call(
                    "node_transition",
                    node_id="n2",
                    to="CANCELLED",
                    reason="the user dropped it",
                    conclusion="dropped by the user",
                ),
                end("END"),
            )
        ]
    )
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.FAILED, report.reason
    assert model.remaining == 0 and phases(model).count("ADJUST") == 1
    assert _transitions(rt, "n2") == [("NEW", "CANCELLED", "ADJUST")]
    await rt.aclose()
