"""The transactional store: the only module that writes SQL.

One SQLite database per rtws (`.mindloop/state.sqlite`, WAL). Every public method is a
transaction of its own unless it runs inside `with store.tx():`, in which case it joins
the outer transaction — that is how changes that belong together (a reply recorded, its
pending record removed, the caller marked to drive) commit atomically.

The engine appends; it never re-reads whole dialogs per step. `load_history` is for
(re)starting a drive, not for every generation.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel

from mindloop.errors import MindloopError, NotFoundError
from mindloop.store import direct
from mindloop.store import schema as t
from mindloop.store import statements as q
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
)

STATE_DIR = ".mindloop"
STATE_FILE = "state.sqlite"


def new_id(prefix: str = "") -> str:
    """A short random id (12 hex chars), optionally prefixed (`q4h-…`)."""
    return prefix + uuid.uuid4().hex[:12]


_R = TypeVar("_R", bound=BaseModel)


class StoreError(MindloopError):
    pass


@dataclass
class StoreStats:
    """What this store did, for benchmarks and diagnostics: commits that changed rows
    (durable ones fsync the WAL; lazy ones ride on the next fsync) and statements run."""

    durable_commits: int = 0
    lazy_commits: int = 0
    statements: int = 0

    def count_commit(self, *, durable: bool) -> None:
        if durable:
            self.durable_commits += 1
        else:
            self.lazy_commits += 1


class Store:
    """Durable runtime state. `durable=True` fsyncs every commit (synchronous=FULL)."""

    def __init__(self, path: Path | str, *, durable: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._engine = sa.create_engine(
            f"sqlite:///{self.path}", poolclass=sa.pool.StaticPool, future=True
        )
        sync = "FULL" if durable else "NORMAL"

        @sa.event.listens_for(self._engine, "connect")
        def _pragmas(dbapi_conn: Any, _rec: Any) -> None:
            cur = dbapi_conn.cursor()
            # New databases only: a step's durable commit then fsyncs ~1 KiB per page it
            # touched instead of 4 KiB (a step touches a handful of table and index pages).
            cur.execute("PRAGMA page_size=1024")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={sync}")
            cur.execute("PRAGMA busy_timeout=10000")
            # A WAL that is checkpointed often wraps early: commits then overwrite blocks
            # the file already has, and an fsync need not also commit a file-size change
            # (measured: about half the cost per durable commit). Also bounds the WAL.
            cur.execute("PRAGMA wal_autocheckpoint=256")
            cur.close()
            # We issue BEGIN ourselves (below); reads outside tx() run in autocommit.
            dbapi_conn.isolation_level = None

        self.durable = durable
        self.stats = StoreStats()
        try:
            self._conn = self._engine.connect()
        except sa.exc.DatabaseError as exc:
            self._engine.dispose()
            raise self._unusable(exc) from exc
        self._dbapi: Any = self._conn.connection.dbapi_connection
        self._depth = 0
        # Prebuilt statements run on the DBAPI connection (see `direct`): SQLite only.
        self._direct_ok = self._engine.dialect.name == "sqlite"
        self._compiled: dict[tuple[int, tuple[str, ...]], direct.Compiled | None] = {}
        try:
            self._migrate()  # a failure here is rolled back: nothing written
        except sa.exc.DatabaseError as exc:
            self.close()
            raise self._unusable(exc) from exc

    def _unusable(self, exc: sa.exc.DatabaseError) -> StoreError:
        """A damaged or foreign state file: one clear error naming it (the CLI prints it
        as is), instead of SQLAlchemy's multi-line text. The file is left as it was."""
        return StoreError(f"{self.path}: not a usable mindloop state database ({exc.orig})")

    @classmethod
    def for_rtws(cls, rtws: Path, *, durable: bool = True) -> Store:
        return cls(Path(rtws) / STATE_DIR / STATE_FILE, durable=durable)

    def close(self) -> None:
        self._conn.close()
        self._engine.dispose()

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def tx(self, *, durable: bool = True) -> Iterator[sa.Connection]:
        """Run the block in one transaction; nested blocks join the outermost one.

        `durable=False` commits without an fsync of its own (WAL, synchronous=NORMAL):
        the commit survives a killed process at once, and a power failure from the next
        durable commit on, because the WAL is replayed as an ordered prefix. Use it only
        for writes whose loss would leave an earlier state that recovery treats alike."""
        if self._depth:
            self._depth += 1
            try:
                yield self._conn
            finally:
                self._depth -= 1
            return
        lazy = self.durable and not durable
        if lazy:  # the safety level cannot change inside a transaction
            self._dbapi.execute("PRAGMA synchronous=NORMAL")
        changes = self._dbapi.total_changes
        # IMMEDIATE takes the write lock up front: no deadlock on lock upgrade when another
        # process (e.g. `mindloop answer`) writes concurrently.
        self._dbapi.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self._conn
        except BaseException:
            self._dbapi.rollback()
            if self._conn.in_transaction():
                self._conn.rollback()
            raise
        else:
            self._dbapi.commit()
            if self._conn.in_transaction():  # statements that went through SQLAlchemy
                self._conn.commit()
            if self._dbapi.total_changes != changes:
                self.stats.count_commit(durable=self.durable and not lazy)
        finally:
            self._depth = 0
            if lazy:
                self._dbapi.execute("PRAGMA synchronous=FULL")

    def _direct(self, stmt: sa.Executable, params: Any) -> direct.Compiled | None:
        """The DBAPI form of a prebuilt statement for these parameter keys, if it has one."""
        if not self._direct_ok or id(stmt) not in q.PREBUILT or isinstance(params, list):
            return None
        keys = tuple(params) if params else ()
        key = (id(stmt), keys)
        try:
            return self._compiled[key]
        except KeyError:
            found = self._compiled[key] = direct.compile_for(stmt, self._engine.dialect, keys)
            return found

    def _execute(self, stmt: sa.Executable, params: Any) -> tuple[list[str], list[Any]]:
        """Run a read: (column names, rows)."""
        self.stats.statements += 1
        comp = self._direct(stmt, params)
        if comp is not None:
            cur = self._dbapi.execute(comp.sql, comp.params(params))
            return [d[0] for d in cur.description], comp.rows(cur.fetchall())
        res = self._conn.execute(stmt, params)
        keys = list(res.keys())
        rows = list(res.all())
        if not self._depth:  # end the implicit transaction: hold no stale snapshot
            self._conn.commit()
        return keys, rows

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
        validate = model.model_validate
        return [validate(dict(zip(keys, row, strict=True))) for row in rows]

    def _write(self, stmt: sa.Executable, params: Any = None) -> Any:
        """Run one write, joining the current transaction or committing by itself.
        Returns a cursor-like result (`lastrowid`, `rowcount`)."""
        if not self._depth:
            with self.tx():
                return self._write(stmt, params)
        self.stats.statements += 1
        comp = self._direct(stmt, params)
        if comp is not None:
            return self._dbapi.execute(comp.sql, comp.params(params))
        return self._conn.execute(stmt, params)

    def _scalar(self, stmt: sa.Executable, params: dict[str, Any] | None = None) -> Any:
        rows = self._rows(stmt, params)
        return rows[0][0] if rows else None

    def _migrate(self) -> None:
        with self.tx() as c:
            insp = sa.inspect(c)
            current = 0
            if insp.has_table("schema_version"):
                current = self._scalar(q.SCHEMA_VERSION) or 0
            if current > t.SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: database schema v{current} is newer than this mindloop "
                    f"(v{t.SCHEMA_VERSION}); upgrade mindloop"
                )
            for step in t.MIGRATIONS[current:]:
                step(c)
            if current != t.SCHEMA_VERSION:
                c.execute(sa.delete(t.schema_version))
                c.execute(sa.insert(t.schema_version).values(version=t.SCHEMA_VERSION))

    def schema_version(self) -> int:
        return int(self._scalar(q.SCHEMA_VERSION) or 0)

    # ------------------------------------------------------------------ dialogs

    def create_dialog(self, rec: DialogRecord) -> DialogRecord:
        now = time.time()
        rec = rec.model_copy(update={"created_at": now, "updated_at": now})
        self._write(q.INSERT_DIALOG, rec.model_dump())
        return rec

    def get_dialog(self, dialog_id: str) -> DialogRecord:
        found = self._records(DialogRecord, q.DIALOG, {"id": dialog_id})
        if not found:
            raise NotFoundError(f"no dialog with id {dialog_id!r}")
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
        stmt = sa.select(t.dialogs).order_by(t.dialogs.c.created_at, t.dialogs.c.id)
        if root_id is not None:
            stmt = stmt.where(t.dialogs.c.root_id == root_id)
        if task_path is not None:
            stmt = stmt.where(t.dialogs.c.task_path == task_path)
        return self._records(DialogRecord, stmt)

    def update_dialog(self, dialog_id: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        fields["_id"] = dialog_id
        if self._write(q.UPDATE_DIALOG, fields).rowcount == 0:
            raise NotFoundError(f"no dialog with id {dialog_id!r}")

    def drivable_dialogs(self) -> list[str]:
        """Dialogs to drive now (oldest mark first); dialogs marked to drive that wait on
        others are parked as `waiting` (what they wait on marks them again)."""
        ids = [r[0] for r in self._rows(q.DRIVABLE)]
        self._write(q.PARK_WAITING, {"ts": time.time()})
        return ids

    def wait_state(self, dialog_id: str) -> tuple[int, int, int]:
        """(tellasks the dialog waits on, tellask-backs asked of it, its open questions)."""
        row: tuple[Any, ...] = tuple(self._rows(q.WAIT_STATE, {"id": dialog_id})[0])
        return int(row[0]), int(row[1]), int(row[2])

    # ------------------------------------------------------------------ messages

    def append_messages(self, msgs: Sequence[MessageRecord]) -> list[MessageRecord]:
        """Append records in order (one transaction); returns them with ids set."""
        if not msgs:
            return []
        now = time.time()
        rows = [_message_row(m, now) for m in msgs]
        with self.tx():
            ids = [self._write(q.INSERT_MESSAGE, row).lastrowid for row in rows]
        return [
            MessageRecord.model_validate(row | {"id": mid})
            for mid, row in zip(ids, rows, strict=True)
        ]

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
        return self._rows(q.HISTORY_VIEW, {"dialog_id": dialog_id, "course": course})

    def messages_after(self, dialog_id: str, course: int, after_id: int) -> list[MessageRecord]:
        """Messages of one course newer than `after_id` (what others appended since)."""
        params = {"dialog_id": dialog_id, "course": course, "after_id": after_id}
        return self._records(MessageRecord, q.MESSAGES_AFTER, params)

    def count_messages(self, dialog_id: str) -> int:
        return int(self._scalar(q.COUNT_MESSAGES, {"dialog_id": dialog_id}) or 0)

    # ------------------------------------------------------------------ generations

    def record_generation(
        self, gen: GenerationRecord, msgs: Sequence[MessageRecord]
    ) -> tuple[GenerationRecord, list[MessageRecord]]:
        """Persist a finished generation and what it produced, in one transaction."""
        with self.tx():
            gid = int(self._write(q.INSERT_GENERATION, gen.model_dump(exclude={"id"})).lastrowid)
            for m in msgs:
                m.generation_id = gid
            stored = self.append_messages(msgs)
        return gen.model_copy(update={"id": gid}), stored

    def generations(self, dialog_id: str) -> list[GenerationRecord]:
        return self._records(GenerationRecord, q.GENERATIONS, {"dialog_id": dialog_id})

    # ------------------------------------------------------------------ events

    def record_event(self, type: str, dialog_id: str | None, data: dict[str, Any]) -> None:
        self._write(
            q.INSERT_EVENT, {"type": type, "dialog_id": dialog_id, "data": data, "ts": time.time()}
        )

    def events(self, dialog_id: str | None = None) -> list[dict[str, Any]]:
        stmt = sa.select(t.events)
        if dialog_id is not None:
            stmt = stmt.where(t.events.c.dialog_id == dialog_id)
        return [r._asdict() for r in self._rows(stmt.order_by(t.events.c.id))]

    # ------------------------------------------------------------------ taskdoc audit

    def record_taskdoc_change(self, change: TaskdocChange) -> TaskdocChange:
        res = self._write(q.INSERT_TASKDOC_CHANGE, change.model_dump(exclude={"id"}))
        return change.model_copy(update={"id": int(res.lastrowid)})

    def taskdoc_history(self, task_path: str, section: str | None = None) -> list[TaskdocChange]:
        """Changes of one package (one section if given), oldest first."""
        stmt = sa.select(t.taskdoc_changes).where(t.taskdoc_changes.c.task_path == task_path)
        if section is not None:
            stmt = stmt.where(t.taskdoc_changes.c.section == section)
        return self._records(TaskdocChange, stmt.order_by(t.taskdoc_changes.c.id))

    # ------------------------------------------------------------------ dialog tree

    def add_pending(self, p: PendingTellask) -> PendingTellask:
        values = p.model_dump(exclude={"id"}) | {"created_at": time.time()}
        return p.model_copy(update={"id": int(self._write(q.INSERT_PENDING, values).lastrowid)})

    def pending_for(self, caller_id: str) -> list[PendingTellask]:
        return self._records(PendingTellask, q.PENDING_FOR, {"id": caller_id})

    def pending_by_side(self, side_id: str) -> list[PendingTellask]:
        return self._records(PendingTellask, q.PENDING_BY_SIDE, {"id": side_id})

    def all_pending(self) -> list[PendingTellask]:
        return self._records(PendingTellask, q.ALL_PENDING)

    def remove_pending(self, pending_id: int) -> bool:
        return bool(self._write(q.DELETE_PENDING, {"_id": pending_id}).rowcount)

    def add_response(self, r: ResponseRecord) -> ResponseRecord:
        values = r.model_dump(exclude={"id"}) | {"created_at": time.time()}
        return r.model_copy(update={"id": int(self._write(q.INSERT_RESPONSE, values).lastrowid)})

    def undelivered_responses(self, caller_id: str) -> list[ResponseRecord]:
        return self._records(ResponseRecord, q.UNDELIVERED, {"id": caller_id})

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
            return self._records(QuestionRecord, q.OPEN_QUESTIONS_OF, {"dialog_id": dialog_id})
        c = t.questions.c
        stmt = sa.select(t.questions).where(c.status == "open")
        if dialog_id is not None:
            stmt = stmt.where(c.dialog_id == dialog_id)
        if root_ids is not None:
            stmt = stmt.where(c.root_id.in_(list(root_ids)))
        return self._records(QuestionRecord, stmt.order_by(c.asked_at))

    def close_question(self, question_id: str, *, answer: str | None, status: str) -> None:
        params = {"_id": question_id, "_status": status, "_answer": answer, "ts": time.time()}
        if self._write(q.CLOSE_QUESTION, params).rowcount == 0:
            raise NotFoundError(f"question {question_id!r} is not open")

    def discard_questions(self, dialog_id: str) -> int:
        res = self._write(q.DISCARD_QUESTIONS, {"_dialog": dialog_id, "ts": time.time()})
        return int(res.rowcount)

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


def _message_row(m: MessageRecord, now: float) -> dict[str, Any]:
    return {
        "dialog_id": m.dialog_id,
        "course": m.course,
        "kind": m.kind,
        "data": m.data,
        "generation_id": m.generation_id,
        "created_at": now,
    }
