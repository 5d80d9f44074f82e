"""A step whose `phase_end` ends the phase carries the transition in its own transaction
(agent-loop §2 S1: a step is one transaction at its end): the phase closed, routed and the
next one entered commit with the step's results — one commit, one write of the task's row
— and the events of the transition follow the drive's end, as a segue's would."""

from __future__ import annotations

import itertools
from pathlib import Path

from mindloop.events.types import (
    DriveEnded,
    Event,
    GenerationStarted,
    PhaseEnded,
    PhaseStarted,
    ToolResulted,
)
from mindloop.loop.driver import LoopOutcome, TaskLoop
from mindloop.store import loop_state as ls
from mindloop.testing import ScriptedModel
from mindloop.workspace.models import NodeStatus
from tests.loop.loop_util import TASK, complete, create, end, runtime, turn, verdict
from tests.loop.loop_util import workspace as ws_of
from tests.scenario_util import write_team


def _script() -> ScriptedModel:
    return ScriptedModel(
        [
            turn(create("api"), create("ui"), end("DO")),  # PLAN
            turn(complete("n1"), end("CHECK")),  # DO n1
            turn(verdict("n1"), end("DO")),  # CHECK n1
            turn(complete("n2"), end("CHECK")),  # DO n2
            turn(verdict("n2"), end("END")),  # CHECK n2
            turn(end("END", "tidy")),  # SELF_IMPROVE
        ]
    )


async def test_a_phase_end_step_commits_the_transition_with_it(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    rt, policies = runtime(rtws, _script())
    stats = rt.store.stats
    seen: list[tuple[str, int, int]] = []  # (what, commits so far, the task row's version)
    order: list[str] = []

    def commits() -> int:
        return stats.durable_commits + stats.lazy_commits

    def hear(ev: Event) -> None:
        order.append(type(ev).__name__)
        if isinstance(ev, ToolResulted):
            seen.append(("results", commits(), 0))
        elif isinstance(ev, GenerationStarted):
            seen.append(("generation", commits(), 0))
        elif isinstance(ev, PhaseStarted):
            row = rt.store.task_by_path(TASK)
            assert row is not None
            seen.append((f"{ev.phase}:{ev.entry}", commits(), row.version))

    rt.bus.subscribe(hear)
    try:
        report = await TaskLoop(rt, policies, TASK).run("build it")
        assert report.outcome is LoopOutcome.DONE, report.reason
        assert {n.id: n.status for n in ws_of(rt).nodes.values()} == dict.fromkeys(
            ("root", "n1", "n2"), NodeStatus.DONE
        )
        state = ls.get(rt.store, TASK)
        assert state is not None and state.status is ls.LoopStatus.DONE and state.entry == 6
        # each entry after the drive's first segment: one commit from the results of the
        # step that ended the phase to the next phase's first generation (the step's,
        # carrying the transition), and the row written once since the last entry's
        # (the end `phase_end` recorded, closed and entered: one write)
        entries = [(i, s) for i, s in enumerate(seen) if s[0] not in ("results", "generation")]
        assert [s[0] for _, s in entries] == [
            "PLAN:1",
            "DO:2",
            "CHECK:3",
            "DO:4",
            "CHECK:5",
            "SELF_IMPROVE:6",
        ]
        for (_, prev), (i, (what, _, version)) in itertools.pairwise(entries[1:]):
            assert seen[i - 1][0] == "results" and seen[i + 1][0] == "generation", what
            assert seen[i + 1][1] - seen[i - 1][1] == 1, (what, seen)
            assert version - prev[2] == 1, (what, seen)
        # observers see the segment's end, then the phase's end and the next entry
        last_results = None
        for k, name in enumerate(order):
            if name == ToolResulted.__name__:
                last_results = k
            elif name == PhaseEnded.__name__:
                assert last_results is not None
                assert DriveEnded.__name__ in order[last_results:k], order
    finally:
        await rt.aclose()
