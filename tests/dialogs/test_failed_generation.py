"""A failed generation is never a turn (issue 10, item 2), and a scheduler run recovers by
itself what a dead process left running (issue 10, item 9)."""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.store import DialogStatus
from tests.dialogs.crash_points import process_died
from tests.scenario_util import write_script, write_team

TASK = "tasks/example.tsk"


async def test_partial_output_of_a_failed_stream_is_an_event_and_retry_reruns_it(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {}})
    write_script(
        rtws,
        [
            {
                "member": "dev",
                "match": "go",
                "response": "PARTIAL one two three four",
                "error": {"status": 400, "message": "bad event"},
                "after_chunks": 2,
            }
        ],
    )
    rt = DialogRuntime(rtws)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    [result] = await Scheduler(rt).run()
    assert result.reason == "error"
    assert [m.kind for m in rt.store.load_history(root.id)] == ["user"]  # no turn
    [failed] = [e for e in rt.store.events(root.id) if e["type"] == "generation_failed"]
    assert failed["data"]["partial"]["text"].startswith("PARTIAL")

    write_script(rtws, [{"member": "dev", "match": "go", "response": "whole answer"}])
    assert rt.retry_stopped() == [root.id]
    await Scheduler(rt).run()
    hist = rt.store.load_history(root.id)
    assert [(m.kind, m.data["text"]) for m in hist] == [
        ("user", "go"),
        ("assistant", "whole answer"),
    ]
    await rt.aclose()


async def test_a_scheduler_run_alone_resumes_what_a_dead_process_left_running(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {}})
    write_script(rtws, [{"member": "dev", "match": "go", "response": "done"}])
    rt = DialogRuntime(rtws)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    with rt.store.tx():  # a process claimed it, marked it running, then died
        assert rt.store.claim_dialog(root.id, "gone/1/1/x", 60)
    process_died(rt)
    results = await Scheduler(rt).run()  # no explicit recovery call
    assert [(r.dialog_id, r.final_text) for r in results] == [(root.id, "done")]
    assert rt.store.get_dialog(root.id).status == DialogStatus.IDLE
    await rt.aclose()
