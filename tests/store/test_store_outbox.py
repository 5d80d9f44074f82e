"""The outbox, the received-keys registry and cursors (schema v5): conditional moves so
two dispatchers never both deliver a row, one row per call key, upserted cursors, and
SQL that PostgreSQL accepts too."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from mindloop.store import Store
from mindloop.store import cursors as cursors_module
from mindloop.store import outbox as outbox_module
from mindloop.store.cursors import Cursors
from mindloop.store.outbox import Outbox, OutboxRecord, OutboxStatus, ReceivedKeys


def _row(n: int) -> OutboxRecord:
    return OutboxRecord(
        id=f"m{n}",
        kind="kb_request",
        call_key=f"c{n}",
        idempotency_key="k",
        source_dialog="d",
        source_member="dev",
        target="kb",
    )


def test_rows_move_out_of_pending_once(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.sqlite")
    box = Outbox(s)
    assert box.work() == (None, 0)
    assert box.enqueue(_row(1)) and not box.enqueue(_row(1))  # one row per call key
    box.enqueue(_row(2))
    due, sent = box.work()
    assert due is not None and sent == 0 and [r.id for r in box.due(due + 1)] == ["m1", "m2"]
    assert box.mark_delivered("m1", "kbd") and not box.mark_delivered("m1", "kbd")
    assert box.mark_delivered("m2", "kbd", duplicate_of="m1")
    assert [(r.status, r.attempts) for r in box.all()] == [
        (OutboxStatus.SENT, 1),
        (OutboxStatus.DUPLICATE, 1),
    ]
    assert box.work() == (None, 1)
    assert box.mark_acked("m1") and not box.mark_acked("m2")
    assert not box.mark_failed("m1", "late", None)  # only a pending row can fail
    s.close()


def test_received_keys_and_cursors(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.sqlite")
    keys = ReceivedKeys(s)
    assert keys.get("kb", "k") is None
    keys.add("kb", "k", "m1", "kbd")
    found = keys.get("kb", "k")
    assert found is not None and (found.msg_id, found.dialog_id) == ("m1", "kbd")
    assert keys.get("other", "k") is None
    assert keys.prune(found.received_at + 1) == 1 and keys.get("kb", "k") is None
    cur = Cursors(s)
    assert cur.get("root", "self_improve") is None
    cur.set("root", "self_improve", {"course": 1, "message_id": 4})
    cur.set("root", "self_improve", {"course": 2, "message_id": 0})
    got = cur.get("root", "self_improve")
    assert got is not None and got.value == {"course": 2, "message_id": 0}
    assert cur.delete("root", "self_improve") and cur.get("root", "self_improve") is None
    s.close()


def test_the_statements_compile_for_postgresql() -> None:
    pg = postgresql.dialect()
    found = [
        v
        for module in (outbox_module, cursors_module)
        for v in vars(module).values()
        if isinstance(v, sa.Executable)
    ]
    assert len(found) >= 15
    for stmt in found:
        stmt.compile(dialect=pg)
