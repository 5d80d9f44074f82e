"""A step whose calls all act only in the store is one transaction (agent-loop §2 S1).

Its generation is not committed before the tools run: it commits with their results and
store effects, under an id reserved for it, which the calls' keys name. A kill before
that commit leaves nothing of the step, and the next drive generates again (S4) — no
"interrupted" result, no effect, no generation row; after it, everything of the step is
there once. Another process taking the reserved id meanwhile (SQLite) makes the turn
commit on its own and the calls run again under keys naming the id it got.
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
from mindloop.events.types import Event
from mindloop.store import GenerationRecord, Store
from mindloop.testing import ScriptedModel, Turn, call
from mindloop.tools.base import StoreEffect, Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs, ToolRegistry
from mindloop.toolsets import standard_registry
from tests.dialogs.crash_points import CrashingStore, process_died
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


class MarkArgs(ToolArgs):
    node: str


class LookArgs(ToolArgs):
    pass


class HangArgs(ToolArgs):
    pass


def _registry(
    before_mark: list[ToolContext] | None = None, hanging: asyncio.Event | None = None
) -> ToolRegistry:
    """`mark` (a store effect), `look` (reads only) and `hang` (never returns; sets
    `hanging`), all store-only; `before_mark` collects the context of every run of
    `mark`."""

    async def mark(args: MarkArgs, ctx: ToolContext) -> ToolOutput:
        if before_mark is not None:
            before_mark.append(ctx)

        def write(store: Store) -> None:
            data = {"node": args.node, "key": ctx.call_key}
            store.record_event("node_marked", ctx.dialog_id, data)

        return ToolOutput(f"marked {args.node}", effects=(StoreEffect(write, "mark"),))

    async def look(args: LookArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput("nothing new")

    async def hang(args: HangArgs, ctx: ToolContext) -> ToolOutput:
        if hanging is not None:
            hanging.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    reg = standard_registry()
    reg.add_toolset(
        "work",
        [
            Tool[BaseModel]("mark", "Mark a node.", MarkArgs, mark, store_only=True),  # type: ignore[arg-type]
            Tool[BaseModel]("look", "Look.", LookArgs, look, store_only=True),  # type: ignore[arg-type]
            Tool[BaseModel]("hang", "Hang.", HangArgs, hang, store_only=True),  # type: ignore[arg-type]
        ],
    )
    return reg


def _marks(store: Store) -> list[dict[str, str]]:
    return [e["data"] for e in store.events() if e["type"] == "node_marked"]


def _key(dialog_id: str, generation_id: int, index: int = 0) -> str:
    return hashlib.sha256(f"{dialog_id}|{generation_id}|{index}".encode()).hexdigest()


async def test_a_step_of_store_only_calls_commits_once_after_its_tools(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work", "fs"]}})
    model = ScriptedModel(
        [
            Turn(tool_calls=[call("look")]),
            Turn(tool_calls=[call("mark", node="a")]),
            Turn(tool_calls=[call("list_dir", path=".")]),
            Turn(text="ok"),
        ]
    )
    rt = DialogRuntime(rtws, tools=_registry(), providers={"mock": model})
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    s = rt.store.stats
    at_start: list[tuple[int, int]] = []
    seen: list[str] = []

    def hear(ev: Event) -> None:
        if ev.type == "generation_start":
            at_start.append((s.durable_commits, s.lazy_commits))
        if ev.type in ("generation_end", "tool_call", "tool_result"):
            seen.append(ev.type)

    rt.bus.subscribe(hear)
    await Scheduler(rt).run()
    steps = [(b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(at_start)]
    # look: one lazy commit (the generation and the result); mark: one durable commit
    # (the generation, the result and its effect); list_dir (acts outside the store):
    # the generation's own durable commit, then its result's lazy one
    assert steps == [(0, 1), (1, 0), (1, 1)]
    # observers see each generation end before its calls, as before
    assert seen[:3] == ["generation_end", "tool_call", "tool_result"]
    assert seen.count("generation_end") == 4
    gens = [g for g in rt.store.generations(root.id) if g.finish_reason == "tool_calls"]
    assert len(gens) == 3
    kinds = [m.kind for m in rt.store.load_history(root.id)]
    assert kinds == ["user"] + ["assistant", "tool_call", "tool_result"] * 3 + ["assistant"]
    # the effect's call key names the generation as stored
    assert _marks(rt.store) == [{"node": "a", "key": _key(root.id, gens[1].id)}]
    await rt.aclose()


@pytest.mark.parametrize("after", [False, True], ids=["killed-before", "killed-after"])
async def test_a_kill_around_the_step_commit_leaves_all_or_nothing_of_the_step(
    rtws: Path, after: bool
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work"]}})
    state = rtws / ".mindloop" / "state.sqlite"
    store = CrashingStore(state, "node_marked", after)
    model = ScriptedModel([Turn(tool_calls=[call("mark", node="n1")]), Turn(text="done")])
    rt = DialogRuntime(rtws, store=store, tools=_registry(), providers={"mock": model})
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    with pytest.raises(SystemExit):
        await rt.drive(root.id)
    await rt.aclose()

    if not after:  # nothing of the step: no generation, no assistant turn, no effect
        reader = Store.for_rtws(rtws)  # the same database, as another process opens it
        assert [m.kind for m in reader.load_history(root.id)] == ["user"]
        assert reader.generations(root.id) == [] and _marks(reader) == []
        reader.close()
    # the resumed process: the model is asked again if the step left nothing
    again = [Turn(tool_calls=[call("mark", node="n1")])] if not after else []
    model = ScriptedModel([*again, Turn(text="done")])
    rt = DialogRuntime(rtws, tools=_registry(), providers={"mock": model})
    process_died(rt)
    await Scheduler(rt).run()
    hist = rt.store.load_history(root.id)
    assert [m.kind for m in hist] == ["user", "assistant", "tool_call", "tool_result", "assistant"]
    assert [m.data["content"] for m in hist if m.kind == "tool_result"] == ["marked n1"]
    [gen] = [g for g in rt.store.generations(root.id) if g.finish_reason == "tool_calls"]
    assert _marks(rt.store) == [{"node": "n1", "key": _key(root.id, gen.id)}]
    assert hist[-1].data["text"] == "done"
    await rt.aclose()


@pytest.mark.sqlite_only  # PostgreSQL draws the id from a sequence: nobody else gets it
async def test_a_reserved_generation_id_taken_by_another_process_runs_the_calls_again(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work"]}})
    runs: list[ToolContext] = []
    model = ScriptedModel([Turn(tool_calls=[call("mark", node="n1")]), Turn(text="done")])
    rt = DialogRuntime(rtws, tools=_registry(runs), providers={"mock": model})
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    other = Store.for_rtws(rtws)  # another process, writing a generation while the tool runs

    def other_writes(ev: Event) -> None:
        if ev.type == "tool_call" and len(runs) == 0:
            gen = GenerationRecord(
                dialog_id="elsewhere", provider="mock", model="m", started_at=time.time()
            )
            other.record_generation(gen, [])

    rt.bus.subscribe(other_writes)
    await Scheduler(rt).run()
    other.close()
    taken = _key(root.id, int(rt.store.generations("elsewhere")[0].id))
    [gen] = [g for g in rt.store.generations(root.id) if g.finish_reason == "tool_calls"]
    # the first run named the id the other process took; the second the turn's own
    assert [c.call_key for c in runs] == [taken, _key(root.id, gen.id)]
    hist = rt.store.load_history(root.id)
    assert [m.kind for m in hist] == ["user", "assistant", "tool_call", "tool_result", "assistant"]
    assert [m.generation_id for m in hist[1:3]] == [gen.id, gen.id]
    assert _marks(rt.store) == [{"node": "n1", "key": _key(root.id, gen.id)}]
    await rt.aclose()


async def test_a_drive_cancelled_while_the_tools_run_keeps_the_usage_and_generates_again(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work"]}})
    hanging = asyncio.Event()
    turn = Turn(tool_calls=[call("hang")], input_tokens=7, output_tokens=3)
    model = ScriptedModel([turn])
    rt = DialogRuntime(rtws, tools=_registry(hanging=hanging), providers={"mock": model})
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    task = asyncio.create_task(Scheduler(rt).run())
    await asyncio.wait_for(hanging.wait(), 10)
    task.cancel()  # what Ctrl-C does to the backend loop
    with pytest.raises(asyncio.CancelledError):
        await task
    # the generation is kept as cut off (its usage counts), without its turn
    assert [m.kind for m in rt.store.load_history(root.id)] == ["user"]
    [gen] = rt.store.generations(root.id)
    assert (gen.finish_reason, gen.input_tokens, gen.output_tokens) == ("cancelled", 7, 3)
    [cut] = [e["data"] for e in rt.store.events(root.id) if e["type"] == "generation_cancelled"]
    assert [c["name"] for c in cut["calls"]] == ["hang"]
    await rt.aclose()

    model = ScriptedModel([Turn(tool_calls=[call("mark", node="n1")]), Turn(text="done")])
    rt = DialogRuntime(rtws, tools=_registry(), providers={"mock": model})
    rt.recover()  # Ctrl-C settled the drive: it is marked to drive again
    await Scheduler(rt).run()
    hist = rt.store.load_history(root.id)
    assert [m.kind for m in hist] == ["user", "assistant", "tool_call", "tool_result", "assistant"]
    assert len(_marks(rt.store)) == 1 and hist[-1].data["text"] == "done"
    await rt.aclose()
