"""The store's side of waits beyond open/resolve (`Store.add_wait`, `resolve_wait`):
events kept until their wait is registered, reminders (a due time moved on), the waits a
dialog had resolved since a moment, and the open waits of one kind across dialogs.

These run when a wait is opened, resolved, falls due or is listed — never per step of a
dialog that has no waits — so they are built once here and run through SQLAlchemy rather
than the store's prebuilt fast path.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from mindloop.store import schema as t
from mindloop.store.records import WaitRecord, WaitStatus
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store

_w, _e, _d, _q = t.waits.c, t.wait_events.c, t.dialogs.c, t.questions.c


class KeptEvent(BaseModel):
    """An event that matched no open wait when it came (agent-loop §2 `inbox`)."""

    id: int
    kind: str
    key: str
    dialog_id: str | None = None
    event: dict[str, Any]
    created_at: float
    consumed_by: str | None = None
    consumed_at: float | None = None


_KEEP = sa.insert(t.wait_events)
_KEPT = (
    sa.select(t.wait_events)
    .where(
        _e.kind == sa.bindparam("kind"),
        _e.key == sa.bindparam("key"),
        _e.consumed_by.is_(None),
        sa.or_(_e.dialog_id.is_(None), _e.dialog_id == sa.bindparam("dialog_id")),
    )
    .order_by(_e.id)
)
_ALL_KEPT = sa.select(t.wait_events).where(_e.consumed_by.is_(None)).order_by(_e.id)
_CONSUME = (
    sa.update(t.wait_events)
    .where(_e.id == sa.bindparam("_id"), _e.consumed_by.is_(None))
    .values(consumed_by=sa.bindparam("_wait"), consumed_at=sa.bindparam("_now"))
)
_OPEN_BY_KEY = (
    sa.select(t.waits)
    .where(_w.kind == sa.bindparam("kind"), _w.key == sa.bindparam("key"), _w.status == "open")
    .order_by(_w.created_at, _w.id)
)
# The open waits of one node of one task (by the task of the dialog that waits).
_OPEN_OF_NODE = (
    sa.select(t.waits)
    .join(t.dialogs, _d.id == _w.dialog_id)
    .where(
        _w.kind == sa.bindparam("kind"),
        _w.node == sa.bindparam("node"),
        _d.task_path == sa.bindparam("task_path"),
        _w.status == "open",
    )
    .order_by(_w.created_at, _w.id)
)
_REMIND = (
    sa.update(t.waits)
    .where(_w.id == sa.bindparam("_id"), _w.status == "open")
    .values(due_at=sa.bindparam("_due"), reminders=_w.reminders + sa.bindparam("_more"))
)
_RESOLVED_SINCE = (
    sa.select(t.waits)
    .where(
        _w.dialog_id == sa.bindparam("dialog_id"),
        _w.status != "open",
        _w.resolved_at > sa.bindparam("since"),
    )
    .order_by(_w.resolved_at, _w.id)
)
_CANCEL_ANY = (
    sa.update(t.waits)
    .where(
        _w.dialog_id == sa.bindparam("_dialog"),
        _w.node == sa.bindparam("_node"),
        _w.mode == "any",
        _w.status == "open",
        _w.id != sa.bindparam("_id"),
    )
    .values(
        status=WaitStatus.CANCELLED.value,
        resolution=sa.bindparam("_resolution"),
        resolved_at=sa.bindparam("_now"),
    )
)
_CANCEL_OF_DIALOG = (
    sa.update(t.waits)
    .where(_w.dialog_id == sa.bindparam("_dialog"), _w.kind == sa.bindparam("_kind"))
    .where(_w.status == "open")
    .values(
        status=WaitStatus.CANCELLED.value,
        resolution=sa.bindparam("_resolution"),
        resolved_at=sa.bindparam("_now"),
    )
)
_QUESTION_SPANS = sa.select(_q.asked_at, _q.answered_at).where(
    _q.dialog_id == sa.bindparam("dialog_id")
)


def keep_event(
    store: Store, kind: str, key: str, event: dict[str, Any], dialog_id: str | None = None
) -> int:
    """Keep an event no open wait matched; its id."""
    row = {"kind": kind, "key": key, "dialog_id": dialog_id, "event": event}
    return store._insert(_KEEP, row | {"created_at": time.time()})


def kept_events(store: Store, kind: str, key: str, dialog_id: str | None) -> list[KeptEvent]:
    """Unconsumed events of `kind` and `key` (for `dialog_id`, or for any), oldest first."""
    params = {"kind": kind, "key": key, "dialog_id": dialog_id}
    return store._records(KeptEvent, _KEPT, params)


def all_kept_events(store: Store) -> list[KeptEvent]:
    return store._records(KeptEvent, _ALL_KEPT)


def consume_event(store: Store, event_id: int, wait_id: str) -> bool:
    """Mark a kept event used by `wait_id` (once: False if another wait took it)."""
    params = {"_id": event_id, "_wait": wait_id, "_now": time.time()}
    return store._write(_CONSUME, params) == 1


def open_waits_by_key(store: Store, kind: str, key: str) -> list[WaitRecord]:
    return store._records(WaitRecord, _OPEN_BY_KEY, {"kind": kind, "key": key})


def open_waits_of_node(store: Store, kind: str, task_path: str, node: str) -> list[WaitRecord]:
    """The open waits of `kind` on node `node` of the task `task_path`."""
    params = {"kind": kind, "node": node, "task_path": task_path}
    return store._records(WaitRecord, _OPEN_OF_NODE, params)


def remind(store: Store, wait_id: str, due_at: float, *, reminded: bool = True) -> bool:
    """Move an open wait's due time on (counting a reminder if one was sent); False if it
    is no longer open."""
    params = {"_id": wait_id, "_due": due_at, "_more": 1 if reminded else 0}
    return store._write(_REMIND, params) == 1


def resolved_since(store: Store, dialog_id: str, since: float) -> list[WaitRecord]:
    """The dialog's waits closed after `since` (resolved, expired or cancelled)."""
    return store._records(WaitRecord, _RESOLVED_SINCE, {"dialog_id": dialog_id, "since": since})


