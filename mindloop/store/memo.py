"""What a write transaction read, kept till its end (`Store.tx_memo`).

A write transaction holds the write lock from its start (`BEGIN IMMEDIATE` on SQLite, the
advisory lock on PostgreSQL), so no other process changes a row it read until it ends:
a value read once may serve the transaction's later reads of it (the work loop's phase
change reads the root dialog, the workspace stamp, … several times in one transaction).
Only the transaction's own writes can change it, and every store write goes through the
store's write methods, which call `forget` with their statement: the values of the table
it writes are dropped (all of them for a statement naming no table). A key is a tuple
whose first item is the table the value was read from.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from mindloop.store import statements as q


class TxMemo(dict[tuple[Any, ...], Any]):
    """Values read in the open transaction, by (table name, …)."""

    def forget(self, stmt: sa.Executable) -> None:
        """`stmt` is about to write: drop what was read of its table."""
        table = _table_of(stmt)
        if table is None:
            self.clear()
            return
        for key in [k for k in self if k[0] == table]:
            del self[key]


_TABLES: dict[int, str | None] = {}


def _table_of(stmt: sa.Executable) -> str | None:
    """The table an insert, update or delete writes (None: not known)."""
    try:
        return _TABLES[id(stmt)]
    except KeyError:
        pass
    table = getattr(stmt, "table", None)
    name = table.name if isinstance(table, sa.Table) else None
    if id(stmt) in q.PREBUILT:  # a module constant: its id is never reused
        _TABLES[id(stmt)] = name
    return name
