"""Tool effects commit with the tool's result (issue 9, part 6).

A tool returns store effects beside its text: rows to write, a wait to open, a detached
side dialog to start. The engine commits them in the transaction that records the
result, durably, so a kill leaves both or neither; every call carries a call key
(`sha256(dialog|generation|index)`) a tool can use as its idempotency key.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.store import Store
from mindloop.testing import ScriptedModel, Turn, call
from mindloop.tools.base import OpenWait, StoreEffect, Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs
from mindloop.toolsets import standard_registry
from tests.dialogs.crash_points import CrashingStore, process_died
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


class MarkArgs(ToolArgs):
    node: str


class NapArgs(ToolArgs):
    seconds: float


async def _mark(args: MarkArgs, ctx: ToolContext) -> ToolOutput:
    def write(store: Store) -> None:
        store.record_event("node_marked", ctx.dialog_id, {"node": args.node, "key": ctx.call_key})

    return ToolOutput(f"marked {args.node}", effects=(StoreEffect(write, "mark"),))


async def _nap(args: NapArgs, ctx: ToolContext) -> ToolOutput:
    wait = OpenWait("timer", "nap", {"fire_at": time.time() + args.seconds, "reason": "nap"})
    return ToolOutput("napping", effects=(wait,))


def _registry() -> object:
    reg = standard_registry()
    reg.add_toolset(
        "work",
        [
            Tool[BaseModel]("mark", "Mark a node.", MarkArgs, _mark),  # type: ignore[arg-type]
            Tool[BaseModel]("nap", "Sleep a while.", NapArgs, _nap),
        ],  # type: ignore[arg-type]
    )
    return reg


def _marks(store: Store) -> list[dict[str, str]]:
    return [e["data"] for e in store.events() if e["type"] == "node_marked"]


def _model() -> ScriptedModel:
    return ScriptedModel([Turn(tool_calls=[call("mark", node="n1")]), Turn(text="done")])


@pytest.mark.parametrize("after", [False, True], ids=["killed-before", "killed-after"])
async def test_an_effect_and_its_result_commit_together_across_a_kill(
    rtws: Path, after: bool
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work"]}})
    state = rtws / ".mindloop" / "state.sqlite"
    store = CrashingStore(state, "node_marked", after)
    rt = DialogRuntime(rtws, store=store, tools=_registry(), providers={"mock": _model()})  # type: ignore[arg-type]
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    with pytest.raises(SystemExit):
        await rt.drive(root.id)
    await rt.aclose()

    model = ScriptedModel([Turn(text="done")])
    rt = DialogRuntime(rtws, tools=_registry(), providers={"mock": model})  # type: ignore[arg-type]
    process_died(rt)
    await Scheduler(rt).run()
    hist = rt.store.load_history(root.id)
    results = [m.data for m in hist if m.kind == "tool_result"]
    marks = _marks(rt.store)
    [gen] = [g for g in rt.store.generations(root.id) if g.finish_reason == "tool_calls"]
    key = hashlib.sha256(f"{root.id}|{gen.id}|0".encode()).hexdigest()
    if after:  # both committed, once
        assert [r["content"] for r in results] == ["marked n1"]
        assert marks == [{"node": "n1", "key": key}]
    else:  # neither: the call is answered as interrupted, the effect never happened
        assert len(results) == 1 and results[0]["is_error"]
        assert "interrupted" in results[0]["content"]
        assert marks == []
    assert [m.data["text"] for m in hist if m.kind == "assistant"][-1] == "done"
    await rt.aclose()


async def test_an_effect_commit_is_durable_and_a_plain_result_is_not(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work", "fs"]}})
    model = ScriptedModel(
        [
            Turn(tool_calls=[call("list_dir", path=".")]),
            Turn(tool_calls=[call("mark", node="a")]),
            Turn(text="ok"),
        ]
    )
    rt = DialogRuntime(rtws, tools=_registry(), providers={"mock": model})  # type: ignore[arg-type]
    rt.start_root_dialog(TASK, "go", "dev")
    s = rt.store.stats
    at_start: list[int] = []
    rt.bus.subscribe(
        lambda ev: at_start.append(s.durable_commits) if ev.type == "generation_start" else None
    )
    await Scheduler(rt).run()
    assert len(_marks(rt.store)) == 1
    # step 1: the generation's commit only (list_dir's result rides lazily on the next);
    # step 2: the generation's commit and the result with its effect, durably
    assert [b - a for a, b in itertools.pairwise(at_start)] == [1, 2]
    await rt.aclose()


async def test_a_tool_can_make_its_dialog_wait_on_a_timer(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work"]}})
    model = ScriptedModel([Turn(tool_calls=[call("nap", seconds=0.3)]), Turn(text="awake")])
    rt = DialogRuntime(rtws, tools=_registry(), providers={"mock": model})  # type: ignore[arg-type]
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    first = await rt.drive(root.id)
    assert first.reason == "waiting"
    assert [w.kind for w in rt.store.open_waits(root.id)] == ["timer"]
    said = lambda: [m.data["text"] for m in rt.store.load_history(root.id) if m.kind == "assistant"]  # noqa: E731
    await asyncio.wait_for(
        Scheduler(rt).run(watch=True, poll_interval=30, stop=lambda: "awake" in said()), 10
    )
    assert said()[-1] == "awake"
    await rt.aclose()
