"""The stores every store test runs against: SQLite with its DBAPI fast path (what
mindloop uses), and SQLite with every statement through SQLAlchemy Core — the path the
neutral body takes on a database without a fast path of its own (PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa

from mindloop.store import Store
from mindloop.store.sqlite import SqliteDialect
from mindloop.store.sqlite_direct import Compiled

KINDS = ["sqlite", "sqlite-core"]


class CoreOnlySqlite(SqliteDialect):
    """SQLite without the fast path: reads, writes and inserts through SQLAlchemy."""

    def _direct(self, stmt: sa.Executable, params: Any) -> Compiled | None:
        return None


def open_store(path: Path, kind: str, *, durable: bool = True) -> Store:
    if kind == "sqlite":
        return Store(path, durable=durable)
    return Store(path, dialect=CoreOnlySqlite(path, durable=durable))
