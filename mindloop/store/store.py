"""The transactional store: the only module that writes SQL, written against SQLAlchemy Core.

One database per rtws (`.mindloop/state.sqlite` by default). What differs between
databases (which file may be used, settings, how a write transaction starts, the fast
path) is the dialect's (`dialect.py`, `sqlite.py`); nothing below is specific to one.
Every public method is a transaction of its own unless it runs inside `with store.tx():`,
in which case it joins the outer transaction — that is how changes that belong together
(a reply recorded, its pending record removed, the caller marked to drive) commit
atomically.

The engine appends; it never re-reads whole dialogs per step. `load_history` is for
(re)starting a drive, not for every generation.
"""

from __future__ import annotations

import copy
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel

from mindloop.errors import NotFoundError
from mindloop.store import crash_points, tails
from mindloop.store import schema as t
from mindloop.store import statements as q
from mindloop.store.bulk import gc_paused
from mindloop.store.dialect import Rows, StoreDialect
from mindloop.store.errors import StoreError
from mindloop.store.location import database_url, env_dialect
from mindloop.store.memo import MISS, Memo, observed
from mindloop.store.records import (
    DialogRecord,
    GenerationRecord,
    MessageKind,
    MessageRecord,
    PendingTellask,
    QuestionRecord,
    Reminder,
    ResponseRecord,
    TaskdocChange,
    UsageTotals,
    WaitRecord,
    WaitStatus,
)
from mindloop.store.router_log import RouterLog
from mindloop.store.sqlite import SqliteDialect
from mindloop.store.tasks import TaskRows

log = logging.getLogger(__name__)

# Rows per multi-row insert (SQLite allows 32,766 bound values a statement).
INSERT_BATCH = 500
STATE_DIR = ".mindloop"
STATE_FILE = "state.sqlite"

__all__ = ["STATE_DIR", "STATE_FILE", "IdTaken", "Store", "StoreError", "StoreStats", "new_id"]


class IdTaken(StoreError):
    """The id reserved for a row (`Store.reserve_generation_id`) was taken by another
    process's write before the row was written; nothing was written under it."""


def new_id(prefix: str = "") -> str:
    """A short random id (12 hex chars), optionally prefixed (`q4h-…`)."""
    return prefix + uuid.uuid4().hex[:12]


_R = TypeVar("_R", bound=BaseModel)
_F = TypeVar("_F", bound=Callable[[], None])


@dataclass
class StoreStats:
    """What this store did, for benchmarks and diagnostics: commits that changed rows
    (durable ones flush to disk — one fsync of the WAL on SQLite; lazy ones ride on the
    next durable one) and statements run."""

    durable_commits: int = 0
    lazy_commits: int = 0
    statements: int = 0

    def count_commit(self, *, durable: bool) -> None:
        if durable:
            self.durable_commits += 1
        else:
            self.lazy_commits += 1


