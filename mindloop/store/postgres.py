"""The store on PostgreSQL (psycopg 3): the dialect for many processes on many machines.

Selected by `MINDLOOP_DATABASE_URL` (`postgresql://user@host/db`; see `location.py`).
The schema and migrations are the store body's (`schema.py`), compiled by SQLAlchemy for
PostgreSQL; nothing here names a table.

Transactions keep SQLite's guarantees. The store body relies on one rule SQLite gives by
`BEGIN IMMEDIATE`: a write transaction holds the write lock from its start, so what it
reads cannot change until it commits. Its conditional updates (a claim taken, a wait
resolved, a question closed) would be atomic under PostgreSQL's row locks alone, but
several operations read and then write on what they read — a reply delivered and its
pending record removed (`tree.py`), recovery marking dialogs whose claims expired, a post
to a running dialog, deleting a tree nobody drives, a migration. Under READ COMMITTED
another process could commit between the read and the write. So every write transaction
takes one transaction-scoped advisory lock first (`pg_advisory_xact_lock`, keyed by the
schema, so stores in other schemas of the same database do not wait on each other): one
writer at a time, as on SQLite, and the lock goes with the commit or rollback — a crashed
client's session ends and releases it. Write transactions are short (no model call or tool
runs inside one); reads take no lock and see the last committed state.

Connection: one psycopg connection in autocommit mode; a transaction is `BEGIN` sent with
its settings and the lock in one round trip, a read outside it is one round trip.
Durability: a lazy transaction (`tx(durable=False)`) sets `synchronous_commit = off` for
itself — the promise SQLite's synchronous=NORMAL gives: a commit may be lost with the
server's power, never half-applied, and never reordered before an earlier one.

An empty schema is taken as made for mindloop (its URL was named for it); one holding
other tables and no `schema_version` is refused by the store body, with nothing changed.
"""

from __future__ import annotations

import contextlib
from typing import Any

import sqlalchemy as sa

from mindloop.store.dialect import StoreDialect
from mindloop.store.errors import StoreError

# The advisory lock of this schema's write transactions (a 64-bit key derived from it).
_BEGIN = (
    "BEGIN; {settings}SELECT pg_advisory_xact_lock("
    "hashtextextended('mindloop.store:' || current_schema(), 0))"
)


def engine_url(url: str) -> sa.URL:
    """The SQLAlchemy URL for `url` with the psycopg 3 driver (`postgresql://…` and
    `postgres://…` as libpq spells them, or already `postgresql+psycopg://…`)."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise StoreError(f"not a database URL: {redact(url)} ({exc})") from None
    if parsed.get_backend_name() != "postgresql":
        raise StoreError(f"{redact(url)}: only postgresql:// database URLs are supported")
    return parsed.set(drivername="postgresql+psycopg")


def redact(url: str) -> str:
    """The URL as error texts and listings show it: never a password."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<unparsable database URL>"


class PostgresDialect(StoreDialect):
    name = "postgresql"

    def __init__(self, url: str, *, durable: bool = True) -> None:
        super().__init__(redact(url), durable=durable)
        self.url = engine_url(url)
        self.dbapi: Any = None

    def connect(self) -> sa.Connection:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise StoreError(
                f"{self.location}: the PostgreSQL store needs psycopg 3: "
                "pip install 'mindloop[postgres]'"
            ) from None
        try:
            self.engine = sa.create_engine(
                self.url,
                isolation_level="AUTOCOMMIT",  # BEGIN/COMMIT are ours (`begin`, `commit`)
                poolclass=sa.pool.StaticPool,
                connect_args={"connect_timeout": 10, "application_name": "mindloop"},
            )
            self.conn = self.engine.connect()
        except sa.exc.OperationalError as exc:
            raise StoreError(
                f"{self.location}: cannot connect to the state database ({_first_line(exc)})"
            ) from None
        self.dbapi = self.conn.connection.dbapi_connection
        return self.conn

    def made_for_store(self) -> bool:
        return True

    def configure(self) -> None:
        pass

    def begin(self, *, durable: bool) -> None:
        lazy = self.durable and not durable
        settings = "SET LOCAL synchronous_commit = off; " if lazy or not self.durable else ""
        try:
            self.dbapi.execute(_BEGIN.format(settings=settings))
        except Exception as exc:
            self._reset()
            raise self.unusable(exc) or exc from exc
        self.in_transaction = True

    def commit(self) -> None:
        try:
            self.dbapi.execute("COMMIT")
        except BaseException:
            self.rollback()
            raise
        self.in_transaction = False

    def rollback(self) -> None:
        try:
            self._reset()
        finally:
            self.in_transaction = False

    def _reset(self) -> None:
        """End whatever transaction the connection is in (none after a lost connection)."""
        import psycopg

        if self.dbapi.closed:
            return
        with contextlib.suppress(psycopg.Error):
            self.dbapi.execute("ROLLBACK")

    def unusable(self, exc: BaseException) -> StoreError | None:
        import psycopg

        orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
        if not isinstance(orig, psycopg.Error):
            return None
        state = getattr(orig, "sqlstate", None) or ""
        if state == "25006":  # read_only_sql_transaction
            return StoreError(f"cannot write {self.location}: the database is read-only")
        if state == "42501":  # insufficient_privilege
            return StoreError(
                f"cannot use {self.location}: permission denied ({_first_line(orig)})"
            )
        if isinstance(orig, psycopg.OperationalError):
            return StoreError(
                f"{self.location}: the state database is unreachable ({_first_line(orig)})"
            )
        return StoreError(
            f"{self.location}: not a usable mindloop state database ({_first_line(orig)})"
        )

    def next_id(self, table: sa.Table) -> int | None:
        [key] = table.primary_key.columns  # a serial column: its sequence, not the table's
        seq = sa.func.pg_get_serial_sequence(table.name, key.name)
        return int(self.conn.execute(sa.select(sa.func.nextval(seq))).scalar_one())

    def _end_read(self) -> None:
        """Autocommit: a read outside a transaction holds nothing afterwards."""


def _first_line(exc: BaseException) -> str:
    orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    text = str(orig).strip()
    return text.splitlines()[0] if text else type(orig).__name__
