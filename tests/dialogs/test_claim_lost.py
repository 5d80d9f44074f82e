"""A drive that lost its claim commits nothing (issue 9, part 1).

A process that stalls past its claim's time to live (here: a tool that blocks the event
loop, so not even the heartbeat runs) may find another process has taken the dialog
over. Its next commit checks the claim inside the transaction and rolls back: the tool
results it was about to record are not written next to the new driver's — nor, when its
calls act only in the store, the generation that was to commit with them.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from mindloop.dialogs.outcomes import DriveEnd
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.store import Store
from mindloop.testing import ScriptedModel, Turn, call
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs
from mindloop.toolsets import standard_registry
from tests.scenario_util import write_team

TTL = 0.4


class StallArgs(ToolArgs):
    pass


async def _stall(args: StallArgs, ctx: ToolContext) -> ToolOutput:
    time.sleep(TTL * 3)  # blocks the loop: the heartbeat cannot renew the claim
    return ToolOutput("stalled")


@pytest.mark.parametrize("store_only", [False, True], ids=["outside-effect", "store-only"])
async def test_a_stalled_drive_that_was_taken_over_commits_nothing(
    rtws: Path, store_only: bool
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["work"]}})
    reg = standard_registry()
    stall = Tool[BaseModel]("stall", "Stall.", StallArgs, _stall, store_only=store_only)  # type: ignore[arg-type]
    reg.add_toolset("work", [stall])
    model = ScriptedModel([Turn(tool_calls=[call("stall")]), Turn(text="never")])
    rt = DialogRuntime(rtws, tools=reg, providers={"mock": model}, claim_ttl=TTL)
    root, _ = rt.start_root_dialog("tasks/example.tsk", "go", "dev")
    taken: list[bool] = []

    def thief() -> None:  # another process, once the claim expired
        other = Store.for_rtws(rtws)  # the same database, as another process opens it
        deadline = time.time() + 5
        while time.time() < deadline and other.get_dialog(root.id).claim_owner is None:
            time.sleep(0.01)  # until this process's drive holds it
        while time.time() < deadline and not taken:
            if other.claim_dialog(root.id, "other-host/1/1/x", 60):
                taken.append(True)
            time.sleep(0.05)
        other.close()

    t = threading.Thread(target=thief)
    t.start()
    result = await rt.drive(root.id)
    t.join()
    assert taken == [True]
    assert result.reason is DriveEnd.CLAIMED
    kinds = [m.kind for m in rt.store.load_history(root.id)]
    if store_only:  # the generation was to commit with the result: nothing of the step
        assert kinds == ["user"] and rt.store.generations(root.id) == []
    else:  # the generation committed before its tool ran; no result written by the loser
        assert kinds == ["user", "assistant", "tool_call"]
    rec = rt.store.get_dialog(root.id)
    assert rec.claim_owner == "other-host/1/1/x" and rec.status == "running"
    await rt.aclose()
