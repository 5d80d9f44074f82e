"""Retry records: every L2 self-repair attempt and L3 ADJUST cycle of a node (agent-loop
§8.3), appended in the step's transaction. The loop's rules (`mindloop.loop.retries`)
read a node's earlier records to reject a retry that repeats one; the row here is the
neutral, stored form of its `RetryRecord`.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from pydantic import BaseModel, Field

from mindloop.store import schema as t
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store


class RetryRow(BaseModel):
    id: int = 0
    task_path: str
    todo_id: str
    level: str
    entry: int = 0  # L2: the node's DO entry the attempt belongs to
    attempt: int
    failure_class: str
    evidence_digest: str
    evidence_refs: list[str] = Field(default_factory=list)
    reflection: str = ""
    change_kind: str
    change_summary: str = ""
    fingerprint: str
    relaxes_acceptance: bool = False
    approval_id: str | None = None
    created_at: float = 0.0


_r = t.retry_records.c
_INSERT = sa.insert(t.retry_records)
_OF_NODE = (
    sa.select(t.retry_records)
    .where(_r.task_path == sa.bindparam("task_path"), _r.todo_id == sa.bindparam("todo_id"))
    .order_by(_r.id)
)
_OF_TASK = (
    sa.select(t.retry_records).where(_r.task_path == sa.bindparam("task_path")).order_by(_r.id)
)


class RetryRows:
    """The `retry_records` table of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, row: RetryRow) -> RetryRow:
        """Append a record (joining the caller's transaction, if any)."""
        data = row.model_dump(exclude={"id"})
        data["created_at"] = row.created_at or time.time()
        new_id = self.store._insert(_INSERT, data)
        return row.model_copy(update={"id": new_id, "created_at": data["created_at"]})

    def of_node(self, task_path: str, todo_id: str) -> list[RetryRow]:
        """A node's records, oldest first."""
        return self.store._records(RetryRow, _OF_NODE, {"task_path": task_path, "todo_id": todo_id})

    def of_task(self, task_path: str) -> list[RetryRow]:
        return self.store._records(RetryRow, _OF_TASK, {"task_path": task_path})


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
