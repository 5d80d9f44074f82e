"""A phase transition costs no fsync of its own (bench scenario 7): entering a phase (with
the node DO takes) and recording its end commit lazily. Nothing outside the store follows
them before the next step's durable commit (tools about to run, a question, a final
answer), which makes them durable too, since the WAL is replayed as an ordered prefix; a
killed process loses nothing either way."""

from __future__ import annotations

import time
from pathlib import Path

from mindloop.loop import phase_ops
from mindloop.loop.driver import TaskLoop
from mindloop.loop.phases import Phase
from mindloop.store import loop_state as ls
from mindloop.testing import ScriptedModel
from mindloop.workspace import api
from mindloop.workspace.commands import Session
from mindloop.workspace.models import NodeKind, NodeStatus
from mindloop.workspace.transitions import Actor, Authority
from tests.loop.loop_util import TASK, runtime, workspace
from tests.scenario_util import write_team


async def test_entering_and_ending_phases_commit_without_an_fsync(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    rt, policies = runtime(rtws, ScriptedModel([]))
    try:
        loop = TaskLoop(rt, policies, TASK)
        stats = rt.store.stats

        def plan(s: Session) -> None:
            s.create_node(parent_id="root", kind=NodeKind.EXECUTION, title="api", requirement="r")

        api.execute(rt.store, rt.rtws, TASK, Authority.phase(Actor.PLAN, "@dev"), plan)
        durable, lazy = stats.durable_commits, stats.lazy_commits

        state, text = phase_ops.enter_phase(rt, loop.state, Phase.DO)
        assert text.startswith("[work loop] Phase DO (entry 1)") and "# Node n1: api" in text
        assert workspace(rt).nodes["n1"].status is NodeStatus.IN_PROGRESS
        assert (stats.durable_commits, stats.lazy_commits) == (durable, lazy + 1)

        end = ls.PhaseEnd(by=ls.EndedBy.STEP_CAP, reason="the cap", at=time.time())
        phase_ops.close(rt, state, end)
        assert (stats.durable_commits, stats.lazy_commits) == (durable, lazy + 2)

        stored = ls.get(rt.store, TASK)
        assert stored is not None and stored.phase is Phase.DO and stored.closed
        assert workspace(rt).nodes["n1"].status is NodeStatus.CHECK_FAILED
    finally:
        await rt.aclose()
