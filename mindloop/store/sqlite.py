"""The store on SQLite: one file per rtws, WAL, a lazy or durable flush per transaction.

Everything here is what only SQLite needs: which file may be used (and how a new one is
made), the pragmas, `BEGIN IMMEDIATE`, synchronous=NORMAL for lazy commits, read-only
files, and running the prebuilt statements on the DBAPI connection (`sqlite_direct`).

Which files are used. mindloop makes a new state file complete before it appears: it is
written under a temporary name (page size set, stamped with mindloop's `application_id`)
and hard-linked into place, which fails if the name exists meanwhile (then the other
process's file is used). So `state.sqlite` is never an empty file that mindloop made, and
anything else found at that path is judged, never silently reused:

- a directory or another non-regular file: refused;
- a zero-length file: refused. mindloop never leaves one, so it is a truncated database or
  an interrupted copy (whatever was in it is already gone, and starting afresh in its place
  would hide that); deleting it is the user's call, and the message says so;
- a SQLite database without tables: used only if it carries mindloop's `application_id`
  (a new file whose schema was not written yet); someone else's empty database is refused;
- any other database is left to the store body, which accepts only mindloop's schema.

Until then nothing is written: the journal mode (WAL) is set only afterwards (`configure`),
because switching to WAL rewrites the file's header. Refusing leaves the file's bytes and
time stamps as they were.

Read-only. When the file or its directory cannot be written, the database is opened
read-only (`mode=ro`; with `immutable=1` when no `-wal`/`-shm` exists beside it, since
SQLite can then not create its shared-memory file — no other process writes the file at
that moment, or those files would exist). Reads work; the first write transaction fails
with one line naming what is read-only.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import time
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from mindloop.store import json_text
from mindloop.store import sqlite_direct as direct
from mindloop.store import statements as q
from mindloop.store.dialect import Rows, StoreDialect
from mindloop.store.errors import StoreError

# "mlop": marks a file mindloop created (`PRAGMA application_id`, header offset 68).
APPLICATION_ID = int.from_bytes(b"mlop", "big")
# New databases only: a step's durable commit then fsyncs ~1 KiB per page it touched
# instead of 4 KiB (a step touches a handful of table and index pages).
PAGE_SIZE = 1024
NOTHING_CHANGED = "nothing was changed"


# The DBAPI forms of the prebuilt statements (module constants: their ids are stable), by
# statement and parameter keys: compiled once per process, whichever store runs them
# (every SQLite store's dialect is configured alike).
_COMPILED: dict[tuple[int, tuple[str, ...]], direct.Compiled | None] = {}
# Multi-row forms of prebuilt one-row inserts, by (statement, keys, row count).
_MANY: dict[tuple[int, tuple[str, ...], int], str] = {}


class SqliteDialect(StoreDialect):
    name = "sqlite"

    def __init__(self, path: Path, *, durable: bool) -> None:
        super().__init__(str(path), durable=durable)
        self.path = path
        self.dbapi: Any = None
        # One cursor for every statement this module runs itself: each reads its result
        # in full before the next runs (a row left unread would keep a read snapshot),
        # and a cursor made per statement costs as much as a small statement's work.
        self._cur: Any = None
        self._configured = False
        self._lazy = False  # the open transaction commits without a flush of its own
        # The connection's `synchronous` level as last set (None: not known). It matters
        # only at a commit, so it is set when a transaction needs another one than the
        # last, never put back after it: a run of lazy transactions costs one PRAGMA.
        self._sync: str | None = None

    # ------------------------------------------------------------------ the file

    def connect(self) -> sa.Connection:
        self._check_or_create()
        self.read_only = self._why_read_only()
        target = self._uri()

        def _open() -> sqlite3.Connection:
            return sqlite3.connect(target, uri=True)

        self.engine = sa.create_engine(
            "sqlite://",
            creator=_open,
            poolclass=sa.pool.StaticPool,
            # the fast path's JSON text (`sqlite_direct`) for statements SQLAlchemy runs too
            json_serializer=json_text.dumps,
            json_deserializer=json_text.loads,
        )

        @sa.event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.execute("PRAGMA busy_timeout=10000")
            if self._configured:  # a reconnect gets the same settings
                self._settings(dbapi_conn)
            # We issue BEGIN ourselves (below); reads outside a transaction autocommit.
            dbapi_conn.isolation_level = None

        self.conn = self.engine.connect()
        self.dbapi = self.conn.connection.dbapi_connection
        self._cur = self.dbapi.cursor()
        return self.conn

    def _check_or_create(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._create()
            return
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        if stat.S_ISDIR(st.st_mode):
            raise StoreError(
                f"{self.path}: is a directory, not a mindloop state database; {NOTHING_CHANGED}"
            )
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(
                f"{self.path}: not a regular file, not a mindloop state database; {NOTHING_CHANGED}"
            )
        if st.st_size == 0:
            raise StoreError(
                f"{self.path}: an empty file that mindloop did not create (a truncated "
                f"database or an interrupted copy?); {NOTHING_CHANGED} — delete it to "
                f"start with no state"
            )

    def _create(self) -> None:
        """Make a new, empty database file, complete before it appears at `path`."""
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {parent}: {_not_writable(parent, exc)}") from exc
        tmp = parent / f".{self.path.name}.{uuid.uuid4().hex[:12]}.new"
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except OSError as exc:
            raise StoreError(f"cannot create {self.path}: {_not_writable(tmp, exc)}") from exc
        try:
            con = sqlite3.connect(tmp, isolation_level=None)
            try:  # writes page 1 and syncs it (rollback journal, synchronous=FULL)
                con.execute(f"PRAGMA page_size={PAGE_SIZE}")
                con.execute(f"PRAGMA application_id={APPLICATION_ID}")
            finally:
                con.close()
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass  # another process made it meanwhile: use that one
            except OSError:  # a file system without hard links
                if not self.path.exists():
                    os.rename(tmp, self.path)
            _fsync_dir(parent)
        finally:
            tmp.unlink(missing_ok=True)

    def _why_read_only(self) -> str | None:
        if not os.access(self.path.parent, os.W_OK):
            return f"{self.path.parent} is read-only"
        if not os.access(self.path, os.W_OK):
            return f"{self.path} is read-only"
        return None

    def _uri(self) -> str:
        # mode=rw, never rwc: the file was checked (or made) above and is not created here.
        uri = "file:" + urllib.parse.quote(self.path.as_posix())
        if self.read_only is None:
            return uri + "?mode=rw"
        beside = [Path(f"{self.path}{s}") for s in ("-wal", "-shm")]
        return uri + ("?mode=ro" if any(p.exists() for p in beside) else "?mode=ro&immutable=1")

    def made_for_store(self) -> bool:
        return bool(self.dbapi.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID)

    def configure(self) -> None:
        self._configured = True
        self._settings(self.dbapi)

    def _settings(self, dbapi_conn: Any) -> None:
        if self.read_only is not None:
            return
        sync = "FULL" if self.durable else "NORMAL"
        self._sync = None  # a new connection (a reconnect): set below
        # Switching to WAL needs the file to itself, and SQLite does not wait for that
        # (no busy handler): a process opening the file another one is just creating or
        # opening gets "database is locked" at once. It is a moment, not damage: retry.
        _retry_busy(lambda: dbapi_conn.execute("PRAGMA journal_mode=WAL"))
        dbapi_conn.execute(f"PRAGMA synchronous={sync}")
        self._sync = sync
        # A WAL that is checkpointed often wraps early: commits then overwrite blocks
        # the file already has, and an fsync need not also commit a file-size change
        # (measured: about half the cost per durable commit). Also bounds the WAL.
        dbapi_conn.execute("PRAGMA wal_autocheckpoint=256")

    # ------------------------------------------------------------------ transactions

    def begin(self, *, durable: bool) -> None:
        if self.read_only is not None:  # opened read-only: SQLite would fail at a write
            raise StoreError(f"cannot write {self.path}: {self.read_only}")
        self._lazy = self.durable and not durable
        if self.durable:  # the safety level cannot change inside a transaction
            want = "NORMAL" if self._lazy else "FULL"
            if self._sync != want:
                self._sync = None  # unknown until it is set
                self._cur.execute(f"PRAGMA synchronous={want}")
                self._sync = want
        # IMMEDIATE takes the write lock up front: no deadlock on lock upgrade when
        # another process writes concurrently, and a conditional update (a claim) decides
        # on rows no one else changes until the commit.
        try:
            self._cur.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            self._end()
            raise self.unusable(exc) or exc from exc
        self.in_transaction = True

    def commit(self) -> None:
        try:
            self.dbapi.commit()
            if self.conn.in_transaction():  # statements that went through SQLAlchemy
                self.conn.commit()
        except BaseException:
            self.rollback()
            raise
        self._end()

    def rollback(self) -> None:
        try:
            self.dbapi.rollback()
            if self.conn.in_transaction():
                self.conn.rollback()
        finally:
            self._end()

    def _end(self) -> None:
        self.in_transaction = False
        self._lazy = False  # the level stays as set: the next `begin` sets what it needs

    def unusable(self, exc: BaseException) -> StoreError | None:
        orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
        if not isinstance(orig, sqlite3.Error):
            return None
        if str(getattr(orig, "sqlite_errorname", "")).startswith("SQLITE_READONLY"):
            why = self.read_only or self._why_read_only() or f"the database is read-only ({orig})"
            return StoreError(f"cannot write {self.path}: {why}")
        if _is_busy(orig):
            return StoreError(
                f"{self.path}: the state database stayed locked by another process ({orig}); "
                "try again"
            )
        return StoreError(f"{self.path}: not a usable mindloop state database ({orig})")

    def changes_by_others(self) -> int | None:
        # SQLite's own counter: unchanged by this connection's commits, moved by any
        # other's (one cheap statement: no table is read).
        return self._cur.execute("PRAGMA data_version").fetchone()[0]  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ fast path

    def read(self, stmt: sa.Executable, params: Any) -> Rows:
        comp = self._direct(stmt, params)
        if comp is None:
            return super().read(stmt, params)
        cur = self._run(comp, params)
        keys = comp.keys or [d[0] for d in cur.description]
        return keys, comp.rows(cur.fetchall())

    def write(self, stmt: sa.Executable, params: Any) -> int:
        comp = self._direct(stmt, params)
        if comp is None:
            return super().write(stmt, params)
        return int(self._run(comp, params).rowcount)

    def insert(self, stmt: sa.Executable, params: Any) -> Any:
        comp = self._direct(stmt, params)
        if comp is None:
            return super().insert(stmt, params)
        return self._run(comp, params).lastrowid

    def insert_many(self, stmt: sa.Executable, rows: list[dict[str, Any]]) -> list[Any]:
        """One `INSERT … VALUES (…), (…)` for the rows (a step's messages: one statement
        instead of one per row). Their keys: a table whose key is its rowid numbers new
        rows upwards, each the largest rowid + 1 (SQLite picks at random only once a row
        holds the largest possible rowid, which the store never writes: its inserts
        leave the key to SQLite), so the rows of one statement are numbered
        consecutively up to the last one's (a RETURNING clause costs more)."""
        if len(rows) == 1:
            return [self.insert(stmt, rows[0])]
        keys = tuple(rows[0]) if rows else ()
        comp = self._direct(stmt, rows[0]) if rows else None
        if comp is None or not _rowid_key(stmt) or any(tuple(r) != keys for r in rows):
            return super().insert_many(stmt, rows)
        many = (id(stmt), keys, len(rows))
        sql = _MANY.get(many)
        if sql is None:
            head, sep, group = comp.sql.partition(" VALUES ")
            if not sep or not group.startswith("(") or not group.endswith(")"):
                return super().insert_many(stmt, rows)
            sql = _MANY[many] = f"{head} VALUES {', '.join([group] * len(rows))}"
        values = [v for row in rows for v in comp.params(row)]
        try:
            last = int(self._cur.execute(sql, values).lastrowid)
        except sqlite3.Error as exc:
            raise sa.exc.DBAPIError.instance(sql, values, exc, sqlite3.Error) from exc
        return list(range(last - len(rows) + 1, last + 1))

    def _run(self, comp: direct.Compiled, params: Any) -> sqlite3.Cursor:
        """Execute on the DBAPI connection; its errors raised as SQLAlchemy's (an
        `IntegrityError` is the same exception on either path). The cursor is the one
        cursor (`_cur`): its caller reads the result at once."""
        values = comp.params(params)
        try:
            return self._cur.execute(comp.sql, values)  # type: ignore[no-any-return]
        except sqlite3.Error as exc:
            raise sa.exc.DBAPIError.instance(comp.sql, values, exc, sqlite3.Error) from exc

    def _direct(self, stmt: sa.Executable, params: Any) -> direct.Compiled | None:
        """The DBAPI form of a prebuilt statement for these parameter keys, if it has one
        (statements built per call have none: their ids are reused by others)."""
        if isinstance(params, list):  # several parameter sets
            return None
        key = (id(stmt), tuple(params) if params else ())
        try:
            return _COMPILED[key]
        except KeyError:
            if id(stmt) not in q.PREBUILT:
                return None
            found = _COMPILED[key] = direct.compile_for(stmt, self.engine.dialect, key[1])
            return found


