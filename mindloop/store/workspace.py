"""The store's side of task workspaces: the SQL of the `ws_*` tables (issue 11).

Rows in, rows out (plain dicts with JSON records): the store knows nothing of nodes or
transitions, `mindloop.workspace` does. Every write joins the caller's transaction
(`store.tx()`), like every other store method; a node update carries the version it
expects and reports whether the row was still at it. Statements are built once at import
(see `statements.py` for why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from mindloop.store import schema as t
from mindloop.store.memo import MISS
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store

_n, _d, _r, _l, _m = t.ws_nodes.c, t.ws_docs.c, t.ws_rules.c, t.ws_log.c, t.ws_meta.c
_task: sa.BindParameter[str] = sa.bindparam("task_path")

META = sa.select(t.ws_meta).where(_m.task_path == _task)
STAMP = sa.select(_m.stamp).where(_m.task_path == _task)
RESTAMP = (
    sa.update(t.ws_meta)
    .where(_m.task_path == sa.bindparam("_task"))
    .values(stamp=sa.bindparam("stamp"))
)
TASKS = sa.select(_m.task_path).order_by(_m.task_path)
NODES = sa.select(t.ws_nodes).where(_n.task_path == _task).order_by(_n.seq)
DOCS = sa.select(t.ws_docs).where(_d.task_path == _task).order_by(_d.seq)
RULES = sa.select(t.ws_rules).where(_r.task_path == _task).order_by(_r.id)
RULE_TEXTS = sa.select(_r.text).where(_r.task_path == _task).order_by(_r.id)
LOG = sa.select(t.ws_log).where(_l.task_path == _task).order_by(_l.id)
NODE_LOG = (
    sa.select(t.ws_log)
    .where(_l.task_path == _task, _l.node_id == sa.bindparam("node_id"))
    .order_by(_l.id)
)
OWN_LOG = sa.select(t.ws_log).where(_l.task_path == _task, _l.node_id.is_(None)).order_by(_l.id)
_LINE = (_l.node_id, _l.at, _l.actor, _l.text)  # what the projections show of a row
LOG_LINES = sa.select(*_LINE).where(_l.task_path == _task).order_by(_l.id)
NODE_LOG_LINES = (
    sa.select(*_LINE)
    .where(_l.task_path == _task, _l.node_id == sa.bindparam("node_id"))
    .order_by(_l.id)
)
OWN_LOG_LINES = sa.select(*_LINE).where(_l.task_path == _task, _l.node_id.is_(None)).order_by(_l.id)

INSERT_META = sa.insert(t.ws_meta)
UPDATE_META = (
    sa.update(t.ws_meta)
    .where(_m.task_path == sa.bindparam("_task"))
    .values(
        focus=sa.bindparam("focus"),
        offered=sa.bindparam("offered"),
        updated_at=sa.bindparam("updated_at"),
        stamp=sa.bindparam("stamp"),  # a write of the workspace: a new stamp (`restamp`)
    )
)
FOCUS_META = (  # a write that moved the focus, not the docs found
    sa.update(t.ws_meta)
    .where(_m.task_path == sa.bindparam("_task"))
    .values(
        focus=sa.bindparam("focus"),
        updated_at=sa.bindparam("updated_at"),
        stamp=sa.bindparam("stamp"),
    )
)
TOUCH_META = (  # a write that moved neither the focus nor the docs found
    sa.update(t.ws_meta)
    .where(_m.task_path == sa.bindparam("_task"))
    .values(updated_at=sa.bindparam("updated_at"), stamp=sa.bindparam("stamp"))
)
INSERT_NODE = sa.insert(t.ws_nodes)
UPDATE_NODE = (
    sa.update(t.ws_nodes)
    .where(
        _n.task_path == sa.bindparam("_task"),
        _n.node_id == sa.bindparam("_node"),
        _n.version == sa.bindparam("_expected"),
    )
    .values(
        parent_id=sa.bindparam("parent_id"),
        status=sa.bindparam("status"),
        version=sa.bindparam("version"),
        data=sa.bindparam("data"),
        updated_at=sa.bindparam("updated_at"),
    )
)
DELETE_DOCS = sa.delete(t.ws_docs).where(_d.task_path == _task)
INSERT_DOC = sa.insert(t.ws_docs)
INSERT_RULE = sa.insert(t.ws_rules)
DELETE_RULE = sa.delete(t.ws_rules).where(_r.id == sa.bindparam("_id"))
INSERT_LOG = sa.insert(t.ws_log)
USER_MESSAGES = (
    sa.select(t.messages.c.id, t.messages.c.data)
    .where(t.messages.c.dialog_id == sa.bindparam("dialog_id"), t.messages.c.kind == "user")
    .order_by(t.messages.c.id.desc())
)


@dataclass
class WorkspaceRows:
    """One task's workspace as stored."""

    meta: dict[str, Any]
    nodes: list[dict[str, Any]] = field(default_factory=list)
    docs: list[dict[str, Any]] = field(default_factory=list)
    rules: list[dict[str, Any]] = field(default_factory=list)


def _dicts(store: Store, stmt: sa.Executable, params: dict[str, Any]) -> list[dict[str, Any]]:
    keys, rows = store._execute(stmt, params)
    return [dict(zip(keys, row, strict=True)) for row in rows]


def load(store: Store, task_path: str) -> WorkspaceRows | None:
    """The workspace of `task_path`, or None if it was never initialised."""
    p = {"task_path": task_path}
    meta = _dicts(store, META, p)
    if not meta:
        return None
    return WorkspaceRows(
        meta=meta[0],
        nodes=_dicts(store, NODES, p),
        docs=_dicts(store, DOCS, p),
        rules=_dicts(store, RULES, p),
    )


