"""Summaries: the write-back store of compactions and workspace summaries (agent-loop
§7.3). A dialog's compactions are kind `dialog` (its newest one is what a budgeted
request shows as the dialog summary); a task's workspace summary is kind `workspace`.
Rows are appended, never changed: the newest of a kind wins, the older ones are the log
of what each compaction replaced.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from mindloop.store import schema as t
from mindloop.store.memo import MISS
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store


class SummaryKind(StrEnum):
    DIALOG = "dialog"
    WORKSPACE = "workspace"


class SummaryRecord(BaseModel):
    id: int = 0
    task_path: str
    dialog_id: str | None = None
    kind: SummaryKind
    course: int | None = None
    writer: str  # the phase that wrote it, or `compaction`
    text: str
    data: dict[str, Any] = Field(default_factory=dict)
    created_at: float = 0.0


_s = t.summaries.c
_INSERT = sa.insert(t.summaries)
_LATEST_OF_DIALOG = (
    sa.select(t.summaries)
    .where(_s.dialog_id == sa.bindparam("dialog_id"), _s.kind == sa.bindparam("kind"))
    .order_by(_s.id.desc())
    .limit(1)
)
_LATEST_OF_COURSE = (
    sa.select(t.summaries)
    .where(
        _s.dialog_id == sa.bindparam("dialog_id"),
        _s.kind == sa.bindparam("kind"),
        _s.course == sa.bindparam("course"),
    )
    .order_by(_s.id.desc())
    .limit(1)
)
_LATEST_OF_TASK = (
    sa.select(t.summaries)
    .where(_s.task_path == sa.bindparam("task_path"), _s.kind == sa.bindparam("kind"))
    .order_by(_s.id.desc())
    .limit(1)
)
_ALL_OF_DIALOG = (
    sa.select(t.summaries).where(_s.dialog_id == sa.bindparam("dialog_id")).order_by(_s.id)
)


class Summaries:
    """The `summaries` table of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, rec: SummaryRecord) -> SummaryRecord:
        """Append a summary (joining the caller's transaction, if any)."""
        row = rec.model_dump(exclude={"id"})
        row["created_at"] = rec.created_at or time.time()
        new_id = self.store._insert(_INSERT, row)
        return rec.model_copy(update={"id": new_id, "created_at": row["created_at"]})

    def latest(
        self,
        kind: SummaryKind,
        *,
        dialog_id: str | None = None,
        task_path: str | None = None,
        course: int | None = None,
    ) -> SummaryRecord | None:
        """The newest summary of `kind` for a dialog (and course), or for a task."""
        if dialog_id is not None and course is not None:
            params: dict[str, Any] = {"dialog_id": dialog_id, "kind": kind, "course": course}
            stmt = _LATEST_OF_COURSE
        elif dialog_id is not None:
            params, stmt = {"dialog_id": dialog_id, "kind": kind}, _LATEST_OF_DIALOG
        elif task_path is not None:
            params, stmt = {"task_path": task_path, "kind": kind}, _LATEST_OF_TASK
        else:
            raise ValueError("latest() needs a dialog_id or a task_path")
        # kept while nothing wrote a summary (`Store.memo_get`): read at every request
        key = (t.summaries.name, "latest", *params.items())
        held = self.store.memo_get(key)
        if held is MISS:
            found = self.store._records(SummaryRecord, stmt, params)
            held = found[0] if found else None
            self.store.memo_put(key, held)
        return None if held is None else held.model_copy(deep=True)

    def of_dialog(self, dialog_id: str) -> list[SummaryRecord]:
        """Every summary of a dialog, oldest first (the compaction log)."""
        return self.store._records(SummaryRecord, _ALL_OF_DIALOG, {"dialog_id": dialog_id})


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