def _rowid_key(stmt: sa.Executable) -> bool:
    """Whether an insert's table's key is its rowid (one integer primary key)."""
    try:
        return _ROWID[id(stmt)]
    except KeyError:
        pass
    table = getattr(stmt, "table", None)
    pk = list(table.primary_key.columns) if isinstance(table, sa.Table) else []
    found = len(pk) == 1 and isinstance(pk[0].type, sa.Integer)
    if id(stmt) in q.PREBUILT:  # a module constant: its id is never reused
        _ROWID[id(stmt)] = found
    return found


_ROWID: dict[int, bool] = {}


def _not_writable(path: Path, exc: OSError) -> str:
    """Why `path` could not be created: for a permission error, which directory is
    read-only (the nearest one above it that exists)."""
    if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
        return str(exc.strerror or exc)
    above = next((p for p in path.parents if p.exists()), path.parent)
    return f"{above} is read-only ({exc.strerror})"


def _fsync_dir(path: Path) -> None:
    """Make a new name in `path` survive a power failure (where the system allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


BUSY_WAIT = 10.0  # seconds, like the connection's busy_timeout


def _is_busy(exc: BaseException) -> bool:
    name = str(getattr(exc, "sqlite_errorname", ""))
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc)


def _retry_busy(op: Callable[[], object], wait: float = BUSY_WAIT) -> None:
    """Run `op`, retrying while the database is busy (up to `wait` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            op()
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