class Store(TaskRows, RouterLog):
    """Durable runtime state. `durable=True` flushes every commit to disk unless a
    transaction asks otherwise (`tx(durable=False)`); `durable=False` never waits for it."""

    def __init__(
        self, path: Path | str, *, durable: bool = True, dialect: StoreDialect | None = None
    ) -> None:
        """The store in the SQLite file `path`, or on `dialect`'s database if given (then
        `path` only names it and `durable` is the dialect's)."""
        self.path = Path(path)
        self._dialect: StoreDialect = dialect or SqliteDialect(self.path, durable=durable)
        self.durable = self._dialect.durable
        self.stats = StoreStats()
        self._depth = 0  # the open `tx()` blocks
        self._durable_tx = True  # the open transaction's `durable`
        self._txs = (_Transaction(self, False), _Transaction(self, True))  # `tx()`
        self._changed = False  # the current transaction changed rows
        self._after: dict[str, Callable[[], None]] = {}  # run once the transaction commits
        self._deferred: dict[str, Callable[[], None]] = {}  # writes held back (`deferred`)
        self._memo = Memo(self._changes_by_others)  # `memo_get`
        # the largest generation id this store reserved (`reserve_generation_id`; SQLite)
        self._generation_handed = 0
        # messages to append ahead of the next ones the transaction appends, and the list
        # their stored records go to (`hold_messages`)
        self._held: tuple[list[MessageRecord], list[MessageRecord]] | None = None
        opened = False
        try:
            self._conn = self._dialect.connect()
            opened = True
            current = self._check_schema()  # reads only: a refusal changes nothing
            self._dialect.configure()
            if current != t.SCHEMA_VERSION:
                if self._dialect.read_only is not None:
                    raise StoreError(
                        f"{self._dialect.location}: schema v{current} needs an upgrade to "
                        f"v{t.SCHEMA_VERSION}, but {self._dialect.read_only}"
                    )
                self._migrate()  # a failure here is rolled back: nothing written
        except Exception as exc:
            if opened:
                self._dialect.close()
            if isinstance(exc, StoreError):
                raise
            err = self._dialect.unusable(exc)
            if err is None:
                raise
            raise err from exc

    @classmethod
    def for_rtws(cls, rtws: Path, *, durable: bool = True) -> Store:
        """The rtws's store: its SQLite file, or the database `MINDLOOP_DATABASE_URL` names."""
        dialect = env_dialect(durable=durable)
        return cls(Path(rtws) / STATE_DIR / STATE_FILE, durable=durable, dialect=dialect)

    @staticmethod
    def exists_for(rtws: Path) -> bool:
        """Whether the rtws has runtime state to open (a database URL always has)."""
        return database_url() is not None or (Path(rtws) / STATE_DIR / STATE_FILE).exists()

    @property
    def dialect(self) -> StoreDialect:
        """The database under this store (its name, location, whether it is read-only)."""
        return self._dialect

    def close(self) -> None:
        self._dialect.close()

    # ------------------------------------------------------------------ transactions

    def tx(self, *, durable: bool = True) -> _Transaction:
        """Run the block in one transaction; nested blocks join the outermost one.

        The transaction holds the write lock from its start (`BEGIN IMMEDIATE` on
        SQLite), so a conditional update in it decides on rows nobody else changes.

        `durable=False` commits without a flush of its own (SQLite: WAL with
        synchronous=NORMAL): the commit survives a killed process at once, and a power
        failure from the next durable commit on, because the WAL is replayed as an ordered
        prefix. Use it only for writes whose loss would leave an earlier state that
        recovery treats alike."""
        return self._txs[durable]

    def _begin(self, durable: bool) -> None:
        self._dialect.begin(durable=durable)
        self._durable_tx = durable
        self._depth = 1
        self._changed = False
        self._memo.began()

    def memo_get(self, key: tuple[Any, ...]) -> Any:
        """A row kept for `key` ((table, …)) while nothing can have changed it
        (`memo.py`), or `MISS`. Shared: copy what you may change."""
        if self._held is not None and _names_messages(key[0]):
            self._flush_held()
        return self._memo.get(key, self._depth > 0)

    def memo_put(self, key: tuple[Any, ...], value: Any) -> None:
        """Keep a row just read, or just written (after the write)."""
        self._memo.put(key, value, self._depth > 0)

    def _changes_by_others(self) -> int | None:
        self.stats.statements += 1
        return self._dialect.changes_by_others()

    def _finish(self, durable: bool, failed: bool) -> None:
        """End the outermost transaction: roll back after an exception, else commit."""
        if self._held is not None or self._deferred:  # written, or dropped with the rest
            if failed:
                self._held = None
                self._deferred = {}
            else:
                try:
                    self._flush_held()
                    self._flush_deferred()
                except BaseException:
                    self._finish(durable, failed=True)
                    raise
        self._depth = 0
        if failed:
            self._memo.ended(rolled_back=True)
            self._after.clear()
            self._dialect.rollback()
            return
        after = self._after
        if after:  # taken before the commit: a failed commit runs none of them
            self._after = {}
        if crash_points.CRASH is not None and self._changed:  # tests only
            crash_points.CRASH.reached("commit.before")
        try:
            self._dialect.commit()
        except BaseException:  # the dialect rolled it back
            self._memo.ended(rolled_back=True)
            raise
        self._memo.ended(rolled_back=False)
        if crash_points.CRASH is not None and self._changed:
            crash_points.CRASH.reached("commit.after")
        if self._changed:
            self.stats.count_commit(durable=self.durable and durable)
        if after:
            self._run_after(after)

    def deferred(self, key: str, make: Callable[[], _F]) -> _F:
        """Inside a transaction: the writes held back under `key` to coalesce them (made
        by `make()` the first time: a callable that writes them), run before anything
        reads and at the commit, never if the transaction rolls back. For rows only their
        writer writes, rewritten several times in one transaction."""
        found = self._deferred.get(key)
        if found is None:
            found = self._deferred[key] = make()
        return found  # type: ignore[return-value]

    def _flush_deferred(self) -> None:
        while self._deferred:
            key = next(iter(self._deferred))
            self._deferred.pop(key)()

    def after_commit(self, key: str, fn: Callable[[], None]) -> None:
        """Run `fn` once the current transaction has committed, never if it rolls back;
        one run per `key` per transaction (outside one: at once). For what is derived from
        committed rows, such as the workspace's files; a failure is logged, the commit
        stands."""
        if self._depth:
            self._after[key] = fn
        else:
            self._run_after({key: fn})

    @staticmethod
    def _run_after(callbacks: dict[str, Callable[[], None]]) -> None:
        for fn in callbacks.values():
            try:
                fn()
            except Exception:
                log.exception("after-commit step failed (the commit stands)")

    def _execute(self, stmt: sa.Executable, params: Any) -> Rows:
        """Run a read: (column names, rows)."""
        if self._held is not None:  # what it reads may be them
            self._flush_held()
        if self._deferred:
            self._flush_deferred()
        self.stats.statements += 1
        if self._depth:
            return self._dialect.read(stmt, params)
        found = self._dialect.read(stmt, params)
        observed()  # it may have seen another's commit that the kept values do not show
        return found

    def _rows(self, stmt: sa.Executable, params: dict[str, Any] | None = None) -> list[Any]:
        """Run a read. Outside a `tx()` block nothing holds a snapshot afterwards (other
        processes write to the same database)."""
        return self._execute(stmt, params)[1]

    def _records(
        self, model: type[_R], stmt: sa.Executable, params: dict[str, Any] | None = None
    ) -> list[_R]:
        """Run a read and build one record per row (a plain dict per row validates faster
        than `model_construct` or a row mapping: loading a long history is on the path of
        every drive start)."""
        keys, rows = self._execute(stmt, params)
        validate = _validator(model)
        return [validate(dict(zip(keys, row, strict=True))) for row in rows]

    def _kept_records(
        self,
        key: tuple[Any, ...],
        model: type[_R],
        stmt: sa.Executable,
        params: dict[str, Any],
    ) -> list[_R]:
        """`_records`, kept under `key` (`memo_get`; each caller gets copies of its own)."""
        held = self.memo_get(key)
        if held is MISS:
            held = self._records(model, stmt, params)
            self.memo_put(key, held)
        return [r.model_copy(deep=True) for r in held]

    def _write_returning(
        self, model: type[_R], stmt: sa.Executable, params: dict[str, Any]
    ) -> list[_R]:
        """Run a write with a RETURNING clause inside the current transaction: the rows it
        changed, as they now stand (saves reading them again)."""
        if self._held is not None:
            self._flush_held()
        if self._deferred:
            self._flush_deferred()
        self.stats.statements += 1
        self._memo.forget(stmt)
        keys, rows = self._dialect.read(stmt, params)
        if rows:
            self._changed = True
        validate = _validator(model)
        return [validate(dict(zip(keys, row, strict=True))) for row in rows]

    def _write(self, stmt: sa.Executable, params: Any = None) -> int:
        """Run one write, joining the current transaction or committing by itself.
        Returns the number of rows it changed."""
        if not self._depth:
            with self.tx():
                return self._write(stmt, params)
        if self._held is not None and _names_messages(stmt):
            self._flush_held()
        self.stats.statements += 1
        self._memo.forget(stmt)
        changed = self._dialect.write(stmt, params)
        if changed:
            self._changed = True
        return changed

    def _insert(self, stmt: sa.Executable, params: dict[str, Any]) -> int:
        """Insert one row (joining the current transaction or committing by itself) and
        return its generated id."""
        if not self._depth:
            with self.tx():
                return self._insert(stmt, params)
        if self._held is not None and _names_messages(stmt):
            self._flush_held()
        self.stats.statements += 1
        self._changed = True
        self._memo.forget(stmt)
        return int(self._dialect.insert(stmt, params))

    def _insert_many(self, stmt: sa.Executable, rows: list[dict[str, Any]]) -> list[int]:
        """Insert rows in order (joining the current transaction or committing by
        itself), in as few statements as the dialect can; their generated ids."""
        if not self._depth:
            with self.tx():
                return self._insert_many(stmt, rows)
        if self._held is not None and _names_messages(stmt):
            self._flush_held()
        ids: list[int] = []
        self._memo.forget(stmt)
        for start in range(0, len(rows), INSERT_BATCH):
            self.stats.statements += 1
            self._changed = True
            ids += [
                int(k) for k in self._dialect.insert_many(stmt, rows[start : start + INSERT_BATCH])
            ]
        return ids

    def _scalar(self, stmt: sa.Executable, params: dict[str, Any] | None = None) -> Any:
        rows = self._rows(stmt, params)
        return rows[0][0] if rows else None

    def _check_schema(self) -> int:
        """The schema version of what was opened (0: a new, empty store), read without
        writing anything. Anything but a mindloop database or a new one is refused."""
        where = self._dialect.location
        tables = self._dialect.table_names()
        if t.schema_version.name in tables:
            missing = t.BASE_TABLES - tables
            if missing:
                raise StoreError(
                    f"{where}: not a mindloop state database (it has a schema_version table "
                    f"but no {', '.join(sorted(missing))}); nothing was changed"
                )
            current = int(self._scalar(q.SCHEMA_VERSION) or 0)
            if current > t.SCHEMA_VERSION:
                raise StoreError(
                    f"{where}: database schema v{current} is newer than this mindloop "
                    f"(v{t.SCHEMA_VERSION}); upgrade mindloop"
                )
            return current
        if not tables and self._dialect.made_for_store():
            return 0
        what = (
            f"its tables are {', '.join(sorted(tables))}, and no schema_version"
            if tables
            else "an empty database that mindloop did not create"
        )
        raise StoreError(
            f"{where}: not a mindloop state database ({what}); refusing to use it, "
            f"nothing was changed"
        )

    def _migrate(self) -> None:
        with self.tx() as c:
            current = 0  # read again under the write lock: another process may have won
            if t.schema_version.name in self._dialect.table_names():
                current = self._scalar(q.SCHEMA_VERSION) or 0
            if current > t.SCHEMA_VERSION:
                raise StoreError(
                    f"{self._dialect.location}: database schema v{current} is newer than "
                    f"this mindloop (v{t.SCHEMA_VERSION}); upgrade mindloop"
                )
            for step in t.MIGRATIONS[current:]:
                step(c)
            if current != t.SCHEMA_VERSION:
                c.execute(sa.delete(t.schema_version))
                c.execute(sa.insert(t.schema_version).values(version=t.SCHEMA_VERSION))
                self._changed = True

    def schema_version(self) -> int:
        return int(self._scalar(q.SCHEMA_VERSION) or 0)

    # ------------------------------------------------------------------ dialogs

    def create_dialog(self, rec: DialogRecord) -> DialogRecord:
        now = time.time()
        rec = rec.model_copy(update={"created_at": now, "updated_at": now})
        self._write(q.INSERT_DIALOG, rec.model_dump())
        return rec

    def get_dialog(self, dialog_id: str) -> DialogRecord:
        """The dialog's row (kept while nothing wrote a dialog, `memo_get`; each caller
        gets a record of its own)."""
        key = ("dialogs", dialog_id)
        held = self.memo_get(key)
        if held is not MISS:
            return _own(held)
        found = self._records(DialogRecord, q.DIALOG, {"id": dialog_id})
        if not found:
            raise NotFoundError(f"no dialog with id {dialog_id!r}")
        self.memo_put(key, _own(found[0]))
        return found[0]

    def resolve_dialog_id(self, prefix: str) -> str:
        """Accept a full id or an unambiguous prefix (as users type them)."""
        stmt = sa.select(t.dialogs.c.id).where(t.dialogs.c.id.startswith(prefix, autoescape=True))
        ids = [r[0] for r in self._rows(stmt)]
        if prefix in ids:
            return prefix
        if not ids:
            raise NotFoundError(f"no dialog with id {prefix!r} (see `mindloop dialogs list`)")
        if len(ids) > 1:
            raise NotFoundError(f"dialog id {prefix!r} is ambiguous: {', '.join(sorted(ids))}")
        return ids[0]

    def list_dialogs(
        self, *, root_id: str | None = None, task_path: str | None = None
    ) -> list[DialogRecord]:
        params: dict[str, Any] = {}
        if root_id is not None:
            params["root_id"] = root_id
        if task_path is not None:
            params["task_path"] = task_path
        stmt = q.LIST_DIALOGS[root_id is not None, task_path is not None]
        return self._records(DialogRecord, stmt, params)

    def delete_tree(self, root_id: str, *, now: float | None = None) -> list[str] | None:
        """Delete the dialog tree of `root_id` (the root and every side dialog under it)
        with every row naming one of its dialogs — messages, generations, events,
        tellasks, replies, questions, sessions, reminders, waits — in one transaction.
        Taskdoc audit records stay: they belong to the task. Returns the ids deleted, or
        None (nothing deleted) when a live process drives a dialog of the tree."""
        params = {"root_id": root_id, "_now": time.time() if now is None else now}
        with self.tx():
            if self._rows(q.TREE_DRIVEN, params):
                return None
            ids = [r[0] for r in self._rows(q.TREE_IDS, params)]
            if ids:
                for stmt in q.DELETE_TREE_ROWS:
                    self._write(stmt, {"ids": ids})
        return ids

    def update_dialog(self, dialog_id: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        fields["_id"] = dialog_id
        if self._write(q.UPDATE_DIALOG, fields) == 0:
            raise NotFoundError(f"no dialog with id {dialog_id!r}")

    def drivable_dialogs(self, owner: str | None = None, *, now: float | None = None) -> list[str]:
        """Dialogs to drive now (oldest mark first); dialogs marked to drive that wait on
        others are parked as `waiting` (what they wait on marks them again). A dialog
        with an unexpired claim of another owner than `owner` is left out and left alone
        (with no owner given, every unexpired claim is another's)."""
        params = {"_owner": owner, "_now": time.time() if now is None else now}
        ids = [r[0] for r in self._rows(q.DRIVABLE, params)]
        self._write(q.PARK_WAITING, params)
        return ids

    # ------------------------------------------------------------------ claims

    def claim_dialog(
        self, dialog_id: str, owner: str, ttl: float, *, now: float | None = None
    ) -> DialogRecord | None:
        """Take the dialog's claim for `owner` until `now + ttl` and mark it running (not
        marked to drive), if nobody else holds an unexpired claim on it; the dialog's
        record as it now stands, or None if it was not taken (None too for an unknown
        dialog).

        One conditional update in a transaction that holds the write lock from its start,
        so of processes racing for a dialog exactly one wins. It joins the caller's
        transaction; on its own it commits lazily (a claim lost with the power was held by
        a process that died with it)."""
        start = time.time() if now is None else now
        params = {"_id": dialog_id, "_owner": owner, "_now": start, "_expires": start + ttl}
        with self.tx(durable=False):
            taken = self._write_returning(DialogRecord, q.CLAIM_DIALOG, params)
            return taken[0] if taken else None

    def reserve_dialog(
        self, dialog_id: str, owner: str, ttl: float, *, now: float | None = None
    ) -> bool:
        """Take the dialog's claim for `owner` until `now + ttl` ahead of its drive,
        leaving its status and its mark to drive as they are: other processes leave it
        to `owner`, whose drive takes the claim as its own (`claim_dialog`). Whether it
        was taken (not if another owner holds an unexpired claim). Joins the caller's
        transaction: the message the drive is for and the reservation commit together."""
        start = time.time() if now is None else now
        params = {"_id": dialog_id, "_owner": owner, "_now": start, "_expires": start + ttl}
        with self.tx(durable=False):
            return self._write(q.RESERVE_DIALOG, params) == 1

    def renew_claim(
        self, dialog_id: str, owner: str, ttl: float, *, now: float | None = None
    ) -> bool:
        """Extend `owner`'s claim to `now + ttl`; False if `owner` no longer holds it (it
        expired and another process took it). One statement: inside the caller's lazy
        transaction it adds no flush to disk; on its own it commits lazily."""
        start = time.time() if now is None else now
        params = {"_id": dialog_id, "_owner": owner, "_expires": start + ttl}
        with self.tx(durable=False):
            return self._write(q.RENEW_CLAIM, params) == 1

    def release_claim(self, dialog_id: str, owner: str) -> bool:
        """Drop `owner`'s claim (nobody else's); whether it held one. Meant to run in the
        caller's transaction together with the dialog's final status."""
        with self.tx(durable=False):
            return self._write(q.RELEASE_CLAIM, {"_id": dialog_id, "_owner": owner}) == 1

    def settle_dialog(self, dialog_id: str, owner: str, **fields: Any) -> None:
        """A drive's end: set `fields` (its final status, …) and drop `owner`'s claim if
        it still holds it, in one statement (joining the caller's transaction)."""
        fields["updated_at"] = time.time()
        fields["_id"] = dialog_id
        fields["_owner"] = owner
        if self._write(q.SETTLE_DIALOG, fields) == 0:
            raise NotFoundError(f"no dialog with id {dialog_id!r}")

    def tree_busy(self, root_id: str) -> bool:
        """Whether a dialog of the tree is running (in any process) or marked to drive."""
        return bool(self._scalar(q.TREE_BUSY, {"root_id": root_id}))

    def expire_claim(self, dialog_id: str, owner: str) -> bool:
        """End `owner`'s claim now (its owner is known to be dead); whether it held one."""
        with self.tx(durable=False):
            return self._write(q.EXPIRE_CLAIM, {"_id": dialog_id, "_owner": owner}) == 1

    def held_claims(self) -> list[tuple[str, str | None]]:
        """(dialog id, claim owner) of every claim held: of the dialogs running, and of
        those reserved ahead of their drive (`reserve_dialog`)."""
        return [(r[0], r[1]) for r in self._rows(q.HELD_CLAIMS)]

    def expired_running_dialogs(self, now: float | None = None) -> list[str]:
        """Dialogs left `running` by a process that is gone: no claim, or an expired one
        (oldest first). Never one that a live process holds."""
        params = {"_now": time.time() if now is None else now}
        return [r[0] for r in self._rows(q.EXPIRED_RUNNING, params)]

    def wait_state(self, dialog_id: str) -> tuple[int, int, int, int]:
        """(tellasks the dialog waits on, tellask-backs asked of it, its open questions,
        its open blocking wait records)."""
        key = (_WAIT_TABLES, "state", dialog_id)
        held = self.memo_get(key)
        if held is not MISS:
            return held  # type: ignore[no-any-return]
        row: tuple[Any, ...] = tuple(self._rows(q.WAIT_STATE, {"id": dialog_id})[0])
        state = int(row[0]), int(row[1]), int(row[2]), int(row[3])
        self.memo_put(key, state)
        return state

    # ------------------------------------------------------------------ waits

    def add_wait(self, rec: WaitRecord) -> WaitRecord:
        self._write(q.INSERT_WAIT, rec.model_dump())
        return rec

    def get_wait(self, wait_id: str) -> WaitRecord:
        found = self._records(WaitRecord, q.WAIT, {"id": wait_id})
        if not found:
            raise NotFoundError(f"no wait with id {wait_id!r}")
        return found[0]

    def resolve_wait(
        self, wait_id: str, status: WaitStatus, resolution: dict[str, Any]
    ) -> WaitRecord | None:
        """Close an open wait once (a conditional update): the closed record, or None if
        it was not open (someone else closed it first)."""
        params = {"_id": wait_id, "_status": status, "_resolution": resolution, "_now": time.time()}
        with self.tx():
            if self._write(q.RESOLVE_WAIT, params) != 1:
                return None
            return self.get_wait(wait_id)

    def open_waits(self, dialog_id: str) -> list[WaitRecord]:
        return self._kept_records(
            ("waits", "open", dialog_id), WaitRecord, q.OPEN_WAITS_OF, {"dialog_id": dialog_id}
        )

    def due_waits(self, now: float) -> list[WaitRecord]:
        """Open waits whose due time is not later than `now`, earliest first."""
        return self._records(WaitRecord, q.DUE_WAITS, {"now": now})

    def next_due(self) -> float | None:
        """The earliest due time of any open wait (None: nothing is due ever)."""
        value = self._scalar(q.NEXT_DUE)
        return None if value is None else float(value)

    # ------------------------------------------------------------------ messages

    def append_messages(self, msgs: Sequence[MessageRecord]) -> list[MessageRecord]:
        """Append records in order (one transaction); returns them with ids set."""
        held = self._held
        if held is not None:  # they go first, in the same statement
            self._held = None
            msgs = [*held[0], *msgs]
        if not msgs:
            return []
        now = time.time()
        rows = [_message_row(m, now) for m in msgs]
        with self.tx():  # the dialogs' kept tails (`tails.py`), extended with the rows
            keys = {tails.key(m.dialog_id, m.course) for m in msgs}
            kept = [(k, tail) for k in keys if (tail := self.memo_get(k)) is not MISS]
            ids = self._insert_many(q.INSERT_MESSAGE, rows)
            for mid, row in zip(ids, rows, strict=True):
                row["id"] = mid
            out = [_validate_message(row) for row in rows]  # records of the caller's own
            for k, tail in kept:  # the rows go to the tails (`_message_row`: the store's)
                if len(keys) == 1:  # one dialog's course (a step's messages)
                    tail.extend(rows)
                else:
                    tail.extend([r for r in rows if tails.key(r["dialog_id"], r["course"]) == k])
                self.memo_put(k, tail)
        if held is not None:
            n = len(held[0])
            held[1].extend(out[:n])
            return out[n:]
        return out

    def hold_messages(self, msgs: Sequence[MessageRecord]) -> list[MessageRecord]:
        """Inside a transaction: append `msgs` with the next messages it appends, ahead of
        them in one statement (a step's turn and its tools' results), or before anything
        reads, or writes a statement naming, the messages table meanwhile, or at its
        commit. Returns the list their stored records go to then (left empty if the
        transaction rolls back). Outside one: `append_messages`."""
        if not self._depth:
            return self.append_messages(msgs)
        self._flush_held()
        receipt: list[MessageRecord] = []
        if msgs:
            self._held = (list(msgs), receipt)
        return receipt

    def _flush_held(self) -> None:
        if self._held is not None:
            self.append_messages(())

    def append_message(
        self,
        dialog_id: str,
        kind: MessageKind,
        data: dict[str, Any],
        *,
        course: int = 1,
        generation_id: int | None = None,
    ) -> MessageRecord:
        rec = MessageRecord(
            dialog_id=dialog_id, course=course, kind=kind, data=data, generation_id=generation_id
        )
        return self.append_messages([rec])[0]

    def load_history(self, dialog_id: str, course: int | None = None) -> list[MessageRecord]:
        """All messages of a dialog (of one course if given), oldest first."""
        if course is None:
            return self._records(MessageRecord, q.HISTORY, {"dialog_id": dialog_id})
        params = {"dialog_id": dialog_id, "course": course}
        return self._records(MessageRecord, q.HISTORY_OF_COURSE, params)

    def history_view(
        self, dialog_id: str, course: int
    ) -> list[tuple[int, MessageKind, dict[str, Any], int | None]]:
        """(id, kind, data, generation_id) of one course's messages, oldest first: what a
        drive's start needs to build the model's context, without whole records."""
        with gc_paused():
            return self._rows(q.HISTORY_VIEW, {"dialog_id": dialog_id, "course": course})

    def messages_after(self, dialog_id: str, course: int, after_id: int) -> list[MessageRecord]:
        """Messages of one course newer than `after_id` (what others appended since)."""
        k = tails.key(dialog_id, course)
        tail = self.memo_get(k)
        if tail is not MISS and tail.covers(after_id):
            return tail.after(after_id)  # kept: what this store read or appended since
        params = {"dialog_id": dialog_id, "course": course, "after_id": after_id}
        found = self._records(MessageRecord, q.MESSAGES_AFTER, params)
        self.memo_put(k, tails.Tail.read(after_id, found))
        return found

    def count_messages(self, dialog_id: str) -> int:
        return int(self._scalar(q.COUNT_MESSAGES, {"dialog_id": dialog_id}) or 0)

    # ------------------------------------------------------------------ generations

    def record_generation(
        self, gen: GenerationRecord, msgs: Sequence[MessageRecord], *, hold: bool = False
    ) -> tuple[GenerationRecord, list[MessageRecord]]:
        """Persist a finished generation and what it produced, in one transaction: under
        `gen.id` if set (`reserve_generation_id`; `IdTaken` if another process wrote a
        generation under it meanwhile), else under a new id. With `hold`, the messages are
        held (`hold_messages`): the list they go to is returned."""
        with self.tx():
            gid = gen.id
            handed = self._generation_handed  # 0: none (on PostgreSQL, always)
            if gid:  # reserved
                top = self._generations_top() if handed else 0
                try:
                    self._insert(q.INSERT_GENERATION, gen.model_dump())
                except sa.exc.IntegrityError as exc:  # the key: nothing else can fail here
                    raise IdTaken(f"generation id {gid} was taken by another process") from exc
                if handed:
                    self.memo_put(_GENERATIONS_TOP, max(top, gid))
            elif handed and not self._handed_below_top():
                # an id this store reserved may be beyond every row: not the next one
                gid = self._generation_handed = max(self._generations_top(), handed) + 1
                self._insert(q.INSERT_GENERATION, gen.model_dump() | {"id": gid})
                self.memo_put(_GENERATIONS_TOP, gid)
            else:  # the database's next id: beyond every row (and every reserved id)
                gid = self._insert(q.INSERT_GENERATION, gen.model_dump(exclude={"id"}))
                if handed:  # kept for the next reservation (none made yet: none kept)
                    self.memo_put(_GENERATIONS_TOP, gid)
            for m in msgs:
                m.generation_id = gid
            stored = self.hold_messages(msgs) if hold else self.append_messages(msgs)
        return gen.model_copy(update={"id": gid}), stored

    def reserve_generation_id(self) -> int:
        """An id for a generation to be written later (`record_generation` with it set),
        for what must name it before it is written: the call keys of tools that run
        before the generation commits with their results (`dialogs/turn.py`). Drawn from
        the database's sequence where it has one (PostgreSQL); on SQLite, beyond every
        generation row as of now and every id this store handed out — so no write of this
        store takes it, but another process's may (SQLite has no sequence spanning
        processes), which `record_generation` then reports (`IdTaken`)."""
        gid = self._dialect.next_id(t.generations)
        if gid is None:
            top = self._generations_top()
            gid = self._generation_handed = max(top, self._generation_handed) + 1
        return gid

    def _generations_top(self) -> int:
        """The largest generation id written (kept, `memo_get`: read again only when
        another connection committed)."""
        top = self.memo_get(_GENERATIONS_TOP)
        if top is MISS:
            top = int(self._scalar(q.MAX_GENERATION_ID) or 0)
            self.memo_put(_GENERATIONS_TOP, top)
        return top  # type: ignore[no-any-return]

    def _handed_below_top(self) -> bool:
        """Whether every id this store reserved is at most the largest generation id as
        last seen — so at most the largest now: the database's next id is none of them.
        (Without checking that no one wrote since, which only makes the largest larger.)"""
        top = self._memo.peek(_GENERATIONS_TOP)
        return top is not MISS and self._generation_handed <= top

    def generations(self, dialog_id: str) -> list[GenerationRecord]:
        return self._records(GenerationRecord, q.GENERATIONS, {"dialog_id": dialog_id})

    def usage(
        self,
        *,
        dialog_id: str | None = None,
        root_id: str | None = None,
        task_path: str | None = None,
    ) -> UsageTotals:
        """Tokens and cost of one dialog's generations, of a whole dialog tree's (by its
        root), or of every dialog of a task package; name exactly one."""
        given = [(k, v) for k, v in (("d", dialog_id), ("r", root_id), ("t", task_path)) if v]
        if len(given) != 1:
            raise ValueError("usage(): name exactly one of dialog_id, root_id, task_path")
        kind, value = given[0]
        if kind == "t":
            stmt, params = q.USAGE_OF_TASK, {"task": value}
        else:
            stmt, params = (q.USAGE_OF_DIALOG if kind == "d" else q.USAGE_OF_TREE), {"id": value}
        return self._records(UsageTotals, stmt, params)[0]

    def usage_by_dialog(self) -> dict[str, UsageTotals]:
        """Usage of every dialog that ran a generation, by dialog id (one query)."""
        keys, rows = self._execute(q.USAGE_BY_DIALOG, None)
        out = {}
        for row in rows:
            data = dict(zip(keys, row, strict=True))
            out[data.pop("dialog_id")] = UsageTotals.model_validate(data)
        return out

    # ------------------------------------------------------------------ events

    def record_event(self, type: str, dialog_id: str | None, data: dict[str, Any]) -> None:
        self._write(
            q.INSERT_EVENT, {"type": type, "dialog_id": dialog_id, "data": data, "ts": time.time()}
        )

    def events(self, dialog_id: str | None = None) -> list[dict[str, Any]]:
        stmt = sa.select(t.events)
        if dialog_id is not None:
            stmt = stmt.where(t.events.c.dialog_id == dialog_id)
        keys, rows = self._execute(stmt.order_by(t.events.c.id), None)
        return [dict(zip(keys, row, strict=True)) for row in rows]

    # ------------------------------------------------------------------ taskdoc audit

    def record_taskdoc_change(self, change: TaskdocChange) -> TaskdocChange:
        change_id = self._insert(q.INSERT_TASKDOC_CHANGE, change.model_dump(exclude={"id"}))
        return change.model_copy(update={"id": change_id})

    def taskdoc_history(self, task_path: str, section: str | None = None) -> list[TaskdocChange]:
        """Changes of one package (one section if given), oldest first."""
        stmt = sa.select(t.taskdoc_changes).where(t.taskdoc_changes.c.task_path == task_path)
        if section is not None:
            stmt = stmt.where(t.taskdoc_changes.c.section == section)
        return self._records(TaskdocChange, stmt.order_by(t.taskdoc_changes.c.id))

    # ------------------------------------------------------------------ dialog tree

    def add_pending(self, p: PendingTellask) -> PendingTellask:
        values = p.model_dump(exclude={"id"}) | {"created_at": time.time()}
        return p.model_copy(update={"id": self._insert(q.INSERT_PENDING, values)})

    def pending_for(self, caller_id: str) -> list[PendingTellask]:
        return self._records(PendingTellask, q.PENDING_FOR, {"id": caller_id})

    def pending_by_side(self, side_id: str) -> list[PendingTellask]:
        return self._records(PendingTellask, q.PENDING_BY_SIDE, {"id": side_id})

    def all_pending(self) -> list[PendingTellask]:
        return self._records(PendingTellask, q.ALL_PENDING)

    def remove_pending(self, pending_id: int) -> bool:
        return bool(self._write(q.DELETE_PENDING, {"_id": pending_id}))

    def add_response(self, r: ResponseRecord) -> ResponseRecord:
        values = r.model_dump(exclude={"id"}) | {"created_at": time.time()}
        return r.model_copy(update={"id": self._insert(q.INSERT_RESPONSE, values)})

    def undelivered_responses(self, caller_id: str) -> list[ResponseRecord]:
        """The caller's inbox (kept: a drive looks at it at every boundary, and it is
        mostly empty)."""
        key = ("responses", "undelivered", caller_id)
        return self._kept_records(key, ResponseRecord, q.UNDELIVERED, {"id": caller_id})

    def all_responses(self) -> list[ResponseRecord]:
        return self._records(ResponseRecord, q.ALL_RESPONSES)

    def mark_delivered(self, response_ids: Sequence[int]) -> None:
        if response_ids:
            self._write(q.MARK_DELIVERED, {"ids": list(response_ids)})

    def add_question(self, question: QuestionRecord) -> QuestionRecord:
        question = question.model_copy(update={"asked_at": time.time()})
        self._write(q.INSERT_QUESTION, question.model_dump())
        return question

    def get_question(self, question_id: str) -> QuestionRecord:
        found = self._records(QuestionRecord, q.QUESTION, {"id": question_id})
        if not found:
            raise NotFoundError(f"no question with id {question_id!r} (see `mindloop questions`)")
        return found[0]

    def open_questions(
        self, *, dialog_id: str | None = None, root_ids: Sequence[str] | None = None
    ) -> list[QuestionRecord]:
        if dialog_id is not None and root_ids is None:
            key = ("questions", "open", dialog_id)
            params = {"dialog_id": dialog_id}
            return self._kept_records(key, QuestionRecord, q.OPEN_QUESTIONS_OF, params)
        c = t.questions.c
        stmt = sa.select(t.questions).where(c.status == "open")
        if dialog_id is not None:
            stmt = stmt.where(c.dialog_id == dialog_id)
        if root_ids is not None:
            stmt = stmt.where(c.root_id.in_(list(root_ids)))
        return self._records(QuestionRecord, stmt.order_by(c.asked_at))

    def close_question(self, question_id: str, *, answer: str | None, status: str) -> None:
        params = {"_id": question_id, "_status": status, "_answer": answer, "ts": time.time()}
        if self._write(q.CLOSE_QUESTION, params) == 0:
            raise NotFoundError(f"question {question_id!r} is not open")

    def discard_questions(self, dialog_id: str) -> int:
        return self._write(q.DISCARD_QUESTIONS, {"_dialog": dialog_id, "ts": time.time()})

    def lookup_session(self, root_id: str, key: str) -> str | None:
        return self._scalar(q.SESSION, {"root_id": root_id, "key": key})  # type: ignore[no-any-return]

    def register_session(self, root_id: str, key: str, dialog_id: str) -> None:
        self._write(q.INSERT_SESSION, {"root_id": root_id, "key": key, "dialog_id": dialog_id})

    def sessions(self, root_id: str) -> dict[str, str]:
        keys, rows = self._execute(q.SESSIONS, {"root_id": root_id})
        found = [dict(zip(keys, row, strict=True)) for row in rows]
        return {r["key"]: r["dialog_id"] for r in found}

    # ------------------------------------------------------------------ reminders

    def reminders(self, dialog_id: str) -> list[Reminder]:
        return self._records(Reminder, q.REMINDERS, {"dialog_id": dialog_id})

    def set_reminders(self, dialog_id: str, contents: Sequence[str]) -> list[Reminder]:
        """Replace the dialog's reminders with `contents`, in order (positions 1..n)."""
        now = time.time()
        with self.tx():
            self._write(q.DELETE_REMINDERS, {"dialog_id": dialog_id})
            for i, content in enumerate(contents, start=1):
                row = {"dialog_id": dialog_id, "position": i, "content": content, "created_at": now}
                self._write(q.INSERT_REMINDER, row)
        return self.reminders(dialog_id)


# the largest generation id written (`_generations_top`)
_GENERATIONS_TOP = (t.generations.name, "top")
# what `wait_state` counts (its key names them all: a write of any drops it)
_WAIT_TABLES = (t.pending_tellasks.name, t.questions.name, t.waits.name)


_MESSAGES = t.messages.name
_NAMES_MESSAGES: dict[int, bool] = {}


def _names_messages(what: sa.Executable | str | tuple[str, ...]) -> bool:
    """Whether a statement (its SQL names the table: a false alarm only costs a held
    message its statement of its own), or a memo key's table(s), may touch the messages
    table. A statement built per call is assumed to."""
    if isinstance(what, str):
        return what == _MESSAGES
    if isinstance(what, tuple):
        return _MESSAGES in what
    try:
        return _NAMES_MESSAGES[id(what)]
    except KeyError:
        pass
    if id(what) not in q.PREBUILT:
        return True
    found = _NAMES_MESSAGES[id(what)] = _MESSAGES in str(what)
    return found


def _validator(model: type[_R]) -> Callable[[Any], _R]:
    """`model.model_validate` without its Python frame (~0.4 µs less a record, and a
    record is built per row read)."""
    return model.__pydantic_validator__.validate_python


_validate_message = _validator(MessageRecord)


def _own(rec: DialogRecord) -> DialogRecord:
    """A copy of a record to hand out (its one mutable field copied too)."""
    if rec.assignment is None:
        return rec.model_copy()
    return rec.model_copy(update={"assignment": copy.deepcopy(rec.assignment)})


def _message_row(m: MessageRecord, now: float) -> dict[str, Any]:
    """The row of a message to append: the store's own (its data a copy of the caller's
    dict), as kept tails keep it (`tails.py`)."""
    return {
        "dialog_id": m.dialog_id,
        "course": m.course,
        "kind": m.kind,
        "data": dict(m.data),
        "generation_id": m.generation_id,
        "created_at": now,
    }


class _Transaction:
    """`Store.tx()`'s context manager: a class rather than a generator, as the engine opens
    several transactions a step, and one per store and durability, entered again by
    every block (blocks nest by the store's depth: the block that opens the transaction
    ends it, a nested block joins it)."""

    __slots__ = ("_durable", "_store")

    def __init__(self, store: Store, durable: bool) -> None:
        self._store = store
        self._durable = durable

    def __enter__(self) -> sa.Connection:
        store = self._store
        if store._depth:
            store._depth += 1
        else:
            store._begin(self._durable)
        return store._conn

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        store = self._store
        if store._depth == 1:  # the outermost block
            store._finish(store._durable_tx, failed=kind is not None)
        else:
            store._depth -= 1
