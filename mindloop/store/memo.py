"""Rows a store read or wrote, kept while nothing can have changed them (`Store.memo_get`).

The work loop reads the same few rows over and over (its task row, its root dialog, the
workspace stamp, the root's open waits and questions): several times in one transaction,
and again in the next one although only this process wrote them since. A value is kept
here, keyed by a tuple whose first item is the table it came from (a tuple of them for a
value read from several), and handed out again while it provably still is what the
database holds:

- this store's own writes: every write goes through the store's write methods, which
  call `forget` with their statement first — the values of the table it writes are
  dropped (all of them for a statement naming no table); a writer that knows the row it
  wrote (an update's RETURNING, the stamp it set) puts it back;
- other connections' commits (other processes, other stores of this one): the dialect's
  `changes_by_others` counter (SQLite's `PRAGMA data_version`, one statement without a
  table read) is read before a kept value is used, and everything is dropped when it
  moved. Inside a transaction it is read once: the transaction holds the write lock from
  its start, so nobody else commits until it ends (and at its commit the values are
  still current). Outside one it is read once per event-loop turn: until the running
  task lets others run, this process can learn of another's commit only through a read
  of the database, so the check stands until any store of the process reads a table
  outside a transaction, begins or commits a transaction (`observed`), or the loop turns
  (a callback queued at the check clears it before anything woken by new input runs).
  Without a running event loop every use outside a transaction checks;
- a rollback drops everything (what the transaction read or wrote may be gone).

At most `KEPT` values are kept; past that the one put longest ago goes.

A database without such a counter (PostgreSQL) keeps values only inside the transaction
that read them. Values are shared: a caller that may change what it got copies it.
"""

from __future__ import annotations

from asyncio import AbstractEventLoop
from asyncio.events import _get_running_loop
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from mindloop.store import statements as q

MISS = object()  # `Memo.get`: nothing usable is kept
# Values kept at most: a process that drives many dialogs (a `run --watch` fed for days)
# keeps the latest, not a row of each (the loop's hot rows are put again all the time).
KEPT = 2048


_epoch = 0  # moved by `observed`: a check made before it no longer stands for the turn


def observed() -> None:
    """This process may just have seen another connection's commit (a read outside a
    transaction, the start or end of one), or made one other stores must see: no memo
    serves a value on a check made before, outside a transaction (see the module doc)."""
    global _epoch
    _epoch += 1


class Memo:
    """One store's kept values (see the module doc). `counter` reads the dialect's
    `changes_by_others`."""

    __slots__ = (
        "_checked",
        "_counter",
        "_fresh",
        "_seen",
        "_tables",
        "_turn_loop",
        "_tx",
        "_values",
        "_versioned",
    )

    def __init__(self, counter: Callable[[], int | None]) -> None:
        self._counter = counter
        # key -> (the transaction that read or wrote it, 0: none; the value)
        self._values: dict[tuple[Any, ...], tuple[int, Any]] = {}
        self._tables: dict[str, set[tuple[Any, ...]]] = {}  # the keys of each table
        self._tx = 0  # the open (or last) transaction's number
        self._versioned: bool | None = None  # the database has a counter (first `began`)
        self._seen: int | None = None  # the counter when the values were last checked
        self._checked = False  # checked in the open transaction
        # Checked outside a transaction in this event-loop turn: `_epoch` then (-1: not),
        # and the loop whose queued callback (`_expire`) ends the turn (None: none queued).
        self._fresh = -1
        self._turn_loop: AbstractEventLoop | None = None

    def get(self, key: tuple[Any, ...], in_tx: bool) -> Any:
        """The value kept for `key`, or `MISS`."""
        held = self._values.get(key)
        if held is None:
            return MISS
        if in_tx:
            if self._checked or held[0] == self._tx:  # read under this lock
                return held[1]
        elif self._fresh == _epoch and _get_running_loop() is self._turn_loop:
            return held[1]  # checked in this turn, nothing seen since
        if not self._versioned:  # kept only within the transaction that read it
            return MISS
        seen = self._counter()
        if in_tx:
            self._checked = True
        else:
            self._turn()
        if seen != self._seen:
            self._clear()
            self._seen = seen
            return MISS
        return held[1]

    def _turn(self) -> None:
        """The values were found current: so they stay for the rest of this turn."""
        loop = _get_running_loop()
        if loop is None:
            return
        self._fresh = _epoch
        if self._turn_loop is not loop:
            loop.call_soon(self._expire)
            self._turn_loop = loop

    def _expire(self) -> None:
        self._fresh = -1
        self._turn_loop = None

    def peek(self, key: tuple[Any, ...]) -> Any:
        """The value kept for `key` without checking that it is still current (`MISS` if
        none): for a hint that a caller can use whatever happened since."""
        held = self._values.get(key)
        return MISS if held is None else held[1]

    def put(self, key: tuple[Any, ...], value: Any, in_tx: bool) -> None:
        if in_tx:
            held = (self._tx, value)
        elif self._versioned:
            held = (0, value)
        else:
            return
        values = self._values
        if values.pop(key, None) is None and len(values) >= KEPT:
            self._evict(next(iter(values)))  # the value put longest ago
        values[key] = held  # last in order: put again, a value stays
        first = key[0]
        tables = self._tables
        if isinstance(first, tuple):  # a value read from several tables
            for table in first:
                tables.setdefault(table, set()).add(key)
        else:
            keys = tables.get(first)
            if keys is None:
                tables[first] = {key}
            else:
                keys.add(key)

    def forget(self, stmt: sa.Executable) -> None:
        """`stmt` is about to write: drop what is kept of its table."""
        if not self._values:
            return
        at = id(stmt)
        table = _TABLES[at] if at in _TABLES else _table_of(stmt)
        if table is None:
            self._clear()
            return
        keys = self._tables.pop(table, None)
        if keys:
            values = self._values
            for key in keys:
                values.pop(key, None)

    def _evict(self, key: tuple[Any, ...]) -> None:
        del self._values[key]
        first = key[0]
        for table in first if isinstance(first, tuple) else (first,):
            keys = self._tables.get(table)
            if keys is not None:
                keys.discard(key)

    def _clear(self) -> None:
        self._values.clear()
        self._tables.clear()

    def began(self) -> None:
        """A transaction started (it holds the write lock; waiting for it may have let
        another process commit, which its reads then see)."""
        observed()
        self._tx += 1
        if self._versioned is None:  # the first one: what was kept before is unknown
            self._seen = self._counter()
            self._versioned = self._seen is not None
            self._clear()
            self._checked = True
            return
        self._checked = False
        if not self._versioned:  # nothing outlives a transaction here
            self._clear()

    def ended(self, *, rolled_back: bool) -> None:
        observed()  # other stores of this process check again: this one may have committed
        if rolled_back or not self._versioned:
            self._clear()
        elif self._checked:  # current when the lock was let go: so for the rest of the turn
            self._turn()
        self._checked = False


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
