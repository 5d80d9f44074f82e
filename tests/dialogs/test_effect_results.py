"""A store effect may recast its call's result at commit time (`EffectResult`): the
outcome as it turned out, or an error when the state moved since the tool looked — then
the effect wrote nothing and the call's later effects (a side dialog to start) are
skipped. Other calls of the step are untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.testing import ScriptedModel, Turn, call
from mindloop.tools.base import (
    EffectResult,
    StartDetached,
    StoreEffect,
    Tool,
    ToolContext,
    ToolOutput,
)
from mindloop.tools.registry import ToolArgs
from mindloop.toolsets import standard_registry
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


class Args(ToolArgs):
    outcome: str


async def _act(args: Args, ctx: ToolContext) -> ToolOutput:
    def apply(store: Any) -> EffectResult | None:
        if args.outcome == "refused":
            return EffectResult("refused at commit: nothing written", is_error=True)
        store.record_event("acted", ctx.dialog_id, {"outcome": args.outcome})
        return EffectResult("acted as id 7") if args.outcome == "recast" else None

    side = StartDetached(member="dev", message="side work", sink="s")
    return ToolOutput(f"acting ({args.outcome})", effects=(StoreEffect(apply), side))


def _registry() -> object:
    reg = standard_registry()
    reg.add_toolset("work", [Tool[BaseModel]("act", "Act.", Args, _act)])  # type: ignore[arg-type]
    return reg


async def test_an_effect_result_recasts_the_result_and_a_refusal_skips_the_rest(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work"]}})
    model = ScriptedModel(
        [
            Turn(
                tool_calls=[
                    call("act", outcome="refused"),
                    call("act", outcome="recast"),
                    call("act", outcome="plain"),
                ]
            ),
            Turn(text="done"),
            Turn(text="side done"),
            Turn(text="side done"),
            Turn(text="noted"),
            Turn(text="noted"),
        ]
    )
    replies: list[str] = []
    rt = DialogRuntime(
        rtws,
        tools=_registry(),  # type: ignore[arg-type]
        providers={"mock": model},
        sinks={"s": lambda store, reply: replies.append(reply.text)},
    )
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    results = [
        (m.data["content"], m.data["is_error"])
        for m in rt.store.load_history(root.id)
        if m.kind == "tool_result"
    ]
    assert results == [
        ("refused at commit: nothing written", True),
        ("acted as id 7", False),
        ("acting (plain)", False),
    ]
    assert [e["data"]["outcome"] for e in rt.store.events() if e["type"] == "acted"] == [
        "recast",
        "plain",
    ]
    sides = [d for d in rt.store.list_dialogs(root_id=root.id) if d.kind == "side"]
    assert len(sides) == 2  # the refused call's side dialog was never started
    assert sorted(replies) == ["side done", "side done"]
    await rt.aclose()
