"""A BENCH that keeps failing is capped like any node ADJUST works (agent-loop §5.5 "a
BENCH failure at the cap ends the task with a report", §8.2 L3 ≤ 3 per node): ADJUST's
plan mode for a failed BENCH (fix nodes created and added to its deps, the BENCH back to
WAIT) is an ADJUST cycle — it needs an accepted `retry_propose` and counts in the BENCH's
`adjust_count` — and at `loop.retries.adjust_per_node` cycles the runtime fails the BENCH
and the task ends FAILED, the user told why."""

from __future__ import annotations

from pathlib import Path

from mindloop.loop.driver import LoopOutcome
from mindloop.testing import Call, call
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
    run_task,
    turn,
    verdict,
)
from tests.scenario_util import write_team


def to_wait() -> Call:
    return call("node_transition", node_id="n2", to="WAIT", reason="fix nodes added")


def back_to_wait(*fixes: str) -> list[Call]:
    """ADJUST's plan mode for the BENCH n2: the fix nodes join its deps, it waits again."""
    return [call("node_add_deps", node_id="n2", deps=list(fixes)), to_wait()]


PLANS = {2: "split the schema check into a node of its own", 3: "rewrite the handler apart"}


def fix_round(k: int) -> list[object]:
    """ADJUST cycle `k` on the failed BENCH, its fix node worked and checked, the BENCH
    checked again and failing again."""
    fix = f"n{2 + k}"
    return [
        turn(cycle(PLANS[k], kind="DECOMPOSE", failure="BENCH_FAIL"), create(f"fix{k}")),
        turn(*back_to_wait(fix), end("DO")),
        turn(complete(fix), end("CHECK")),  # DO the fix
        turn(verdict(fix), end("DO")),  # CHECK the fix
        turn(verdict("n2", ok=False), end("ADJUST")),  # CHECK the BENCH: fails again
    ]


async def test_a_bench_failing_at_its_cycle_cap_fails_and_ends_the_task(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = WorkScript(
        [
            turn(create("api")),  # PLAN
            turn(create("acceptance", bench=True, deps=["n1"]), end("DO")),
            turn(complete("n1"), end("CHECK")),  # DO
            turn(verdict("n1"), end("DO")),  # CHECK n1
            turn(verdict("n2", ok=False), end("ADJUST")),  # CHECK the BENCH: fails
            # ADJUST 1: back to WAIT without a cycle is refused; with one it is taken
            turn(create("fix1")),
            turn(call("node_add_deps", node_id="n2", deps=["n3"]), to_wait()),
            turn(cycle("fix the api first", failure="BENCH_FAIL")),
            turn(to_wait(), end("DO")),
            turn(complete("n3"), end("CHECK")),
            turn(verdict("n3"), end("DO")),
            turn(verdict("n2", ok=False), end("ADJUST")),
            *fix_round(2),
            *fix_round(3),
            # no ADJUST 4: the runtime fails the BENCH and the task ends
        ]
    )
    report, rt = await run_task(rtws, model, "ship the api")
    assert report.outcome is LoopOutcome.FAILED, report.reason
    assert "n2" in report.reason and model.remaining == 0
    ws = repo.load(rt.store, TASK)
    bench = ws.nodes["n2"]
    assert bench.status is NodeStatus.FAILED and bench.adjust_count == 3
    assert "3 ADJUST cycles" in (bench.conclusion or "")
    assert phases(model).count("ADJUST") == 8  # 4 steps in the first entry, then 2 each
    results = [
        m.data["content"] for m in rt.store.load_history(report.root_id) if m.kind == "tool_result"
    ]
    assert any("RETRY_RECORD_REQUIRED" in r for r in results)
    notes = [m.data["text"] for m in rt.store.load_history(report.root_id) if m.kind == "note"]
    assert any("n2" in n and "FAILED" in n and "adjust_per_node" in n for n in notes)
    await rt.aclose()