def cancel_alternatives(store: Store, rec: WaitRecord, resolution: dict[str, Any]) -> int:
    """Cancel the other open `any` waits of `rec`'s node (one of them resolved)."""
    params = {
        "_dialog": rec.dialog_id,
        "_node": rec.node,
        "_id": rec.id,
        "_resolution": resolution,
        "_now": time.time(),
    }
    return store._write(_CANCEL_ANY, params)


def cancel_waits_of(store: Store, dialog_id: str, kind: str, resolution: dict[str, Any]) -> int:
    """Cancel a dialog's open waits of one kind (e.g. its questions were discarded)."""
    params = {"_dialog": dialog_id, "_kind": kind, "_resolution": resolution, "_now": time.time()}
    return store._write(_CANCEL_OF_DIALOG, params)


def open_waits_of_kind(
    store: Store, kind: str, *, root_ids: Sequence[str] | None = None
) -> list[WaitRecord]:
    """Open waits of one kind across dialogs (of the trees of `root_ids`), oldest first."""
    stmt = sa.select(t.waits).where(_w.kind == kind, _w.status == "open")
    if root_ids is not None:
        tree = sa.select(_d.id).where(_d.root_id.in_(list(root_ids)))
        stmt = stmt.where(_w.dialog_id.in_(tree))
    return store._records(WaitRecord, stmt.order_by(_w.created_at, _w.id))


def question_spans(store: Store, dialog_id: str) -> list[tuple[float, float | None]]:
    """(asked_at, answered_at) of every question the dialog asked."""
    return [(r[0], r[1]) for r in store._rows(_QUESTION_SPANS, {"dialog_id": dialog_id})]


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
