"""Whether what a dialog knew before a wait still holds when it resumes (agent-loop §6.3
Resume).

When a wait opens, the task is photographed (`WaitSnapshot`): the workspace ref (git
HEAD, or a tree hash without git) and a hash of the Taskdoc's `goals.md` and
`constraints.md`. When the dialog resumes, the resolved waits are compared with the task
as it is now (`staleness`), giving a typed `Staleness` the loop acts on: no signal, go on;
one signal, add a "context may be stale" note and reload the workspace summary; two or
more, route to PLAN (which the loop does once per task).

The workspace ref comes from a `WorkspaceRef` callable handed to the runtime (the
workspace package provides one); without it the workspace signal is never raised.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, Field

from mindloop.errors import MindloopError
from mindloop.store import WaitRecord
from mindloop.taskdoc import TaskPackage

# The Taskdoc sections whose change makes a resumed dialog's plan questionable.
WATCHED_SECTIONS = ("goals.md", "constraints.md")


class WorkspaceRef(Protocol):
    """The current workspace ref of a task (rtws-relative package path): git HEAD, or a
    tree hash without git; None when the task has no workspace yet."""

    def __call__(self, task_path: str) -> str | None: ...


class WaitSnapshot(BaseModel):
    """The task when a wait opened (the wait record's `snapshot`)."""

    workspace_ref: str | None = None
    taskdoc_hash: str | None = None


class StaleSignal(StrEnum):
    WORKSPACE_CHANGED = "workspace_changed"
    TASKDOC_CHANGED = "taskdoc_changed"  # goals.md or constraints.md
    WAITED_LONG = "waited_long"  # longer than `loop.waits.stale_after`


class StaleAction(StrEnum):
    NONE = "none"  # go on
    NOTE = "note"  # add a "context may be stale" note, reload the workspace summary
    REPLAN = "replan"  # route to PLAN (once per task)


class Staleness(BaseModel):
    signals: list[StaleSignal] = Field(default_factory=list)
    waited: float = 0.0  # seconds the longest of the waits was open
    waits: list[str] = Field(default_factory=list)  # the waits judged

    @property
    def action(self) -> StaleAction:
        if not self.signals:
            return StaleAction.NONE
        return StaleAction.NOTE if len(self.signals) == 1 else StaleAction.REPLAN


def taskdoc_hash(rtws: Path, task_path: str) -> str | None:
    """A hash of the watched sections as they are now (None: no such package)."""
    try:
        pkg = TaskPackage(rtws, task_path)
    except MindloopError:  # not a package path (a dialog of a test, a removed package)
        return None
    if not pkg.exists():
        return None
    h = hashlib.sha256()
    for rel in WATCHED_SECTIONS:
        text = pkg.read_section_or_none(rel)
        h.update(rel.encode() + b"\0" + (text or "").encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def snapshot(rtws: Path, task_path: str, workspace_ref: WorkspaceRef | None) -> WaitSnapshot:
    return WaitSnapshot(
        workspace_ref=workspace_ref(task_path) if workspace_ref is not None else None,
        taskdoc_hash=taskdoc_hash(rtws, task_path),
    )


def staleness(
    waits: Iterable[WaitRecord],
    now_snapshot: WaitSnapshot,
    *,
    stale_after: float,
    now: float | None = None,
) -> Staleness:
    """The staleness signals of resuming after `waits` (their snapshots against the task
    now); each signal counts once however many waits raise it."""
    now = time.time() if now is None else now
    found: set[StaleSignal] = set()
    judged: list[str] = []
    waited = 0.0
    for rec in waits:
        judged.append(rec.id)
        end = rec.resolved_at if rec.resolved_at is not None else now
        waited = max(waited, end - rec.created_at)
        if rec.snapshot is None:
            continue
        then = WaitSnapshot.model_validate(rec.snapshot)
        if then.workspace_ref is not None and then.workspace_ref != now_snapshot.workspace_ref:
            found.add(StaleSignal.WORKSPACE_CHANGED)
        if then.taskdoc_hash is not None and then.taskdoc_hash != now_snapshot.taskdoc_hash:
            found.add(StaleSignal.TASKDOC_CHANGED)
    if waited > stale_after:
        found.add(StaleSignal.WAITED_LONG)
    return Staleness(signals=[s for s in StaleSignal if s in found], waited=waited, waits=judged)