def stamp(store: Store, task_path: str) -> str | None:
    """The workspace's stamp (None: never initialised): one indexed read, kept while
    nothing else wrote the workspace (`Store.memo_get`; the writes below put theirs)."""
    key = (_STAMP, task_path)
    held = store.memo_get(key)
    if held is not MISS:
        return held  # type: ignore[no-any-return]
    found = store._rows(STAMP, {"task_path": task_path})
    value = str(found[0][0]) if found else None
    store.memo_put(key, value)
    return value


def stamped(store: Store, task_path: str, stamp: str) -> None:
    """The stamp this transaction just wrote, or will write before it reads or commits
    (what `stamp` now reads; the write itself dropped the value read before)."""
    store.memo_put((_STAMP, task_path), stamp)


_STAMP = t.ws_meta.name  # its key in the store's memo: (table, task)


def restamp(store: Store, task_path: str, stamp: str) -> None:
    """Give the workspace a new stamp (every write of it does, in its transaction;
    `update_meta` does it too)."""
    store._write(RESTAMP, {"_task": task_path, "stamp": stamp})
    stamped(store, task_path, stamp)


def tasks(store: Store) -> list[str]:
    """Every task with a workspace."""
    return [r[0] for r in store._rows(TASKS)]


def rule_texts(store: Store, task_path: str) -> list[str]:
    return [r[0] for r in store._rows(RULE_TEXTS, {"task_path": task_path})]


def log(store: Store, task_path: str) -> list[dict[str, Any]]:
    return _dicts(store, LOG, {"task_path": task_path})


def node_log(store: Store, task_path: str, node_id: str | None) -> list[dict[str, Any]]:
    """One node's log rows (None: the workspace's own), by the (task, node, id) index."""
    if node_id is None:
        return _dicts(store, OWN_LOG, {"task_path": task_path})
    return _dicts(store, NODE_LOG, {"task_path": task_path, "node_id": node_id})


LogLine = tuple[str | None, float, str, str]  # (node_id, at, actor, text)


def log_lines(store: Store, task_path: str, node_id: str | None = "") -> list[LogLine]:
    """What the projections show of the log rows (no JSON decoded, no dict per row): the
    whole log by default, one node's with `node_id` (None: the workspace's own rows)."""
    if node_id == "":
        return store._rows(LOG_LINES, {"task_path": task_path})
    if node_id is None:
        return store._rows(OWN_LOG_LINES, {"task_path": task_path})
    return store._rows(NODE_LOG_LINES, {"task_path": task_path, "node_id": node_id})


def insert_meta(store: Store, row: dict[str, Any]) -> None:
    store._write(INSERT_META, row)
    stamped(store, row["task_path"], row["stamp"])


def update_meta(
    store: Store,
    task_path: str,
    *,
    focus: str,
    offered: list[Any],
    updated_at: float,
    stamp: str,
) -> None:
    store._write(
        UPDATE_META,
        {
            "_task": task_path,
            "focus": focus,
            "offered": offered,
            "updated_at": updated_at,
            "stamp": stamp,
        },
    )
    stamped(store, task_path, stamp)


def focus_meta(store: Store, task_path: str, *, focus: str, updated_at: float, stamp: str) -> None:
    """`update_meta` of a write whose docs found are as stored (no JSON of them bound)."""
    store._write(
        FOCUS_META, {"_task": task_path, "focus": focus, "updated_at": updated_at, "stamp": stamp}
    )
    stamped(store, task_path, stamp)


def touch_meta(store: Store, task_path: str, *, updated_at: float, stamp: str) -> None:
    """`update_meta` of a write whose focus and docs found are as stored."""
    store._write(TOUCH_META, {"_task": task_path, "updated_at": updated_at, "stamp": stamp})
    stamped(store, task_path, stamp)


def insert_node(store: Store, row: dict[str, Any]) -> None:
    store._write(INSERT_NODE, row)


def update_node(store: Store, task_path: str, node_id: str, expected: int, **row: Any) -> bool:
    """Write a node if it is still at version `expected`; False (nothing written) if not."""
    params = {"_task": task_path, "_node": node_id, "_expected": expected, **row}
    return store._write(UPDATE_NODE, params) == 1


def replace_docs(store: Store, task_path: str, docs: list[dict[str, Any]]) -> None:
    store._write(DELETE_DOCS, {"task_path": task_path})
    for seq, doc in enumerate(docs):
        store._write(INSERT_DOC, {"task_path": task_path, "seq": seq, **doc})


def insert_rule(store: Store, row: dict[str, Any]) -> int:
    return store._insert(INSERT_RULE, row)


def delete_rule(store: Store, rule_id: int) -> None:
    store._write(DELETE_RULE, {"_id": rule_id})


def insert_logs(store: Store, log_rows: list[dict[str, Any]]) -> list[int]:
    """Insert log rows in order (one statement where the dialect can); their ids."""
    return store._insert_many(INSERT_LOG, log_rows) if log_rows else []


def user_message_with(store: Store, dialog_id: str, quote: str) -> int | None:
    """The id of the latest user message of a dialog whose text contains `quote`
    (whitespace-insensitive), or None."""
    want = " ".join(quote.split()).casefold()
    if not want:
        return None
    for msg_id, data in store._rows(USER_MESSAGES, {"dialog_id": dialog_id}):
        text = " ".join(str((data or {}).get("text", "")).split()).casefold()
        if want in text:
            return int(msg_id)
    return None


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
