"""The outbox, the received-keys registry and cursors (schema v5): conditional moves so
two dispatchers never both deliver a row, one row per call key, upserted cursors (and
those of one name prefix), on every dialect of the conformance suite (`stores.KINDS`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from mindloop.store import Store
from mindloop.store import cursors as cursors_module
from mindloop.store import outbox as outbox_module
from mindloop.store.cursors import Cursors
from mindloop.store.outbox import Outbox, OutboxRecord, OutboxStatus, ReceivedKeys
from tests.store.stores import KINDS, open_store


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


@pytest.fixture(params=KINDS)
def s(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    store = open_store(tmp_path / ".mindloop" / "state.sqlite", request.param)
    yield store
    store.close()


def test_rows_move_out_of_pending_once(s: Store) -> None:
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


def test_received_keys_and_cursors(s: Store) -> None:
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
    cur.set("root", "checked:n1", {"at": 1})
    cur.set("root", "checked:n2", {"at": 2})
    cur.set("root", "checkedx", {"at": 3})  # not of the prefix "checked:"
    cur.set("other", "checked:n3", {"at": 4})
    assert [c.name for c in cur.with_prefix("root", "checked:")] == ["checked:n1", "checked:n2"]
    with pytest.raises(ValueError, match="wildcards"):
        cur.with_prefix("root", "a_b")


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
