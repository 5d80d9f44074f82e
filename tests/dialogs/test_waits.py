"""Waits as records (issue 9, part 7): one drive rule over tellasks, questions and wait
records; a timer wakes its dialog from the scheduler; a wait resolves exactly once; a
detached tellask delivers its reply to its sink exactly once, across a crash."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.dialogs.tree import DetachedReply
from mindloop.dialogs.wait_kinds import SystemEvent, WaitKind
from mindloop.store import DialogStatus, Store, WaitStatus
from tests.dialogs.crash_points import CrashingStore
from tests.scenario_util import write_script, write_team

TASK = "tasks/example.tsk"


def _said(rt: DialogRuntime, did: str) -> list[str]:
    return [m.data["text"] for m in rt.store.load_history(did) if m.kind == "assistant"]


async def test_a_blocking_wait_parks_the_dialog_and_its_resolution_drives_it_on(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {}})
    write_script(
        rtws,
        [
            {"member": "dev", "contains": "you waited for came", "response": "deployed, going on"},
            {"member": "dev", "default": True, "response": "first"},
        ],
    )
    rt = DialogRuntime(rtws)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    wait = rt.open_wait(root.id, WaitKind.EXTERNAL, "deploy", {"event_type": "deploy"})
    assert await Scheduler(rt).run() == []  # blocked: not driven
    assert rt.store.get_dialog(root.id).status == DialogStatus.WAITING
    done = rt.deliver(SystemEvent(event_type="deploy", key="v1", payload={"by": "ci"}))
    assert [r.id for r in done.resolved] == [wait.id]
    assert rt.resolve_wait(wait.id, {"by": "again"}) is None  # exactly once
    await Scheduler(rt).run()
    hist = rt.store.load_history(root.id)
    assert [m.kind for m in hist] == ["user", "note", "assistant"]
    assert hist[1].data["text"] == (
        "[mindloop] The system event 'deploy' (key 'v1') you waited for came: {\"by\": \"ci\"}"
    )
    assert _said(rt, root.id) == ["deployed, going on"]
    assert rt.store.get_wait(wait.id).status is WaitStatus.RESOLVED
    await rt.aclose()


async def test_a_timer_wakes_its_dialog_from_a_watching_scheduler(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    write_script(
        rtws,
        [
            {"member": "dev", "contains": "fired", "response": "woken"},
            {"member": "dev", "default": True, "response": "first"},
        ],
    )
    rt = DialogRuntime(rtws)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    assert _said(rt, root.id) == ["first"]
    started = time.monotonic()  # before the due time is taken: the wait is >= 0.3 s after
    rt.open_wait(root.id, WaitKind.TIMER, "nap", due_at=time.time() + 0.3)
    sched = Scheduler(rt)
    # poll_interval is long: the timer must fire from its due time, not from a poll
    await asyncio.wait_for(
        sched.run(watch=True, poll_interval=30, stop=lambda: len(_said(rt, root.id)) == 2), 10
    )
    assert _said(rt, root.id) == ["first", "woken"]
    assert 0.29 <= time.monotonic() - started < 5  # (0.01: the two clocks' rounding)
    assert rt.store.open_waits(root.id) == []
    await rt.aclose()


def _sink(store: Store, reply: DetachedReply) -> None:
    store.record_event("sink_delivered", reply.caller_id, {"text": reply.text, **reply.payload})


def _detached_rtws(rtws: Path) -> None:
    write_team(rtws, {"lead": {}, "worker": {}})
    write_script(
        rtws,
        [
            {"member": "worker", "contains": "build it", "response": "built"},
            {"member": "lead", "contains": "[detached]", "response": "noted"},
            {"member": "lead", "default": True, "response": "started"},
        ],
    )


@pytest.mark.parametrize("after", [False, True], ids=["killed-before", "killed-after"])
async def test_a_detached_reply_reaches_its_sink_exactly_once_across_a_kill(
    rtws: Path, after: bool
) -> None:
    _detached_rtws(rtws)
    state = rtws / ".mindloop" / "state.sqlite"
    rt = DialogRuntime(
        rtws, store=CrashingStore(state, "sink_delivered", after), sinks={"s": _sink}
    )
    root, _ = rt.start_root_dialog(TASK, "go", "lead")
    await Scheduler(rt).run()
    side = rt.start_detached(root.id, "worker", "build it", sink="s", payload={"node": "n1"})
    with pytest.raises(SystemExit):
        await rt.drive(side.id)
    await rt.aclose()

    rt = DialogRuntime(rtws, sinks={"s": _sink})
    for did, owner in rt.store.held_claims():  # the killed process's claims expire
        if owner:
            rt.store.expire_claim(did, owner)
    await Scheduler(rt).run()
    delivered = [e for e in rt.store.events() if e["type"] == "sink_delivered"]
    assert [e["data"] for e in delivered] == [{"text": "built", "node": "n1"}]
    assert _said(rt, side.id) == ["built"]
    notes = [m for m in rt.store.load_history(root.id) if "[detached]" in m.data.get("text", "")]
    assert len(notes) == 1 and "built" in notes[0].data["text"]
    assert _said(rt, root.id) == ["started", "noted"]  # the caller was woken by the note
    assert rt.store.open_waits(root.id) == []
    await rt.aclose()


async def test_the_caller_of_a_detached_tellask_is_not_parked(rtws: Path) -> None:
    _detached_rtws(rtws)
    rt = DialogRuntime(rtws, sinks={"s": _sink})
    root, _ = rt.start_root_dialog(TASK, "go", "lead")
    side = rt.start_detached(root.id, "worker", "build it", sink="s")
    result = await rt.drive(root.id)  # while its detached side dialog has not answered
    assert (result.reason, result.final_text) == ("done", "started")
    assert _said(rt, side.id) == []
    with pytest.raises(Exception, match="no reply sink 'nope'"):
        rt.start_detached(root.id, "worker", "x", sink="nope")
    await rt.aclose()
