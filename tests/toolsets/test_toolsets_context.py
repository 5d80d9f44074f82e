"""The tool context as the engine builds it: typed facts, a distinct call key per call
(`sha256(dialog|generation|index)`), narrow services, and no path from a tool to the
engine."""

from __future__ import annotations

import dataclasses
import hashlib
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.rtws import init_rtws
from mindloop.tools import Tool, ToolArgs, ToolContext, ToolOutput, call_key
from mindloop.toolsets import standard_registry
from tests.scenario_util import write_script, write_team


class ProbeArgs(ToolArgs):
    n: int


def _referents(obj: Any) -> list[Any]:
    """What a tool can reach from `obj` by attributes, closures and bound methods (not
    module globals)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, list | tuple | set | frozenset):
        return list(obj)
    if hasattr(obj, "__self__") and hasattr(obj, "__func__"):
        return [obj.__self__, obj.__func__]
    if hasattr(obj, "__code__"):
        return [c.cell_contents for c in (obj.__closure__ or ()) if c.cell_contents is not None]
    return list(vars(obj).values()) if hasattr(obj, "__dict__") else []


def _reachable_types(root: Any, depth: int) -> set[type]:
    seen: set[int] = set()
    types: set[type] = set()
    queue: deque[tuple[Any, int]] = deque([(root, 0)])
    while queue:
        obj, level = queue.popleft()
        if id(obj) in seen or isinstance(obj, str | bytes | int | float | type):
            continue
        seen.add(id(obj))
        types.add(type(obj))
        if level < depth:
            queue.extend((child, level + 1) for child in _referents(obj))
    return types


async def test_engine_builds_one_typed_context_per_call(tmp_path: Path) -> None:
    rtws = tmp_path / "p"
    init_rtws(rtws, provider="mock")
    write_team(rtws, {"dev": {"toolsets": ["probe", "control"], "no_write_dirs": ["secret/**"]}})
    probe = {"name": "probe", "arguments": {"n": 1}}
    write_script(
        rtws,
        [
            {"match": "go", "tool_calls": [probe, {**probe, "arguments": {"n": 2}}]},
            {"role": "tool", "match": "probed 2", "tool_calls": [{**probe, "arguments": {"n": 3}}]},
            {"role": "tool", "match": "probed 3", "response": "done"},
        ],
    )
    seen: dict[int, ToolContext] = {}

    async def run(args: ProbeArgs, ctx: ToolContext) -> ToolOutput:
        seen[args.n] = ctx
        return ToolOutput(f"probed {args.n}")

    registry = standard_registry()
    registry.add_toolset("probe", [Tool("probe", "Record the context.", ProbeArgs, run)])
    rt = DialogRuntime(rtws, tools=registry)
    try:
        rec = rt.create_root_dialog("tasks/example.tsk")
        rt.post_user_message(rec.id, "go")
        await Scheduler(rt).run()
        gens = [g.id for g in rt.store.generations(rec.id)]
    finally:
        await rt.aclose()

    def key(gen: int, index: int) -> str:
        return hashlib.sha256(f"{rec.id}|{gen}|{index}".encode()).hexdigest()

    assert seen[1].call_key == key(gens[0], 0) == call_key(rec.id, gens[0], 0)
    assert seen[2].call_key == key(gens[0], 1)
    assert seen[3].call_key == key(gens[1], 0)
    ctx = seen[1]
    assert (ctx.member, ctx.dialog_id, ctx.is_root) == ("dev", rec.id, True)
    assert ctx.rtws == rtws.resolve() and ctx.task_path == "tasks/example.tsk"
    assert ctx.root_member == "dev" and ctx.work_language == "en"
    assert ctx.acl.no_write_dirs == ("secret/**",)
    assert "OPENAI_API_KEY" in ctx.secret_env_names
    assert ctx.reminders is not None and ctx.course is not None
    assert ctx.taskdoc_audit is not None and ctx.on_taskdoc_changed is not None
    # Nothing a tool can follow from its context leads to the engine.
    reachable = _reachable_types(ctx, depth=6)
    assert DialogRuntime not in reachable
    assert not any(t.__module__.startswith("mindloop.dialogs") for t in reachable)


def test_context_requires_a_real_call_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="call_key must be a sha256 hex digest"):
        ToolContext(rtws=tmp_path, member="m", dialog_id="d", call_key="")
    with pytest.raises(TypeError):
        ToolContext(rtws=tmp_path, member="m", dialog_id="d")  # type: ignore[call-arg]
    ctx = ToolContext.for_test(tmp_path)
    assert len(ctx.call_key) == 64
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.member = "other"  # type: ignore[misc]
    assert call_key("d", 1, 0) != call_key("d", 1, 1) != call_key("d", 2, 0)
    assert call_key("d", 1, 0) == call_key("d", 1, 0)
