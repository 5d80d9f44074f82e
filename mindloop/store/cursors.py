"""Cursors: where a resumable pass over a dialog stands (agent-loop §9.3).

A pass that works through something in batches (SELF_IMPROVE reads its root dialog ≤ 40
messages at a time) keeps its position here, and advances it in the transaction that
commits the batch's effects (its outbox rows): after a crash the batch is re-processed,
never skipped. A cursor is a small JSON value under `(scope, name)`; the loop types it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.dialects import postgresql, sqlite

from mindloop.store import schema as t
from mindloop.store import tails
from mindloop.store.memo import MISS
from mindloop.store.records import MessageRecord
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store

_c = t.cursors.c
_GET = sa.select(t.cursors).where(
    _c.scope == sa.bindparam("scope"), _c.name == sa.bindparam("name")
)


def _upsert(insert: Callable[[sa.Table], Any]) -> sa.Executable:
    """Create or move a cursor in one statement (SQLite and PostgreSQL spell it alike,
    each through its own SQLAlchemy construct)."""
    stmt = insert(t.cursors)
    return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=[_c.scope, _c.name],
        set_={"value": stmt.excluded.value, "updated_at": stmt.excluded.updated_at},
    )


# by the store's dialect name
_SET = {"sqlite": _upsert(sqlite.insert), "postgresql": _upsert(postgresql.insert)}

_NAMED_LIKE = sa.select(t.cursors).where(
    _c.scope == sa.bindparam("scope"), _c.name.like(sa.bindparam("pattern"))
)
_DELETE = sa.delete(t.cursors).where(
    _c.scope == sa.bindparam("scope"), _c.name == sa.bindparam("name")
)

_m = t.messages.c
_BATCH = (
    sa.select(t.messages)
    .where(
        _m.dialog_id == sa.bindparam("dialog_id"),
        _m.course == sa.bindparam("course"),
        _m.id > sa.bindparam("after_id"),
    )
    .order_by(_m.id)
    .limit(sa.bindparam("limit"))
)


class CursorRecord(BaseModel):
    scope: str
    name: str
    value: dict[str, Any] = Field(default_factory=dict)
    updated_at: float = 0.0


class Cursors:
    """The cursors of one store; every method joins the caller's `store.tx()`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, scope: str, name: str) -> CursorRecord | None:
        found = self.store._records(CursorRecord, _GET, {"scope": scope, "name": name})
        return found[0] if found else None

    def set(self, scope: str, name: str, value: dict[str, Any]) -> CursorRecord:
        """Create or move the cursor (one statement)."""
        now = time.time()
        row = {"scope": scope, "name": name, "value": value, "updated_at": now}
        self.store._write(_SET[self.store.dialect.name], row)
        return CursorRecord(scope=scope, name=name, value=value, updated_at=now)

    def with_prefix(self, scope: str, prefix: str) -> list[CursorRecord]:
        """The cursors of `scope` whose names start with `prefix` (no `%` or `_` in it)."""
        if "%" in prefix or "_" in prefix:
            raise ValueError(f"cursor prefix {prefix!r}: no LIKE wildcards")
        return self.store._records(
            CursorRecord, _NAMED_LIKE, {"scope": scope, "pattern": prefix + "%"}
        )

    def delete(self, scope: str, name: str) -> bool:
        return self.store._write(_DELETE, {"scope": scope, "name": name}) == 1


def message_batch(
    store: Store, dialog_id: str, course: int, after_id: int, limit: int
) -> list[MessageRecord]:
    """At most `limit` messages of one course after `after_id`, oldest first: a cursor's
    next batch, read without loading the rest of the dialog (nor reading at all what the
    course's kept tail holds, `tails.py`: a pass catching up with the newest messages)."""
    tail = store.memo_get(tails.key(dialog_id, course))
    if tail is not MISS and tail.covers(after_id):
        return tail.after(after_id, limit)  # type: ignore[no-any-return]
    params = {"dialog_id": dialog_id, "course": course, "after_id": after_id, "limit": limit}
    return store._records(MessageRecord, _BATCH, params)


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
