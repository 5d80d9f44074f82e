"""Several workspace calls in one step (audit item 15): each call is checked against the
workspace with the step's earlier calls applied, so a node created by one call can be a
dependency of the next call of the same generation; the calls still commit with their
results, in call order."""

from __future__ import annotations

from pathlib import Path

from mindloop.testing import ScriptedModel, call
from mindloop.workspace.models import NodeStatus
from tests.loop.loop_util import complete, create, end, run_task, turn, verdict, workspace
from tests.scenario_util import write_team


def _results(rt: object, root_id: str) -> list[tuple[str, bool]]:
    hist = rt.store.load_history(root_id)  # type: ignore[attr-defined]
    return [(m.data["content"], m.data["is_error"]) for m in hist if m.kind == "tool_result"]


async def test_a_node_created_earlier_in_the_step_is_a_valid_dep(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            # PLAN: the workspace does not exist yet; the first call creates it and n1
            turn(create("a"), create("b", deps=["n1"]), end("DO")),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("DO")),
            turn(complete("n2"), end("CHECK")),
            turn(verdict("n2"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "go")
    results = _results(rt, report.root_id)
    assert [ok for _, ok in results[:2]] == [False, False], results[:2]
    assert results[1][0].startswith("created n2"), results[1]
    ws = workspace(rt)
    assert ws.nodes["n2"].deps == ["n1"]
    assert {n: ws.nodes[n].status for n in ("n1", "n2")} == {
        "n1": NodeStatus.DONE,
        "n2": NodeStatus.DONE,
    }
    assert report.outcome.value == "done", report.reason
    await rt.aclose()


async def test_on_an_existing_workspace_too_and_a_failed_call_applies_nothing(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("z")),  # the workspace exists: n1
            # "a" is n2; "bad" is refused (an unknown assignee) and applies nothing, so
            # the next call sees no n3; a dep on the step's n2 is fine
            turn(
                create("a"),
                create("bad", assignee="nobody"),
                create("c", deps=["n2", "n3"]),
                call("node_add_deps", node_id="n1", deps=["n2"]),
                end("DO"),
            ),
        ]
        + [turn(end("END"))] * 3
    )
    report, rt = await run_task(rtws, model, "go")
    results = _results(rt, report.root_id)[1:5]
    assert results[0] == (results[0][0], False) and results[0][0].startswith("created n2")
    assert results[1][1] is True, results[1]  # the unknown assignee
    assert results[2][1] is True and "n3" in results[2][0], results[2]
    assert results[3][1] is False, results[3]
    ws = workspace(rt)
    assert sorted(ws.nodes) == ["n1", "n2", "root"]
    assert ws.nodes["n1"].deps == ["n2"]
    await rt.aclose()
