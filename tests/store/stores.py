"""The stores every store test runs against — one conformance suite for every dialect
(LangGraph's checkpoint-conformance pattern): SQLite with its DBAPI fast path (what
mindloop uses by default), SQLite with every statement through SQLAlchemy Core (the path
the neutral body takes on a database without a fast path of its own), and PostgreSQL
(a real server on 127.0.0.1, `tests/pg.py`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from mindloop.store import Store
from mindloop.store.postgres import PostgresDialect
from mindloop.store.sqlite import SqliteDialect
from mindloop.store.sqlite_direct import Compiled
from tests import pg

KINDS = ["sqlite", "sqlite-core", "postgresql"]

# The database of each store location a test opened (a test reopens its store by path).
_urls: dict[Path, str] = {}


class CoreOnlySqlite(SqliteDialect):
    """SQLite without the fast path: reads, writes and inserts through SQLAlchemy."""

    def _direct(self, stmt: sa.Executable, params: Any) -> Compiled | None:
        return None


def url_for(path: Path) -> str:
    """The PostgreSQL schema standing for the store at `path` (new on first use)."""
    if path not in _urls:
        _urls[path] = pg.server().schema_url()
    return _urls[path]


def open_store(path: Path, kind: str, *, durable: bool = True) -> Store:
    if kind == "sqlite":
        return Store(path, durable=durable, dialect=SqliteDialect(path, durable=durable))
    if kind == "postgresql":
        return Store(path, dialect=PostgresDialect(url_for(path), durable=durable))
    return Store(path, dialect=CoreOnlySqlite(path, durable=durable))


def downgrade(store: Store, *sql: str) -> None:
    """Rewrite the store's database as an older mindloop left it (plain SQL both
    dialects run), then close it."""
    with store.tx() as conn:
        for stmt in sql:
            conn.execute(sa.text(stmt))
    store.close()


def statements_run(store: Store, fn: Callable[[], object]) -> list[str]:
    """The statements `fn()` ran on a SQLite store's connection."""
    seen: list[str] = []
    con = store.dialect.dbapi  # type: ignore[attr-defined]
    con.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        con.set_trace_callback(None)
    return seen
