"""The `tasks` table: one loop root per task (DESIGN.md §8.7).

A row binds a `*.tsk` package to the root dialog its work loop drives, and holds the
loop's state of the task (phase, status, how often ADJUST went back to PLAN). Other root
dialogs on the same package (`mindloop chat --task`) have no row: they are free dialogs
that see the same Taskdoc.

Writes by the loop carry the row's `version` (`update_task(..., expected_version=)`), so
two writers never both move a task from the same state. Binding a package to its loop
root is get-or-create under the write lock (`loop.tasks.loop_root`); the unique
constraints on `task_path` and `root_id` make a lost race an error instead of a second
root, on every database.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field

from mindloop.errors import NotFoundError
from mindloop.store import schema as t
from mindloop.store.errors import StoreError
from mindloop.store.memo import MISS
from mindloop.store.statements import prebuilt

_R = TypeVar("_R", bound=BaseModel)


class TaskAlreadyBound(StoreError):
    """The package, or the root dialog, of a new task row is bound already (another
    process won the race to create the task's loop root)."""


class TaskStatus(StrEnum):
    """Where a task's loop stands."""

    ACTIVE = "ACTIVE"  # the loop has work to do
    WAITING = "WAITING"  # parked on the human or on waits (agent-loop §4, R1/R7)
    DONE = "DONE"
    FAILED = "FAILED"


class LoopPhase(StrEnum):
    """The phases of a task's loop root (agent-loop §3; the Router is a standalone call,
    not a phase of the root)."""

    PLAN = "PLAN"
    DO = "DO"
    CHECK = "CHECK"
    ADJUST = "ADJUST"
    SELF_IMPROVE = "SELF_IMPROVE"


class TaskRecord(BaseModel):
    """A task: its package, its loop root, and the loop's state of it. A value (changed
    by `model_copy(update=…)`, never in place): the rows the store keeps are handed out
    as they are."""

    model_config = ConfigDict(frozen=True)

    id: str
    task_path: str  # rtws-relative path of the package, as dialogs record it
    root_id: str  # the loop root dialog
    topic: str  # one line, shown to the Router and in listings
    phase: LoopPhase | None = None  # None until the loop first enters a phase
    status: TaskStatus = TaskStatus.ACTIVE
    status_reason: str | None = None  # why it is WAITING or FAILED
    plan_reentries: int = 0  # ADJUST → PLAN so far (`loop.retries.plan_reentries`)
    version: int = 1
    created_at: float = 0.0
    updated_at: float = 0.0
    # the rest of the loop's state, as `store.loop_state` writes it (None: never written);
    # not part of the record's dump (a new task starts without one)
    loop_state: dict[str, Any] | None = Field(default=None, exclude=True, repr=False)


_c = t.tasks.c
INSERT_TASK = sa.insert(t.tasks)
TASK_BY_ID = sa.select(t.tasks).where(_c.id == sa.bindparam("id"))
TASK_BY_PATH = sa.select(t.tasks).where(_c.task_path == sa.bindparam("task_path"))
TASK_BY_ROOT = sa.select(t.tasks).where(_c.root_id == sa.bindparam("root_id"))
RECENT_TASKS = sa.select(t.tasks).order_by(_c.updated_at.desc(), _c.id).limit(sa.bindparam("limit"))
# A loop write: the SET clause comes from the parameter keys (besides `_id`, `_version`).
UPDATE_TASK = (
    sa.update(t.tasks)
    .where(_c.id == sa.bindparam("_id"))
    .values(version=_c.version + 1)
    .returning(*t.tasks.c)  # the record as it now stands: no read after each loop write
)
# … at the version the writer read: the new one is that plus one, and the record is the
# row kept for that version with the write's fields (returned only when none is kept)
UPDATE_TASK_AT = (
    sa.update(t.tasks)
    .where(_c.id == sa.bindparam("_id"), _c.version == sa.bindparam("_version"))
    .values(version=_c.version + 1)
)
TOUCH_TASK = (
    sa.update(t.tasks).where(_c.id == sa.bindparam("_id")).values(updated_at=sa.bindparam("_now"))
)
# The fields a loop write may change (not the binding: package and root are for life),
# and how a kept record takes each value it is given (an enum field from its value).
_AS_FIELD: dict[str, Any] = {
    "topic": str,
    "phase": lambda v: v if v is None or type(v) is LoopPhase else LoopPhase(v),
    "status": lambda v: v if type(v) is TaskStatus else TaskStatus(v),
    "status_reason": lambda v: v,
    "plan_reentries": int,
    "loop_state": lambda v: v,
}
UPDATABLE = frozenset(_AS_FIELD)


_TASKS = t.tasks.name  # the first item of the keys this module keeps (`Store.memo_get`)


class TaskRows:
    """The store's methods on `tasks` (a base of `Store`)."""

    if TYPE_CHECKING:  # provided by Store

        def tx(self, *, durable: bool = True) -> AbstractContextManager[sa.Connection]: ...
        def _write(self, stmt: sa.Executable, params: Any = None) -> int: ...
        def _records(
            self, model: type[_R], stmt: sa.Executable, params: dict[str, Any] | None = None
        ) -> list[_R]: ...
        def _write_returning(
            self, model: type[_R], stmt: sa.Executable, params: dict[str, Any]
        ) -> list[_R]: ...
        def memo_get(self, key: tuple[Any, ...]) -> Any: ...
        def memo_put(self, key: tuple[Any, ...], value: Any) -> None: ...

    def insert_task(self, rec: TaskRecord) -> TaskRecord:
        """Add a task row (created and updated now, version 1). `TaskAlreadyBound` when
        the package or the root is bound already: the caller's transaction is then rolled
        back (on PostgreSQL a failed statement spoils it), so read the winner's row in a
        new one."""
        now = time.time()
        rec = rec.model_copy(update={"created_at": now, "updated_at": now, "version": 1})
        try:
            self._write(INSERT_TASK, rec.model_dump())
        except sa.exc.IntegrityError as exc:
            raise TaskAlreadyBound(
                f"{rec.task_path} (or dialog {rec.root_id}) already has a loop root"
            ) from exc
        return rec

    def get_task(self, task_id: str) -> TaskRecord:
        found = self._records(TaskRecord, TASK_BY_ID, {"id": task_id})
        if not found:
            raise NotFoundError(f"no task with id {task_id!r}")
        return found[0]

    def task_by_path(self, task_path: str) -> TaskRecord | None:
        """The task of a package (its rtws-relative path), if its loop root exists
        (kept like `task_by_root`'s)."""
        return self._task_by("path", TASK_BY_PATH, {"task_path": task_path})

    def task_by_root(self, root_id: str) -> TaskRecord | None:
        """The task whose loop root is `root_id` (None: a free root dialog, or no root).
        Kept while nothing else wrote a task (`Store.memo_get`; `update_task` puts the
        row it wrote); a record is a value, shared."""
        return self._task_by("root", TASK_BY_ROOT, {"root_id": root_id})

    def _task_by(self, by: str, stmt: sa.Executable, params: dict[str, str]) -> TaskRecord | None:
        key = (_TASKS, by, *params.values())  # `by` names the one parameter
        held = self.memo_get(key)
        if held is not MISS:
            return held  # type: ignore[no-any-return]
        found = self._records(TaskRecord, stmt, params)
        rec = found[0] if found else None
        if rec is None:
            self.memo_put(key, None)
        else:
            self._keep(rec)
        return rec

    def _keep(self, rec: TaskRecord) -> None:
        """Keep a task row just read or written, by root, by package and by id."""
        self.memo_put((_TASKS, "root", rec.root_id), rec)
        self.memo_put((_TASKS, "path", rec.task_path), rec)
        self.memo_put((_TASKS, "id", rec.id), rec)

    def recent_tasks(self, limit: int) -> list[TaskRecord]:
        """The `limit` most recently updated tasks, newest first."""
        return self._records(TaskRecord, RECENT_TASKS, {"limit": limit})

    def iter_tasks(self) -> Iterator[TaskRecord]:
        yield from self._records(TaskRecord, sa.select(t.tasks).order_by(_c.created_at, _c.id))

    def touch_task(self, task_id: str) -> None:
        """Mark the task active now (a message came in) without a loop write: its
        version, which guards the loop's own writes, stays."""
        self._write(TOUCH_TASK, {"_id": task_id, "_now": time.time()})

    def update_task(
        self,
        task_id: str,
        *,
        expected_version: int | None = None,
        now: float | None = None,
        **fields: Any,
    ) -> TaskRecord | None:
        """Change a task's loop state (`UPDATABLE` fields), bump its version and
        `updated_at` (to `now`, the time by default); with `expected_version`, only if the
        row is still at that version. The new record, or None when another writer changed
        it first."""
        if not UPDATABLE.issuperset(fields):
            unknown = set(fields) - UPDATABLE
            raise ValueError(f"update_task: not updatable: {', '.join(sorted(unknown))}")
        if now is None:
            now = time.time()
        params = {k: (str(v) if isinstance(v, StrEnum) else v) for k, v in fields.items()}
        params |= {"updated_at": now, "_id": task_id}
        with self.tx():
            if expected_version is None:
                changed = self._write_returning(TaskRecord, UPDATE_TASK, params)
                if not changed:
                    raise NotFoundError(f"no task with id {task_id!r}")
                rec = changed[0]  # the row as it now stands (the write dropped what was kept)
            else:
                kept = self.memo_get((_TASKS, "id", task_id))  # the write forgets it
                params["_version"] = expected_version
                if self._write(UPDATE_TASK_AT, params) == 0:
                    return None
                if kept is MISS or kept is None or kept.version != expected_version:
                    rec = self.get_task(task_id)
                else:  # that row with what this write changed
                    update = {k: _AS_FIELD[k](v) for k, v in fields.items()}
                    update |= {"version": expected_version + 1, "updated_at": now}
                    rec = kept.model_copy(update=update)
        self._keep(rec)
        return rec


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
