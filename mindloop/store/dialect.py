"""What the store body needs from a database, and what every SQLAlchemy dialect shares.

The store body (`store.py`) is written against SQLAlchemy Core and this interface only;
what one database does its own way lives in a dialect module beside it (`sqlite.py`
today). The split follows DBOS Transact's system database (`dbos/_sys_db.py` with
`_sys_db_sqlite.py` and `_sys_db_postgres.py`): a neutral body, and per database only
connecting, settings, how a write transaction starts, and how errors read.

A PostgreSQL dialect implements the abstract methods below:

- `connect`: an engine on psycopg; a database that cannot be reached is one error line;
- `made_for_store`: an empty database (or schema) that was created for mindloop;
- `configure`: nothing to set;
- `begin`/`commit`/`rollback`: `BEGIN`, and for a lazy transaction `SET LOCAL synchronous_commit = off`
  (the promise SQLite's synchronous=NORMAL gives: a commit may be lost with the server's
  power, never half-applied); the store's conditional updates (claims) lock the row they
  change, so they are atomic without a table lock;
- `unusable`: psycopg's errors (read-only transaction, permission denied) as one line.

`read`, `write` and `insert` run a statement through SQLAlchemy; a dialect may run its
prebuilt statements some faster way (the SQLite dialect does).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from mindloop.store.errors import StoreError

# A read's result: column names and rows (tuples, or SQLAlchemy rows that index alike).
Rows = tuple[Sequence[str], list[Any]]


class StoreDialect(ABC):
    """One database under a `Store`: its connection, transactions and error texts."""

    name: str

    def __init__(self, location: str, *, durable: bool) -> None:
        self.location = location  # what error texts name: a file, or a URL without secrets
        self.durable = durable  # every commit is durable unless a transaction says otherwise
        # None when the store may write; else why not ("/p/.mindloop is read-only").
        self.read_only: str | None = None
        self.in_transaction = False
        self.engine: sa.Engine
        self.conn: sa.Connection

    # ------------------------------------------------------------------ per database

    @abstractmethod
    def connect(self) -> sa.Connection:
        """Open the one connection the store uses. A target that cannot be a store (a
        directory, a file mindloop did not create) is refused here, with nothing changed."""

    @abstractmethod
    def made_for_store(self) -> bool:
        """Whether a target without any table was created for a mindloop store (and not
        someone else's empty database): only then does the store create its schema."""

    @abstractmethod
    def configure(self) -> None:
        """Settings that may change the target. Run only once it is known to be a store."""

    @abstractmethod
    def begin(self, *, durable: bool) -> None:
        """Start a transaction that holds the write lock from its start (so a conditional
        update decides on what no one else can change meanwhile). `durable=False` may
        skip the flush to disk at its commit (see `Store.tx`)."""

    @abstractmethod
    def commit(self) -> None:
        """Commit the transaction `begin` started (on failure it is rolled back)."""

    @abstractmethod
    def rollback(self) -> None:
        """Roll back the transaction `begin` started."""

    @abstractmethod
    def unusable(self, exc: BaseException) -> StoreError | None:
        """The driver's error as one line naming the target, or None if it is no error
        of the database (a bug, to be raised as it is)."""

    # ------------------------------------------------------------------ shared

    def table_names(self) -> set[str]:
        names = set(sa.inspect(self.conn).get_table_names())
        self._end_read()
        return names

    def read(self, stmt: sa.Executable, params: Any) -> Rows:
        res = self.conn.execute(stmt, params)
        keys = list(res.keys())
        rows = list(res.all())
        self._end_read()
        return keys, rows

    def write(self, stmt: sa.Executable, params: Any) -> int:
        """Run a write inside the current transaction; the number of rows it changed."""
        return int(self.conn.execute(stmt, params).rowcount)

    def insert(self, stmt: sa.Executable, params: Any) -> Any:
        """Run a one-row insert inside the current transaction; the new row's key."""
        key = self.conn.execute(stmt, params).inserted_primary_key
        return None if key is None else key[0]

    def changes_by_others(self) -> int | None:
        """A number that moves whenever another connection (of this process or another)
        committed a change since it was last read, and stays while none did; None when
        the database offers none (then nothing read is kept past its transaction)."""
        return None

    def next_id(self, table: sa.Table) -> int | None:
        """A new key for a row of `table` from the database's sequence for it (no other
        insert gets it), drawn outside any transaction; None when the database has no
        sequences (SQLite: the store reserves keys itself, `Store.reserve_generation_id`)."""
        return None

    def insert_many(self, stmt: sa.Executable, rows: list[dict[str, Any]]) -> list[Any]:
        """Insert rows in order inside the current transaction (a dialect may do it in
        one statement); their new keys, in the same order."""
        return [self.insert(stmt, row) for row in rows]

    def close(self) -> None:
        self.conn.close()
        self.engine.dispose()

    def _end_read(self) -> None:
        """Outside a transaction a read holds no snapshot afterwards (other processes
        write to the same database)."""
        if not self.in_transaction and self.conn.in_transaction():
            self.conn.commit()
