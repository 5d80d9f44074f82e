"""The loop driver end to end on a scripted model (issue 12, part 4): PLAN → DO → CHECK →
… → SELF_IMPROVE → DONE, routed by the runtime from node statuses."""

from __future__ import annotations

from pathlib import Path

from mindloop.loop.driver import LoopOutcome
from mindloop.store import loop_state as ls
from mindloop.testing import ScriptedModel
from mindloop.workspace.models import NodeStatus
from tests.loop.loop_util import TASK, complete, create, end, phases, run_task, turn, verdict
from tests.loop.loop_util import workspace as ws_of
from tests.scenario_util import write_team


async def test_a_task_runs_plan_do_check_to_done(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            # PLAN: two nodes, the second after the first (calls of one step are checked
            # against the workspace as it was before the step: n1 exists from the next)
            turn(create("api")),
            turn(create("ui", deps=["n1"]), end("DO", "planned api then ui")),
            # DO n1
            turn(complete("n1")),
            turn(end("CHECK")),
            # CHECK n1
            turn(verdict("n1"), end("DO")),
            # DO n2: ends by replying (phase_end without a hint)
            turn(complete("n2")),
            "n2 is complete.",
            # CHECK n2
            turn(verdict("n2"), end("END")),
            # SELF_IMPROVE
            turn(end("END", "tidy")),
        ]
    )
    report, rt = await run_task(rtws, model, "build the login page")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    assert phases(model) == [
        "PLAN", "PLAN", "DO", "DO", "CHECK", "DO", "DO", "CHECK", "SELF_IMPROVE",
    ]  # fmt: skip
    ws = ws_of(rt)
    assert {n.id: n.status for n in ws.nodes.values()} == {
        "root": NodeStatus.DONE,
        "n1": NodeStatus.DONE,
        "n2": NodeStatus.DONE,
    }
    state = ls.get(rt.store, TASK)
    assert state is not None and state.status is ls.LoopStatus.DONE and state.self_improved
    assert state.entry == 6 and set(state.checked) == {"n1", "n2"}
    # each phase's input is one user message of the loop root, marked as the loop's
    inputs = [m for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    assert [m.data["loop"]["phase"] for m in inputs] == [
        "PLAN", "DO", "CHECK", "DO", "CHECK", "SELF_IMPROVE",
    ]  # fmt: skip
    do_input = inputs[1].data["text"]
    assert "## Current node" in do_input and "n1" in do_input and "planned api then ui" in do_input
    # a second run finds it done and does nothing
    model2 = ScriptedModel([])
    again, rt2 = await run_task(rtws, model2)
    assert again.outcome is LoopOutcome.DONE and model2.requests == []
    await rt.aclose()
    await rt2.aclose()
