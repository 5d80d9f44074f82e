"""A kill at any commit or tool boundary during any phase, then `mindloop run` again: the
task ends exactly as an uninterrupted run does (issue 12, part 4's durability).

The process "dies" in-process: at the chosen crash point (`store.crash_points`: just
before or just after a commit that changed rows, just before or after a tool call) the
store raises `Killed` and refuses every later transaction, so nothing more is written —
no `finally` block, no settling, as with SIGKILL. The dead runtime's connection is then
closed (its open transaction rolls back) and its claims expire; a fresh runtime runs the
task's loop again. The model is a small agent that decides from the workspace as stored,
so it repeats an interrupted call rather than replaying a script.

CI kills at a sample (in each phase: its first, middle and last commit and its first tool
call, ~25 points, about a minute on a busy machine); `MINDLOOP_CRASH_POINTS=all` kills at
every point (~160). Checked after the resume: DONE; each phase entered exactly as often as without the kill
(no input posted twice, none lost); every node transition logged once; every tool call
answered once; nothing left running.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import sqlalchemy as sa

from mindloop import DialogRuntime
from mindloop.config.loop import SelfImproveConfig
from mindloop.loop.driver import LoopOutcome, LoopPolicies, TaskLoop
from mindloop.providers.base import GenerationRequest
from mindloop.store import Store, crash_points
from mindloop.store import loop_state as ls
from mindloop.testing import FunctionModel, Turn
from mindloop.workspace import repo
from mindloop.workspace.models import NodeKind, NodeStatus
from tests.loop.loop_util import TASK, complete, create, end, phase_of, verdict
from tests.scenario_util import write_team

SAMPLE = os.environ.get("MINDLOOP_CRASH_POINTS", "sample")
EXPECTED_WORK = ["PLAN", "DO", "CHECK", "DO", "CHECK"]
BATCH = SelfImproveConfig().batch_messages  # then a SELF_IMPROVE entry per batch (§9.3)


class Killed(BaseException):
    """The simulated SIGKILL (a BaseException: no `except Exception` handles it)."""


class Crash:
    """`crash_points.CRASH` for one trial: counts every point; dies at `(point, n)`."""

    def __init__(self, point: str | None = None, n: int = 0) -> None:
        self.point, self.n = point, n
        self.counts: Counter[str] = Counter()
        self.seen: list[tuple[str, int, str]] = []  # (point, n, the phase then)
        self.phase = "-"  # the phase of the latest generation (the agent says)
        self.dead = False

    def reached(self, point: str, where: str = "") -> None:
        if self.dead:
            raise Killed
        self.counts[point] += 1
        self.seen.append((point, self.counts[point], self.phase))
        if point == self.point and self.counts[point] == self.n:
            self.dead = True
            raise Killed


class DyingStore(Store):
    crash: Crash = Crash()  # replaced per trial, once the store is open

    def tx(self, *, durable: bool = True) -> AbstractContextManager[sa.Connection]:  # type: ignore[override]
        if self.crash.dead:
            raise Killed
        return super().tx(durable=durable)


def _agent(rtws: Path, crash: Crash | None) -> tuple[FunctionModel, Store]:
    """Plans two nodes (b after a), does and checks each, then tidies up — always from
    the workspace as stored, so an interrupted call is simply made again."""
    reader = Store.for_rtws(rtws)

    def respond(req: GenerationRequest) -> Turn:
        turn = decide(req)
        # call ids unique across restarts (a new model instance counts from call_1 again)
        for c in turn.tool_calls:
            c.id = f"c{uuid.uuid4().hex[:12]}"
        return turn

    def decide(req: GenerationRequest) -> Turn:
        phase = phase_of(req)
        if crash is not None:
            crash.phase = phase
        ws = repo.load(reader, TASK)
        nodes = ws.nodes
        if phase == "PLAN":
            if "n1" not in nodes:
                return Turn(tool_calls=[create("a")])
            if "n2" not in nodes:
                return Turn(tool_calls=[create("b", deps=["n1"])])
            return Turn(tool_calls=[end("DO")])
        if phase == "DO":
            busy = [
                n
                for n in nodes.values()
                if n.status is NodeStatus.IN_PROGRESS and n.kind is NodeKind.EXECUTION
            ]
            if busy:
                return Turn(tool_calls=[complete(busy[0].id)])
            return Turn(tool_calls=[end("CHECK")])
        if phase == "CHECK":
            todo = [n for n in nodes.values() if n.status is NodeStatus.COMPLETE]
            if todo:
                return Turn(tool_calls=[verdict(todo[0].id)])
            left = any(n.status is NodeStatus.NEW for n in nodes.values())
            return Turn(tool_calls=[end("DO" if left else "END")])
        return Turn(tool_calls=[end("END")])

    return FunctionModel(respond), reader


async def _run(rtws: Path, crash: Crash | None, message: str | None) -> LoopOutcome | None:
    store: Store
    if crash is not None:
        store = DyingStore.for_rtws(rtws, durable=False)
        store.crash = crash  # type: ignore[attr-defined]
    else:
        store = Store.for_rtws(rtws, durable=False)
    model, reader = _agent(rtws, crash)
    policies = LoopPolicies("en")
    rt = DialogRuntime(rtws, providers={"mock": model}, policies=policies, store=store)
    crash_points.CRASH = crash  # type: ignore[assignment]
    try:
        report = await TaskLoop(rt, policies, TASK).run(message)
        return report.outcome
    except Killed:
        return None
    finally:
        crash_points.CRASH = None
        store.close()  # a dead process's open transaction rolls back
        reader.close()
        await rt.providers.aclose()


def _fresh(tmp: Path, template: Path, name: str) -> Path:
    import shutil

    dst = tmp / name
    shutil.copytree(template, dst)
    return dst


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mindloop.rtws import init_rtws

    root = tmp_path_factory.mktemp("tpl") / "proj"
    init_rtws(root, provider="mock")
    write_team(root, {"dev": {"toolsets": ["fs"]}})
    return root


def _points(tmp: Path, template: Path) -> list[tuple[str, int, str]]:
    """Every crash point an uninterrupted run reaches, in order, with its phase."""
    import asyncio

    rtws = _fresh(tmp, template, "count")
    counting = Crash()
    assert asyncio.run(_run(rtws, counting, "build a and b")) is LoopOutcome.DONE
    _check(rtws)
    return counting.seen


def _check(rtws: Path) -> None:
    store = Store.for_rtws(rtws)
    try:
        state = ls.get(store, TASK)
        assert state is not None and state.status is ls.LoopStatus.DONE
        history = store.load_history(state.root_id)
        inputs = [m for m in history if "loop" in m.data]
        entries = [m.data["loop"]["phase"] for m in inputs]
        # the pass reviews the history before it, each message once, a batch an entry
        first = next(m.id for m in inputs if m.data["loop"]["phase"] == "SELF_IMPROVE")
        # (an assistant message and its tool calls are one message)
        before = sum(1 for m in history if m.id < first and m.kind != "tool_call")
        batches = -(-before // BATCH)
        assert entries == EXPECTED_WORK + ["SELF_IMPROVE"] * batches
        users = [m for m in history if m.kind == "user" and "loop" not in m.data]
        assert [m.data["text"] for m in users] == ["build a and b"]
        calls = Counter(m.data["id"] for m in history if m.kind == "tool_call")
        results = Counter(m.data["call_id"] for m in history if m.kind == "tool_result")
        assert calls == results and set(calls.values()) == {1}
        ws = repo.load(store, TASK)
        assert {n.id: n.status for n in ws.nodes.values()} == dict.fromkeys(
            ["root", "n1", "n2"], NodeStatus.DONE
        )
        moves = [
            (e.node_id, e.data["from"], e.data["to"])
            for e in repo.log(store, TASK)
            if e.kind == "transition"
        ]
        assert len(moves) == len(set(moves)), moves  # no transition twice
        assert all(d.status.value != "running" for d in store.list_dialogs())
    finally:
        store.close()


def _sample(points: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """In every phase (and between phases): its first and last commit, a commit in the
    middle, and its first tool call — or every point with MINDLOOP_CRASH_POINTS=all."""
    if SAMPLE == "all":
        return points
    chosen: list[tuple[str, int, str]] = []
    runs: list[list[tuple[str, int, str]]] = []
    for p in points:  # consecutive points of one phase
        if runs and runs[-1][-1][2] == p[2]:
            runs[-1].append(p)
        else:
            runs.append([p])
    for run in runs:
        commits = [p for p in run if p[0].startswith("commit.")]
        tools = [p for p in run if p[0].startswith("tool.")]
        picks = [
            *commits[:1],
            *commits[len(commits) // 2 : len(commits) // 2 + 1],
            *commits[-1:],
            *tools[:1],
        ]
        chosen += [p for p in dict.fromkeys(picks) if p not in chosen]
    return chosen


@pytest.mark.sqlite_only  # a copied rtws per trial: its state must live in it
def test_a_kill_at_any_point_then_run_again_ends_as_if_uninterrupted(
    tmp_path: Path, template: Path
) -> None:
    import asyncio

    points = _points(tmp_path, template)
    assert len(points) > 30
    tried = 0
    assert {p[2] for p in points} >= {"PLAN", "DO", "CHECK", "SELF_IMPROVE"}
    for i, (point, n, _phase) in enumerate(_sample(points)):
        rtws = _fresh(tmp_path, template, f"t{i}")
        died = asyncio.run(_run(rtws, Crash(point, n), "build a and b"))
        assert died is None, f"{point}:{n} was not reached"
        store = Store.for_rtws(rtws)
        try:
            state = ls.get(store, TASK)
            posted = state is not None and any(
                m.kind == "user" and "loop" not in m.data for m in store.load_history(state.root_id)
            )
            for did, owner in store.held_claims():  # the dead process's claims end
                if owner:
                    store.expire_claim(did, owner)
        finally:
            store.close()
        # as a user would: the message again only if it never got in
        outcome = asyncio.run(_run(rtws, None, None if posted else "build a and b"))
        assert outcome is LoopOutcome.DONE, f"after a kill at {point}:{n}"
        try:
            _check(rtws)
        except AssertionError as exc:
            raise AssertionError(f"after a kill at {point}:{n}: {exc}") from exc
        tried += 1
    assert tried >= 12
