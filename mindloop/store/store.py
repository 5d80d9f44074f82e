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
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from mindloop.errors import MindloopError, NotFoundError
from mindloop.store import schema as t
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


class StoreError(MindloopError):
    pass


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
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={sync}")
            cur.execute("PRAGMA busy_timeout=10000")
            cur.close()
            # We issue BEGIN ourselves (below); reads outside tx() run in autocommit.
            dbapi_conn.isolation_level = None

        @sa.event.listens_for(self._engine, "begin")
        def _begin(conn: sa.Connection) -> None:
            if self._depth:
                # IMMEDIATE takes the write lock up front: no deadlock on lock upgrade
                # when another process (e.g. `mindloop answer`) writes concurrently.
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        self._conn = self._engine.connect()
        self._depth = 0
        self._migrate()

    @classmethod
    def for_rtws(cls, rtws: Path, *, durable: bool = True) -> Store:
        return cls(Path(rtws) / STATE_DIR / STATE_FILE, durable=durable)

    def close(self) -> None:
        self._conn.close()
        self._engine.dispose()

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def tx(self) -> Iterator[sa.Connection]:
        """Run the block in one transaction; nested blocks join the outermost one."""
        if self._depth:
            self._depth += 1
            try:
                yield self._conn
            finally:
                self._depth -= 1
            return
        self._depth = 1
        try:
            with self._conn.begin():
                yield self._conn
        finally:
            self._depth = 0

    def _rows(self, stmt: sa.Executable) -> list[sa.Row[Any]]:
        """Run a read; outside a `tx()` block end the implicit transaction at once, so no
        stale snapshot is held (other processes write to the same database)."""
        rows = list(self._conn.execute(stmt))
        if not self._depth:
            self._conn.commit()
        return rows

    @staticmethod
    def _pk(res: sa.CursorResult[Any]) -> int:
        pk = res.inserted_primary_key
        return int(pk[0]) if pk else 0

    def _scalar(self, stmt: sa.Executable) -> Any:
        rows = self._rows(stmt)
        return rows[0][0] if rows else None

    def _migrate(self) -> None:
        with self.tx() as c:
            insp = sa.inspect(c)
            current = 0
            if insp.has_table("schema_version"):
                current = self._scalar(sa.select(t.schema_version.c.version)) or 0
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
        return int(self._scalar(sa.select(t.schema_version.c.version)) or 0)

    # ------------------------------------------------------------------ dialogs

    def create_dialog(self, rec: DialogRecord) -> DialogRecord:
        now = time.time()
        rec = rec.model_copy(update={"created_at": now, "updated_at": now})
        with self.tx() as c:
            c.execute(sa.insert(t.dialogs).values(**rec.model_dump()))
        return rec

    def get_dialog(self, dialog_id: str) -> DialogRecord:
        rows = self._rows(sa.select(t.dialogs).where(t.dialogs.c.id == dialog_id))
        row = rows[0] if rows else None
        if row is None:
            raise NotFoundError(f"no dialog with id {dialog_id!r}")
        return DialogRecord.model_validate(row._asdict())

    def resolve_dialog_id(self, prefix: str) -> str:
        """Accept a full id or an unambiguous prefix (as users type them)."""
        rows = self._rows(
            sa.select(t.dialogs.c.id).where(t.dialogs.c.id.startswith(prefix, autoescape=True))
        )
        ids = [r[0] for r in rows]
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
        q = sa.select(t.dialogs).order_by(t.dialogs.c.created_at, t.dialogs.c.id)
        if root_id is not None:
            q = q.where(t.dialogs.c.root_id == root_id)
        if task_path is not None:
            q = q.where(t.dialogs.c.task_path == task_path)
        return [DialogRecord.model_validate(r._asdict()) for r in self._rows(q)]

    def update_dialog(self, dialog_id: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        with self.tx() as c:
            res = c.execute(
                sa.update(t.dialogs).where(t.dialogs.c.id == dialog_id).values(**fields)
            )
            if res.rowcount == 0:
                raise NotFoundError(f"no dialog with id {dialog_id!r}")

    def dialogs_needing_drive(self) -> list[str]:
        q = sa.select(t.dialogs.c.id).where(t.dialogs.c.needs_drive.is_(True))
        return [r[0] for r in self._rows(q.order_by(t.dialogs.c.updated_at))]

    # ------------------------------------------------------------------ messages

    def append_messages(self, msgs: Sequence[MessageRecord]) -> list[MessageRecord]:
        """Append records in order (one transaction); returns them with ids set."""
        now = time.time()
        out: list[MessageRecord] = []
        with self.tx() as c:
            for m in msgs:
                values = m.model_dump(exclude={"id"})
                values["created_at"] = now
                res = c.execute(sa.insert(t.messages).values(**values))
                pk = res.inserted_primary_key
                out.append(m.model_copy(update={"id": pk[0] if pk else 0, "created_at": now}))
        return out

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
        q = sa.select(t.messages).where(t.messages.c.dialog_id == dialog_id)
        if course is not None:
            q = q.where(t.messages.c.course == course)
        rows = self._rows(q.order_by(t.messages.c.id))
        return [MessageRecord.model_validate(r._asdict()) for r in rows]

    def messages_after(self, dialog_id: str, course: int, after_id: int) -> list[MessageRecord]:
        """Messages of one course newer than `after_id` (what others appended since)."""
        q = sa.select(t.messages).where(
            t.messages.c.dialog_id == dialog_id,
            t.messages.c.course == course,
            t.messages.c.id > after_id,
        )
        return [
            MessageRecord.model_validate(r._asdict())
            for r in self._rows(q.order_by(t.messages.c.id))
        ]

    def count_messages(self, dialog_id: str) -> int:
        q = sa.select(sa.func.count()).where(t.messages.c.dialog_id == dialog_id)
        return int(self._scalar(q) or 0)

    # ------------------------------------------------------------------ generations

    def record_generation(
        self, gen: GenerationRecord, msgs: Sequence[MessageRecord]
    ) -> tuple[GenerationRecord, list[MessageRecord]]:
        """Persist a finished generation and what it produced, in one transaction."""
        with self.tx() as c:
            res = c.execute(sa.insert(t.generations).values(**gen.model_dump(exclude={"id"})))
            gid = int(res.inserted_primary_key[0]) if res.inserted_primary_key else 0
            stored = self.append_messages(
                [m.model_copy(update={"generation_id": gid}) for m in msgs]
            )
        return gen.model_copy(update={"id": gid}), stored

    def generations(self, dialog_id: str) -> list[GenerationRecord]:
        q = sa.select(t.generations).where(t.generations.c.dialog_id == dialog_id)
        rows = self._rows(q.order_by(t.generations.c.id))
        return [GenerationRecord.model_validate(r._asdict()) for r in rows]

    # ------------------------------------------------------------------ events

    def record_event(self, type: str, dialog_id: str | None, data: dict[str, Any]) -> None:
        with self.tx() as c:
            c.execute(
                sa.insert(t.events).values(
                    type=type, dialog_id=dialog_id, data=data, ts=time.time()
                )
            )

    def events(self, dialog_id: str | None = None) -> list[dict[str, Any]]:
        q = sa.select(t.events)
        if dialog_id is not None:
            q = q.where(t.events.c.dialog_id == dialog_id)
        return [r._asdict() for r in self._rows(q.order_by(t.events.c.id))]

    # ------------------------------------------------------------------ taskdoc audit

    def record_taskdoc_change(self, change: TaskdocChange) -> TaskdocChange:
        with self.tx() as c:
            res = c.execute(
                sa.insert(t.taskdoc_changes).values(**change.model_dump(exclude={"id"}))
            )
            pk = res.inserted_primary_key
        return change.model_copy(update={"id": int(pk[0]) if pk else 0})

    def taskdoc_history(self, task_path: str, section: str | None = None) -> list[TaskdocChange]:
        """Changes of one package (one section if given), oldest first."""
        q = sa.select(t.taskdoc_changes).where(t.taskdoc_changes.c.task_path == task_path)
        if section is not None:
            q = q.where(t.taskdoc_changes.c.section == section)
        rows = self._rows(q.order_by(t.taskdoc_changes.c.id))
        return [TaskdocChange.model_validate(r._asdict()) for r in rows]

    # ------------------------------------------------------------------ dialog tree

    def add_pending(self, p: PendingTellask) -> PendingTellask:
        with self.tx() as c:
            values = p.model_dump(exclude={"id"}) | {"created_at": time.time()}
            res = c.execute(sa.insert(t.pending_tellasks).values(**values))
        return p.model_copy(update={"id": self._pk(res)})

    def pending_for(self, caller_id: str) -> list[PendingTellask]:
        q = sa.select(t.pending_tellasks).where(t.pending_tellasks.c.caller_id == caller_id)
        rows = self._rows(q.order_by(t.pending_tellasks.c.id))
        return [PendingTellask.model_validate(r._asdict()) for r in rows]

    def pending_by_side(self, side_id: str) -> list[PendingTellask]:
        q = sa.select(t.pending_tellasks).where(t.pending_tellasks.c.side_id == side_id)
        rows = self._rows(q.order_by(t.pending_tellasks.c.id))
        return [PendingTellask.model_validate(r._asdict()) for r in rows]

    def all_pending(self) -> list[PendingTellask]:
        rows = self._rows(sa.select(t.pending_tellasks).order_by(t.pending_tellasks.c.id))
        return [PendingTellask.model_validate(r._asdict()) for r in rows]

    def remove_pending(self, pending_id: int) -> bool:
        with self.tx() as c:
            res = c.execute(
                sa.delete(t.pending_tellasks).where(t.pending_tellasks.c.id == pending_id)
            )
        return bool(res.rowcount)

    def add_response(self, r: ResponseRecord) -> ResponseRecord:
        with self.tx() as c:
            values = r.model_dump(exclude={"id"}) | {"created_at": time.time()}
            res = c.execute(sa.insert(t.responses).values(**values))
        return r.model_copy(update={"id": self._pk(res)})

    def undelivered_responses(self, caller_id: str) -> list[ResponseRecord]:
        q = sa.select(t.responses).where(
            t.responses.c.caller_id == caller_id, t.responses.c.delivered.is_(False)
        )
        rows = self._rows(q.order_by(t.responses.c.id))
        return [ResponseRecord.model_validate(r._asdict()) for r in rows]

    def all_responses(self) -> list[ResponseRecord]:
        rows = self._rows(sa.select(t.responses).order_by(t.responses.c.id))
        return [ResponseRecord.model_validate(r._asdict()) for r in rows]

    def mark_delivered(self, response_ids: Sequence[int]) -> None:
        if not response_ids:
            return
        with self.tx() as c:
            c.execute(
                sa.update(t.responses)
                .where(t.responses.c.id.in_(list(response_ids)))
                .values(delivered=True)
            )

    def add_question(self, q: QuestionRecord) -> QuestionRecord:
        q = q.model_copy(update={"asked_at": time.time()})
        with self.tx() as c:
            c.execute(sa.insert(t.questions).values(**q.model_dump()))
        return q

    def get_question(self, question_id: str) -> QuestionRecord:
        rows = self._rows(sa.select(t.questions).where(t.questions.c.id == question_id))
        row = rows[0] if rows else None
        if row is None:
            raise NotFoundError(f"no question with id {question_id!r} (see `mindloop questions`)")
        return QuestionRecord.model_validate(row._asdict())

    def open_questions(
        self, *, dialog_id: str | None = None, root_ids: Sequence[str] | None = None
    ) -> list[QuestionRecord]:
        q = sa.select(t.questions).where(t.questions.c.status == "open")
        if dialog_id is not None:
            q = q.where(t.questions.c.dialog_id == dialog_id)
        if root_ids is not None:
            q = q.where(t.questions.c.root_id.in_(list(root_ids)))
        rows = self._rows(q.order_by(t.questions.c.asked_at))
        return [QuestionRecord.model_validate(r._asdict()) for r in rows]

    def close_question(self, question_id: str, *, answer: str | None, status: str) -> None:
        with self.tx() as c:
            res = c.execute(
                sa.update(t.questions)
                .where(t.questions.c.id == question_id, t.questions.c.status == "open")
                .values(status=status, answer=answer, answered_at=time.time())
            )
            if res.rowcount == 0:
                raise NotFoundError(f"question {question_id!r} is not open")

    def discard_questions(self, dialog_id: str) -> int:
        with self.tx() as c:
            res = c.execute(
                sa.update(t.questions)
                .where(t.questions.c.dialog_id == dialog_id, t.questions.c.status == "open")
                .values(status="discarded", answered_at=time.time())
            )
        return int(res.rowcount)

    def lookup_session(self, root_id: str, key: str) -> str | None:
        q = sa.select(t.sessions.c.dialog_id).where(
            t.sessions.c.root_id == root_id, t.sessions.c.key == key
        )
        return self._scalar(q)  # type: ignore[no-any-return]

    def register_session(self, root_id: str, key: str, dialog_id: str) -> None:
        with self.tx() as c:
            c.execute(sa.insert(t.sessions).values(root_id=root_id, key=key, dialog_id=dialog_id))

    def sessions(self, root_id: str) -> dict[str, str]:
        q = sa.select(t.sessions).where(t.sessions.c.root_id == root_id)
        return {row.key: row.dialog_id for row in self._rows(q)}

    # ------------------------------------------------------------------ reminders

    def reminders(self, dialog_id: str) -> list[Reminder]:
        q = sa.select(t.reminders).where(t.reminders.c.dialog_id == dialog_id)
        rows = self._rows(q.order_by(t.reminders.c.position, t.reminders.c.id))
        return [Reminder.model_validate(r._asdict()) for r in rows]

    def set_reminders(self, dialog_id: str, contents: Sequence[str]) -> list[Reminder]:
        """Replace the dialog's reminders with `contents`, in order (positions 1..n)."""
        now = time.time()
        with self.tx() as c:
            c.execute(sa.delete(t.reminders).where(t.reminders.c.dialog_id == dialog_id))
            for i, content in enumerate(contents, start=1):
                c.execute(
                    sa.insert(t.reminders).values(
                        dialog_id=dialog_id, position=i, content=content, created_at=now
                    )
                )
        return self.reminders(dialog_id)
