"""The KB dispatcher's delivery rules (agent-loop §9.2): a failed delivery is retried with
backoff (1 s, doubling, capped) and the row becomes dead after the retry window; two
dispatchers never both deliver one row; the run asks it for work only at its poll
interval."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop.kb import KbDispatcher
from mindloop.store.outbox import Outbox, OutboxRecord, OutboxStatus
from mindloop.testing import ScriptedModel
from tests.scenario_util import write_team


def _row(n: int = 0, created_at: float = 0.0, key: str = "k1") -> OutboxRecord:
    return OutboxRecord(
        id=f"kb-{n}",
        kind="kb_request",
        call_key=f"{n:064x}",
        idempotency_key=key,
        source_dialog="d1",
        source_member="dev",
        target="kb",
        payload={"kind": "GAP", "topic": "t", "content": "c"},
        created_at=created_at,
    )


@pytest.fixture
def rt(rtws: Path) -> DialogRuntime:
    write_team(rtws, {"dev": {}})
    return DialogRuntime(rtws, providers={"mock": ScriptedModel([])})


async def test_a_failed_delivery_backs_off_then_dies(
    rt: DialogRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = Outbox(rt.store)
    box.enqueue(_row())
    dispatcher = KbDispatcher(rt)

    def broken() -> None:
        raise OSError("disk full")

    monkeypatch.setattr(dispatcher, "kb_dialog", broken)
    delays = []
    for _ in range(3):
        before = time.time()
        (row,) = box.all()
        assert dispatcher.deliver(row) is False
        (row,) = box.all()
        assert row.status is OutboxStatus.PENDING and row.last_error == "OSError: disk full"
        assert row.next_attempt_at is not None
        delays.append(round(row.next_attempt_at - before))
    assert delays == [1, 2, 4] and row.attempts == 3
    assert dispatcher.next_due() == row.next_attempt_at
    assert dispatcher.tick(time.time()) is False  # not due yet: nothing tried
    assert box.all()[0].attempts == 3

    box.enqueue(_row(1, created_at=time.time() - 25 * 3600, key="k2"))  # past the window
    (old,) = [r for r in box.all() if r.id == "kb-1"]
    dispatcher.deliver(old)
    (old,) = [r for r in box.all() if r.id == "kb-1"]
    assert old.status is OutboxStatus.DEAD and old.next_attempt_at is None
    await rt.aclose()


async def test_a_row_is_delivered_by_one_dispatcher_only(rt: DialogRuntime) -> None:
    box = Outbox(rt.store)
    box.enqueue(_row())
    (row,) = box.all()
    one, two = KbDispatcher(rt), KbDispatcher(rt)
    assert one.deliver(row) is True
    assert two.deliver(row) is False  # the stale copy: already sent
    (kb,) = [d for d in rt.store.list_dialogs(task_path="tasks/kb.tsk")]
    assert sum(m.kind == "user" for m in rt.store.load_history(kb.id)) == 1
    assert box.all()[0].status is OutboxStatus.SENT
    await rt.aclose()


async def test_an_empty_outbox_costs_one_read(rt: DialogRuntime) -> None:
    dispatcher = KbDispatcher(rt)
    before = rt.store.stats.statements
    assert dispatcher.next_due() is None
    assert rt.store.stats.statements - before == 1
    await rt.aclose()


async def test_the_next_self_improve_is_shown_the_requests_that_died(rtws: Path) -> None:
    """A KB request the dispatcher gave up on is listed in the next SELF_IMPROVE input of
    its member's loop (agent-loop §9.2), so it can be sent again if still needed; another
    member's are not."""
    from mindloop.store import Store
    from mindloop.testing import Turn
    from tests.loop.loop_util import complete, create, end, run_task, verdict

    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    store = Store.for_rtws(rtws)
    box = Outbox(store)
    box.enqueue(_row(7, created_at=time.time()))
    box.mark_failed("kb-7", "OSError: disk full", None)
    other = _row(8, created_at=time.time(), key="k8").model_copy(update={"source_member": "qa"})
    box.enqueue(other)
    box.mark_failed("kb-8", "OSError: disk full", None)
    store.close()
    model = ScriptedModel(
        [
            Turn(tool_calls=[create("a"), end("DO")]),
            Turn(tool_calls=[complete("n1"), end("CHECK")]),
            Turn(tool_calls=[verdict("n1"), end("END")]),
            Turn(tool_calls=[end("END")]),
        ]
    )
    report, rt = await run_task(rtws, model, "go")
    inputs = [m.data["text"] for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    improve = inputs[-1]
    assert improve.startswith("[work loop] Phase SELF_IMPROVE")
    assert "KB requests never delivered" in improve
    assert "- kb-7 (GAP) 't': attempts 1; last error: OSError: disk full" in improve
    assert "kb-8" not in improve
    assert all("kb-7" not in t for t in inputs[:-1])  # SELF_IMPROVE's alone
    await rt.aclose()


async def test_a_sent_request_the_kb_never_answers_is_redelivered_then_dies(
    rt: DialogRuntime,
) -> None:
    """§9.2: without a reply within `loop.kb.reply_timeout_seconds` (1 h) a sent row is
    redelivered with backoff — the KB dialog, which holds the request already (its key is
    registered), is marked to drive again rather than sent a second copy — until the retry
    window ends, when the row is dead (and shown to the next SELF_IMPROVE)."""
    box = Outbox(rt.store)
    box.enqueue(_row(created_at=time.time()))
    dispatcher = KbDispatcher(rt)
    (row,) = box.all()
    assert dispatcher.deliver(row) is True
    (row,) = box.all()
    assert row.status is OutboxStatus.SENT and row.sent_at is not None
    assert row.next_attempt_at == pytest.approx(row.sent_at + 3600)
    kb = rt.store.get_dialog(row.delivered_to or "")
    rt.store.update_dialog(kb.id, needs_drive=False)  # as if its drive had failed

    assert dispatcher.ack_answered(now=row.sent_at + 10) == 0  # not yet overdue
    assert box.all()[0].attempts == 1 and not rt.store.get_dialog(kb.id).needs_drive

    late = row.sent_at + 3601
    dispatcher.ack_answered(now=late)
    (row,) = box.all()
    assert row.status is OutboxStatus.SENT and row.attempts == 2
    assert row.next_attempt_at == pytest.approx(late + 2)
    assert row.last_error is not None and "no reply" in row.last_error
    assert rt.store.get_dialog(kb.id).needs_drive  # woken, not re-posted
    assert sum(m.kind == "user" for m in rt.store.load_history(kb.id)) == 1

    dispatcher.ack_answered(now=row.created_at + 24 * 3600 + 1)  # past the window
    (row,) = box.all()
    assert row.status is OutboxStatus.DEAD and row.next_attempt_at is None
    await rt.aclose()
