"""A run that ends while a dialog's step is in flight (a task's loop parks while a
detached side dialog works) lets that step finish: its tool calls keep their results,
and the dialog is driven on by the next run. Cancelling it there would answer a call
whose effect already happened as 'interrupted by a runtime restart'."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel

from mindloop.dialogs.formats import INTERRUPTED_TOOL_RESULT
from mindloop.dialogs.outcomes import DriveEnd
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.store import DialogStatus
from mindloop.testing import ScriptedModel, Turn, call
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs
from mindloop.toolsets import standard_registry
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


class GateArgs(ToolArgs):
    pass


class Gate:
    """A tool that is in flight until the test lets it through."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.passed = 0

    async def run(self, args: GateArgs, ctx: ToolContext) -> ToolOutput:
        self.entered.set()
        await self.release.wait()
        self.passed += 1
        return ToolOutput("through the gate")

    def registry(self) -> object:
        reg = standard_registry()
        reg.add_toolset("work", [Tool[BaseModel]("gate", "Pass the gate.", GateArgs, self.run)])  # type: ignore[arg-type]
        return reg


def _results(rt: DialogRuntime, did: str) -> list[str]:
    return [m.data["content"] for m in rt.store.load_history(did) if m.kind == "tool_result"]


async def test_a_run_that_stops_mid_step_lets_the_step_finish_and_resumes_the_dialog(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work"]}})
    gate = Gate()
    model = ScriptedModel([Turn(tool_calls=[call("gate")]), Turn(text="done")])
    rt = DialogRuntime(rtws, tools=gate.registry(), providers={"mock": model})  # type: ignore[arg-type]
    root, _ = rt.start_root_dialog(TASK, "go", "dev")

    def stop() -> bool:
        if not gate.entered.is_set():
            return False
        gate.release.set()  # the step can finish now; the run must let it
        return True

    async def stop_once_in_flight() -> None:
        await gate.entered.wait()
        rt.wake.set()  # the run looks at `stop` again

    scheduler = Scheduler(rt)
    waker = asyncio.create_task(stop_once_in_flight())
    results = await asyncio.wait_for(scheduler.run(watch=True, poll_interval=30, stop=stop), 10)
    await waker

    assert gate.passed == 1
    assert _results(rt, root.id) == ["through the gate"]
    assert INTERRUPTED_TOOL_RESULT not in _results(rt, root.id)
    assert [r.reason for r in results] == [DriveEnd.PAUSED]
    record = rt.store.get_dialog(root.id)
    assert record.status is DialogStatus.INTERRUPTED and record.needs_drive
    said = [m.data["text"] for m in rt.store.load_history(root.id) if m.kind == "assistant"]
    assert "done" not in said  # the run ended at the step's end: no further generation

    # the next run drives it on from there
    await Scheduler(rt).run()
    said = [m.data["text"] for m in rt.store.load_history(root.id) if m.kind == "assistant"]
    assert said[-1] == "done"
    assert _results(rt, root.id) == ["through the gate"]
    await rt.aclose()


async def test_a_cancelled_run_still_cancels_its_drives(rtws: Path) -> None:
    """Ctrl-C or a shutdown cancels the run: its drives are cancelled at once (the call in
    flight is answered as interrupted when the dialog is driven again)."""
    write_team(rtws, {"dev": {"toolsets": ["work"]}})
    gate = Gate()
    model = ScriptedModel([Turn(tool_calls=[call("gate")]), Turn(text="done")])
    rt = DialogRuntime(rtws, tools=gate.registry(), providers={"mock": model})  # type: ignore[arg-type]
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    run = asyncio.create_task(Scheduler(rt).run(watch=True, poll_interval=30))
    await asyncio.wait_for(gate.entered.wait(), 10)
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    assert gate.passed == 0
    record = rt.store.get_dialog(root.id)
    assert record.status is DialogStatus.INTERRUPTED and record.needs_drive
    gate.release.set()
    await Scheduler(rt).run()
    assert _results(rt, root.id) == [INTERRUPTED_TOOL_RESULT]
    await rt.aclose()
