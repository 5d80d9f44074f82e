"""A side dialog stopped at the step limit can be resumed (issue 10, item 4).

With a per-drive limit of 2 steps and a teammate that calls tools three times, the
teammate's drive stops at the limit while its caller waits on it. The dialog is left
`stopped` (not `idle`), and `retry_stopped` (what `mindloop run --retry-errors` calls)
drives it on, so the caller gets its answer.
"""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.outcomes import DriveEnd
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.store import DialogStatus
from tests.scenario_util import write_script, write_team

LIST = {"name": "list_dir", "arguments": {"path": "."}}


async def test_side_dialog_at_the_step_limit_is_stopped_and_resumable(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}, "helper": {"toolsets": ["fs"]}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@helper look around\n"},
            {"member": "dev", "contains": "provided response", "response": "thanks"},
            {"member": "helper", "contains": "step limit", "response": "all listed"},
            {"member": "helper", "contains": "look around", "tool_calls": [LIST]},
            {"member": "helper", "role": "tool", "tool_calls": [LIST]},
        ],
    )
    rt = DialogRuntime(rtws, max_steps=2)
    root = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(root.id, "go")
    results = await Scheduler(rt).run()
    side = next(d for d in rt.store.list_dialogs(root_id=root.id) if d.kind == "side")
    assert [r.reason for r in results if r.dialog_id == side.id] == [DriveEnd.STEP_LIMIT]
    assert rt.store.get_dialog(side.id).status == DialogStatus.STOPPED
    assert rt.store.get_dialog(root.id).status == DialogStatus.WAITING
    assert await Scheduler(rt).run() == []  # a plain run does not loop on it

    assert rt.retry_stopped() == [side.id]
    await Scheduler(rt).run()
    root_said = [m.data["text"] for m in rt.store.load_history(root.id) if m.kind == "assistant"]
    assert root_said[-1] == "thanks"
    assert rt.store.all_pending() == []
    await rt.aclose()
