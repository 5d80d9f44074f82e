"""The outbox (every outward effect a step commits, KB requests first) and the receiver's
registry of idempotency keys (agent-loop §2 S2, §9.2).

A tool that sends something outward does not send it: its store effect inserts an outbox
row in the transaction that records the tool's result (`tools.base.StoreEffect`), so the
row exists exactly when the step does. A dispatcher delivers rows after the commit
(`loop.kb.KbDispatcher`), at least once; the receiver records each idempotency key in the
transaction that stores what it received, so a second delivery of the same request is
recognised and never processed twice (effectively once).

Row states: `pending` (to deliver; `next_attempt_at` says when) → `sent` (the receiver
stored it) or `duplicate` (the receiver had its key already: acknowledged without being
processed again) → `acked` (the receiver answered it); `pending` → `dead` after the retry
window. A row is inserted once per tool call (`call_key` is unique): a replayed call
does not queue its request twice.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from mindloop.store import schema as t
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store

_o, _k = t.outbox.c, t.received_keys.c


class OutboxStatus(StrEnum):
    PENDING = "pending"
    SENT = "sent"
    DUPLICATE = "duplicate"
    ACKED = "acked"
    DEAD = "dead"


class OutboxRecord(BaseModel):
    id: str  # msg_id
    kind: str
    call_key: str
    idempotency_key: str
    source_dialog: str
    source_member: str
    task_path: str | None = None
    target: str
    payload: dict[str, Any] = Field(default_factory=dict)
    status: OutboxStatus = OutboxStatus.PENDING
    attempts: int = 0
    next_attempt_at: float | None = None
    last_error: str | None = None
    created_at: float = 0.0
    sent_at: float | None = None
    delivered_to: str | None = None
    duplicate_of: str | None = None
    acked_at: float | None = None


class ReceivedKey(BaseModel):
    receiver: str
    key: str
    msg_id: str
    dialog_id: str
    received_at: float = 0.0


# ---------------------------------------------------------------------- statements

_INSERT = sa.insert(t.outbox)
_GET = sa.select(t.outbox).where(_o.id == sa.bindparam("id"))
_BY_CALL = sa.select(t.outbox).where(_o.call_key == sa.bindparam("call_key"))
_ALL = sa.select(t.outbox).order_by(_o.created_at, _o.id)
_DUE = (
    sa.select(t.outbox)
    .where(_o.status == OutboxStatus.PENDING.value, _o.next_attempt_at <= sa.bindparam("now"))
    .order_by(_o.next_attempt_at, _o.id)
    .limit(sa.bindparam("limit"))
)
# What the dispatcher has to do, in one cheap read: the earliest pending attempt, and
# whether sent rows wait for their acknowledgement.
_WORK = sa.select(
    sa.func.min(sa.case((_o.status == OutboxStatus.PENDING.value, _o.next_attempt_at))),
    sa.func.count(sa.case((_o.status == OutboxStatus.SENT.value, 1))),
).where(_o.status.in_([OutboxStatus.PENDING.value, OutboxStatus.SENT.value]))
_SENT = sa.select(t.outbox).where(_o.status == OutboxStatus.SENT.value).order_by(_o.id)
# Conditional moves out of `pending`: two dispatchers never both deliver a row.
_DELIVERED = (
    sa.update(t.outbox)
    .where(_o.id == sa.bindparam("_id"), _o.status == OutboxStatus.PENDING.value)
    .values(
        status=sa.bindparam("_status"),
        sent_at=sa.bindparam("_now"),
        delivered_to=sa.bindparam("_dialog"),
        duplicate_of=sa.bindparam("_of"),
        attempts=_o.attempts + 1,
        next_attempt_at=sa.bindparam("_next"),
        last_error=None,
    )
)
# A failed attempt (from `pending`) or a reply overdue (from `sent`): again later, or dead.
_FAILED = (
    sa.update(t.outbox)
    .where(_o.id == sa.bindparam("_id"), _o.status == sa.bindparam("_from"))
    .values(
        status=sa.bindparam("_status"),
        attempts=_o.attempts + 1,
        next_attempt_at=sa.bindparam("_next"),
        last_error=sa.bindparam("_error"),
    )
)
_ACKED = (
    sa.update(t.outbox)
    .where(_o.id == sa.bindparam("_id"), _o.status == OutboxStatus.SENT.value)
    .values(status=OutboxStatus.ACKED.value, acked_at=sa.bindparam("_now"))
)
# Whether a dialog answered since `after`: it said something after it, and its drive is
# over (not running, not marked to drive, not waiting on anyone).
_d, _m = t.dialogs.c, t.messages.c
_ANSWERED = sa.select(
    sa.exists().where(
        _d.id == sa.bindparam("dialog_id"),
        _d.status == "idle",
        _d.needs_drive.is_(False),
        sa.exists().where(
            _m.dialog_id == _d.id, _m.kind == "assistant", _m.created_at > sa.bindparam("after")
        ),
    )
)
_INSERT_KEY = sa.insert(t.received_keys)
_GET_KEY = sa.select(t.received_keys).where(
    _k.receiver == sa.bindparam("receiver"), _k.key == sa.bindparam("key")
)
_PRUNE_KEYS = sa.delete(t.received_keys).where(_k.received_at < sa.bindparam("before"))


class Outbox:
    """The outbox rows of one store. Every method joins the caller's `store.tx()`, or is a
    transaction of its own."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def enqueue(self, rec: OutboxRecord) -> bool:
        """Insert `rec` unless its tool call already queued a row (a replayed call).
        Returns whether it was inserted. `created_at` and `next_attempt_at` default to
        now (deliver at once)."""
        now = time.time()
        with self.store.tx():
            if self.by_call_key(rec.call_key) is not None:
                return False
            row = rec.model_dump(mode="json")
            row["created_at"] = rec.created_at or now
            if rec.next_attempt_at is None and rec.status is OutboxStatus.PENDING:
                row["next_attempt_at"] = row["created_at"]
            self.store._write(_INSERT, row)
        return True

    def get(self, msg_id: str) -> OutboxRecord | None:
        found = self.store._records(OutboxRecord, _GET, {"id": msg_id})
        return found[0] if found else None

    def by_call_key(self, call_key: str) -> OutboxRecord | None:
        found = self.store._records(OutboxRecord, _BY_CALL, {"call_key": call_key})
        return found[0] if found else None

    def all(self) -> list[OutboxRecord]:
        return self.store._records(OutboxRecord, _ALL)

    def work(self) -> tuple[float | None, int]:
        """(the earliest next attempt of a pending row or None, how many rows are sent
        and not acknowledged): one read, for the dispatcher's tick."""
        row = self.store._rows(_WORK)[0]
        return (None if row[0] is None else float(row[0])), int(row[1] or 0)

    def due(self, now: float, limit: int = 50) -> list[OutboxRecord]:
        """Pending rows whose next attempt is due, earliest first."""
        return self.store._records(OutboxRecord, _DUE, {"now": now, "limit": limit})

    def sent(self) -> list[OutboxRecord]:
        return self.store._records(OutboxRecord, _SENT)

    def mark_delivered(
        self,
        msg_id: str,
        dialog_id: str,
        *,
        duplicate_of: str | None = None,
        reply_by: float | None = None,
    ) -> bool:
        """`pending` → `sent` (or `duplicate` of the msg_id first received), once: False
        when the row was not pending (someone else delivered it). A sent row's
        `next_attempt_at` is `reply_by`: when its missing reply makes it overdue."""
        status = OutboxStatus.DUPLICATE if duplicate_of else OutboxStatus.SENT
        params = {
            "_id": msg_id,
            "_status": status.value,
            "_now": time.time(),
            "_dialog": dialog_id,
            "_of": duplicate_of,
            "_next": None if duplicate_of else reply_by,
        }
        return self.store._write(_DELIVERED, params) == 1

    def mark_failed(self, msg_id: str, error: str, next_attempt_at: float | None) -> bool:
        """A failed attempt: try again at `next_attempt_at`, or `dead` when None."""
        return self._again(msg_id, OutboxStatus.PENDING, error, next_attempt_at)

    def mark_overdue(self, msg_id: str, error: str, next_attempt_at: float | None) -> bool:
        """A sent row whose reply is overdue: redelivered (its receiver woken, the
        attempt counted) and looked at again at `next_attempt_at`, or `dead` when None."""
        return self._again(msg_id, OutboxStatus.SENT, error, next_attempt_at)

    def _again(
        self, msg_id: str, status: OutboxStatus, error: str, next_attempt_at: float | None
    ) -> bool:
        dead = next_attempt_at is None
        params = {
            "_id": msg_id,
            "_from": status.value,
            "_status": (OutboxStatus.DEAD if dead else status).value,
            "_next": next_attempt_at,
            "_error": error,
        }
        return self.store._write(_FAILED, params) == 1

    def answered(self, dialog_id: str, after: float) -> bool:
        """Whether the receiving dialog has answered since `after` (its drive ended
        with something said after it): what acknowledges a sent row."""
        return bool(self.store._rows(_ANSWERED, {"dialog_id": dialog_id, "after": after})[0][0])

    def mark_acked(self, msg_id: str) -> bool:
        return self.store._write(_ACKED, {"_id": msg_id, "_now": time.time()}) == 1


class ReceivedKeys:
    """The receiver-side registry of idempotency keys (§9.2 `received_keys`)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, receiver: str, key: str) -> ReceivedKey | None:
        found = self.store._records(ReceivedKey, _GET_KEY, {"receiver": receiver, "key": key})
        return found[0] if found else None

    def add(self, receiver: str, key: str, msg_id: str, dialog_id: str) -> None:
        row = ReceivedKey(
            receiver=receiver, key=key, msg_id=msg_id, dialog_id=dialog_id, received_at=time.time()
        )
        self.store._write(_INSERT_KEY, row.model_dump())

    def prune(self, before: float) -> int:
        """Forget keys received before `before` (kept ≥ 7 days: beyond any retry)."""
        return self.store._write(_PRUNE_KEYS, {"before": before})


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
