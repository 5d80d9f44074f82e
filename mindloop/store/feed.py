"""What changed in the store since a reader last looked: the web UI's live feed.

A face that shows live state (the web UI) must also see what other processes write — a
`run --watch` driving, an `answer` from a terminal — and must resume after a lost
connection without losing or repeating anything. The store already holds that history:
`messages`, `events` and `taskdoc_changes` are append-only logs with increasing ids, so a
reader's position is the last id it saw in each (`FeedMarks`), and what it missed is the
rows after them. Dialogs, questions and waits are state, not logs: a reader only needs to
know *that* they changed (`FeedMarks.stamp`), then reads them again; so are the tasks'
loop states (phase, status) and their workspaces (nodes, rules, docs).

Everything here is a read. `marks` is one statement of scalar subqueries over primary
keys and small aggregates, cheap enough to poll a few times a second; the rows after a
mark are read only when a mark moved.

Why a position is enough: ids are handed out when rows are inserted, and on every dialect
write transactions run one at a time (SQLite's write lock, the PostgreSQL dialect's
advisory lock), each holding it until it commits — so a reader never sees id n+1 before
id n, and nothing appears later behind a position already reported.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from mindloop.store import schema as t
from mindloop.store.records import MessageRecord, TaskdocChange
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store

_m, _e, _c = t.messages.c, t.events.c, t.taskdoc_changes.c
_d, _q, _w, _t = t.dialogs.c, t.questions.c, t.waits.c, t.tasks.c
_wn, _wd, _wr, _wl = t.ws_nodes.c, t.ws_docs.c, t.ws_rules.c, t.ws_log.c


def _scalar(expr: Any) -> sa.ScalarSelect[Any]:
    return sa.select(expr).scalar_subquery()


MARKS = sa.select(
    _scalar(sa.func.coalesce(sa.func.max(_m.id), 0)),
    _scalar(sa.func.coalesce(sa.func.max(_e.id), 0)),
    _scalar(sa.func.coalesce(sa.func.max(_c.id), 0)),
    # The state stamp: any change of a dialog (status, claim, marks) moves updated_at;
    # a question asked, answered or discarded moves a count or a time; so does a wait.
    _scalar(sa.func.count(_d.id)),
    _scalar(sa.func.max(_d.updated_at)),
    _scalar(sa.func.count(_q.id)),
    _scalar(sa.func.max(sa.func.coalesce(_q.answered_at, _q.asked_at))),
    sa.select(sa.func.count(_q.id)).where(_q.status == "open").scalar_subquery(),
    _scalar(sa.func.count(_w.id)),
    _scalar(sa.func.max(sa.func.coalesce(_w.resolved_at, _w.created_at))),
    sa.select(sa.func.count(_w.id)).where(_w.status == "open").scalar_subquery(),
    # A task's loop moved (phase, status).
    _scalar(sa.func.count(_t.id)),
    _scalar(sa.func.max(_t.updated_at)),
    # A workspace changed: a node written, a rule or doc added, removed or expired (every
    # workspace command also appends to its log).
    _scalar(sa.func.count(_wn.node_id)),
    _scalar(sa.func.max(_wn.updated_at)),
    _scalar(sa.func.max(_wl.id)),
    _scalar(sa.func.count(_wr.id)),
    _scalar(sa.func.max(_wr.id)),
    _scalar(sa.func.count(_wd.path)),
    sa.select(sa.func.count(_wd.path)).where(_wd.status == "expired").scalar_subquery(),
)


def _between(table: sa.Table) -> sa.Select[Any]:
    col = table.c.id
    return (
        sa.select(table)
        .where(col > sa.bindparam("after"), col <= sa.bindparam("upto"))
        .order_by(col)
        .limit(sa.bindparam("limit"))
    )


MESSAGES_BETWEEN = _between(t.messages)
EVENTS_BETWEEN = _between(t.events)
CHANGES_BETWEEN = _between(t.taskdoc_changes)


class FeedMarks(BaseModel, frozen=True):
    """A reader's position: the last id seen in each log, and the state stamp."""

    messages: int = 0
    events: int = 0
    changes: int = 0
    stamp: tuple[float, ...] = ()


class StoredEvent(BaseModel):
    """One row of the stored event log (errors, failed and cut-off generations)."""

    id: int
    dialog_id: str | None
    type: str
    data: dict[str, Any]
    ts: float


def marks(store: Store) -> FeedMarks:
    """Where each log ends now, and the state stamp (one statement)."""
    row = store._rows(MARKS)[0]
    return FeedMarks(
        messages=int(row[0]),
        events=int(row[1]),
        changes=int(row[2]),
        stamp=tuple(float(v) if v is not None else -1.0 for v in row[3:]),
    )


def messages_between(store: Store, after: int, upto: int, limit: int) -> list[MessageRecord]:
    """Messages with `after < id <= upto`, oldest first, at most `limit`."""
    params = {"after": after, "upto": upto, "limit": limit}
    return store._records(MessageRecord, MESSAGES_BETWEEN, params)


def events_between(store: Store, after: int, upto: int, limit: int) -> list[StoredEvent]:
    params = {"after": after, "upto": upto, "limit": limit}
    return store._records(StoredEvent, EVENTS_BETWEEN, params)


def changes_between(store: Store, after: int, upto: int, limit: int) -> list[TaskdocChange]:
    params = {"after": after, "upto": upto, "limit": limit}
    return store._records(TaskdocChange, CHANGES_BETWEEN, params)


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
