"""The work loop's state of each task: its phase, the phase's entry, how the phase ended.

A task's row in `tasks` (`store/tasks.py`: one loop root per `*.tsk` package, DESIGN.md
§8.7) holds the loop's state: the fields people and the Router look at — phase, status
and why, re-plans — in columns, the rest — which entry of the phase this is, the input
message it posted, how it ended, the last summary — in its `loop_state` JSON column.
Every loop write is one `UPDATE` of that row guarded by its `version`, so a `mindloop
run` killed at any instant resumes exactly there:

- a phase is *entered* in one transaction that posts its input message to the loop root
  and records the entry (`entry`, `entry_message_id`): a crash leaves both or neither;
- a phase *ends* when its `phase_end` call's result commits (the record is a store effect
  of that result), or, for an end the runtime decides (a reply without tool calls, the
  phase's step cap), in the transaction that records it;
- routing reads the ended phase and enters the next one.

Rows in, rows out: the loop (`mindloop.loop`) decides; this module only reads and writes,
each write joining the caller's transaction.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mindloop.store.cursors import Cursors
from mindloop.store.memo import MISS
from mindloop.store.schema import tasks as _tasks_table
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store
from mindloop.store.tasks import LoopPhase as Phase
from mindloop.store.tasks import TaskRecord
from mindloop.store.tasks import TaskStatus as LoopStatus


class Hint(StrEnum):
    """`phase_end.next_behavior`: the model's proposal; the runtime decides (§4)."""

    PLAN = "PLAN"
    DO = "DO"
    CHECK = "CHECK"
    ADJUST = "ADJUST"
    WAIT = "WAIT"
    END = "END"


class EndedBy(StrEnum):
    """How a phase ended."""

    TOOL = "phase_end"  # the model called phase_end
    REPLY = "reply"  # a reply without tool calls or tellasks (phase_end without a hint)
    STEP_CAP = "step_cap"  # the phase's step cap was reached
    RUNTIME = "runtime"  # the runtime ended it (e.g. nothing left for it to do)
    STALE = "stale"  # resumed after a wait with a stale context: back to PLAN (§6.3)


class Summary(BaseModel):
    """`phase_end.summary` (≤ 300 tokens): the next phase's "last step summary"."""

    model_config = ConfigDict(extra="forbid")

    progress: str = ""
    key_decisions: list[str] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)


class PhaseEnd(BaseModel):
    """How the current phase ended: the hint (None: none was given), summary, reason."""

    by: EndedBy
    hint: Hint | None = None
    summary: Summary = Field(default_factory=Summary)
    reason: str = ""
    at: float = 0.0


class LoopState(BaseModel):
    """Where a task's loop stands: its `tasks` row (id, package, root, phase, status,
    re-plans, version) and the loop's cursor (the rest). A value: changed by
    `model_copy(update=…)` and `save`, never in place (reads share it)."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    task_path: str
    root_id: str
    status: LoopStatus = LoopStatus.ACTIVE
    status_reason: str = ""
    phase: Phase | None = None  # the phase entered last (None: none yet)
    entry: int = 0  # phase entries so far; the current one's number
    entry_message_id: int = 0  # the input message the current entry posted
    entered_at: float = 0.0  # when the current entry started
    entry_steps: int = 0  # model steps the current entry took so far
    # model steps, and US dollars, since the human last said something (a message to the
    # loop root, an answer to a question of the task: `human_spoke`); their caps are
    # `loop.retries.drive_steps` and `caps.drive.max_cost`
    drive_steps: int = 0
    drive_cost: float = 0.0
    node_id: str | None = None  # the node the current entry works (DO, ADJUST)
    # CHECK: the nodes it verifies; ADJUST in plan mode: the nodes R5 blocked on entry
    targets: list[str] = Field(default_factory=list)
    ended: PhaseEnd | None = None  # None while the current phase runs
    closed: bool = False  # the ended phase's bookkeeping is done (`loop.phase_ops.close`)
    last_summary: Summary | None = None  # of the phase that ended last
    plan_reentries: int = 0  # ADJUST → PLAN so far (once per task)
    new_scope: bool = False  # a message brought new scope: PLAN (R6)
    planned: bool = False  # PLAN ran for the current scope (R6 then needs new scope)
    hints_dropped: int = 0  # illegal hints (HINT_ILLEGAL)
    refusals: int = 0  # calls and tellasks refused as not allowed in the phase
    self_improved: bool = False  # SELF_IMPROVE ran after the nodes became terminal
    # SELF_IMPROVE: where its cursor goes once the entry closes (the batch it was shown)
    batch_end: dict[str, int] | None = None
    # SELF_IMPROVE: where the pass ends, its first entry's input (`loop.review_pass`),
    # and that entry's number: the pass is one self.md run (`loop.self_md`)
    pass_until: dict[str, int] | None = None
    pass_entry: int = 0
    # the staleness check on resume (§6.3): the root's waits closed up to this time are
    # judged; a stale context sends the task back to PLAN once
    stale_checked_at: float = 0.0
    replan_stale: bool = False  # PLAN next (a stale resume), unless R0/R1 hold
    stale_replanned: bool = False  # that happened once already
    version: int = 1
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def in_phase(self) -> bool:
        """A phase was entered (its input posted) and has not ended."""
        return self.phase is not None and self.ended is None


_ROW = frozenset({"phase", "status", "status_reason", "plan_reentries", "version"})
_BINDING = frozenset({"task_id", "task_path", "root_id", "created_at", "updated_at"})
_IN_COLUMNS = set(_ROW | _BINDING)  # the rest is the row's `loop_state`


class StaleLoopState(Exception):
    """A loop write found the task at another version (another writer moved it first)."""


def _compose(task: TaskRecord, rest: dict[str, Any] | None) -> LoopState:
    return LoopState.model_validate(
        {
            **(rest or {}),
            "task_id": task.id,
            "task_path": task.task_path,
            "root_id": task.root_id,
            "phase": task.phase,
            "status": task.status,
            "status_reason": task.status_reason or "",
            "plan_reentries": task.plan_reentries,
            "version": task.version,
            "created_at": task.created_at,
            "updated_at": task.updated_at,
        }
    )


# The last state read or written of each task, per store: the task's row identifies it
# (its `loop_state` changes only with a version bump), so a read whose row matches costs
# a look at that row, not a validation of the whole.
_held: weakref.WeakKeyDictionary[Store, dict[str, LoopState]] = weakref.WeakKeyDictionary()
# the key of the row `TaskRows.task_by_path` keeps (`Store.memo_get`)
_TASKS = _tasks_table.name


def _hold(store: Store, state: LoopState) -> LoopState:
    _held.setdefault(store, {})[state.task_path] = state
    return state


# A state changed in a transaction and not written yet (`stage`), per store and task.
_staged: weakref.WeakKeyDictionary[Store, dict[str, LoopState]] = weakref.WeakKeyDictionary()


def stage(store: Store, state: LoopState) -> LoopState:
    """Hold `state` — the task's state as stored (at its version), changed in the
    caller's transaction — to be written later in that transaction, with what changes
    next: reads in it (`get`, `by_root`) return it, the task's next `save` (of a state
    read through them, or made from this one) writes it, and `flush` writes it if no save
    did before the transaction ends (`discard` when it rolls back). Two writes of the row
    in one transaction become one."""
    _staged.setdefault(store, {})[state.task_path] = state
    return state


def flush(store: Store, task_path: str) -> LoopState | None:
    """Write the task's staged state if no save wrote it yet: the state written."""
    staged = _staged.get(store, {}).get(task_path)
    return save(store, staged) if staged is not None else None


def discard(store: Store, task_path: str) -> None:
    """Forget the task's staged state (its transaction rolled back)."""
    _staged.get(store, {}).pop(task_path, None)


def _of(store: Store, task: TaskRecord | None) -> LoopState | None:
    if task is None:
        return None
    staged = _staged.get(store, {}).get(task.task_path)
    if staged is not None and (staged.version, staged.updated_at) == (
        task.version,
        task.updated_at,
    ):
        return staged
    held = _held.get(store, {}).get(task.task_path)
    if held is not None and held.version == task.version and held.updated_at == task.updated_at:
        return held
    value = task.loop_state
    if value and value.get("checked"):  # written before the marks had rows of their own
        record_checks(
            store, task.root_id, {n: (at, ref) for n, (at, ref) in value["checked"].items()}
        )
    return _hold(store, _compose(task, value))


# A node's passing CHECK (when, workspace ref), the BENCH rule's condition 3: a cursor of
# its own per node (scope the loop root), so the loop state written at every phase does
# not carry a map that grows with the tree.
CHECKED = "checked:"


def record_checks(store: Store, root_id: str, marks: Mapping[str, tuple[float, str]]) -> None:
    """Record passing CHECKs (joins the caller's transaction)."""
    cursors = Cursors(store)
    with store.tx():
        for node, (at, ref) in marks.items():
            cursors.set(root_id, CHECKED + node, {"at": at, "ref": ref})


def checks(store: Store, root_id: str) -> dict[str, tuple[float, str]]:
    """node -> (when, workspace ref) of its latest passing CHECK."""
    return {
        c.name.removeprefix(CHECKED): (float(c.value["at"]), str(c.value["ref"]))
        for c in Cursors(store).with_prefix(root_id, CHECKED)
    }


# The per-drive step limit the task's last `run TASK --max-steps N` gave (the scale-out
# workers: a drive of its tree enqueued after that run's workflow ended — an answer, a
# decision — takes it, not the workers' default). A cursor of its own: written by `run`
# while the loop may be writing its state, without a version race.
STEP_LIMIT = "step_limit"


def record_step_limit(store: Store, root_id: str, max_steps: int) -> None:
    """Record the task's run's per-drive step limit (joins the caller's transaction)."""
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, not {max_steps}")
    Cursors(store).set(root_id, STEP_LIMIT, {"max_steps": max_steps})


def step_limit(store: Store, root_id: str) -> int | None:
    """The per-drive step limit of the task's last run (None: none was recorded)."""
    found = Cursors(store).get(root_id, STEP_LIMIT)
    value = found.value.get("max_steps") if found is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def get(store: Store, task_path: str) -> LoopState | None:
    """The loop state of a task (None: it has no loop root yet). The task's row comes
    from the store's memo while nobody else wrote it; a state held for that row is
    handed out without reading its cursor (nor copying the row: only its version and
    `updated_at` are looked at)."""
    known = _staged.get(store, {}).get(task_path) or _held.get(store, {}).get(task_path)
    if known is not None:
        row = store.memo_get((_TASKS, "path", task_path))
        at = (row.version, row.updated_at) if row is not MISS and row is not None else None
        if at == (known.version, known.updated_at):
            return known
    return _of(store, store.task_by_path(task_path))


def by_root(store: Store, root_id: str) -> LoopState | None:
    """The loop state of the task whose loop root is `root_id` (None: a free root)."""
    return _of(store, store.task_by_root(root_id))


def all_states(store: Store) -> list[LoopState]:
    return [s for t in store.iter_tasks() if (s := _of(store, t)) is not None]


def save(store: Store, state: LoopState, **changes: Any) -> LoopState:
    """Write `state`, with `changes` to its fields, over the task it was read from (at
    `state.version`); the new state. `StaleLoopState` when another writer moved the task
    first."""
    now = time.time()
    # what a read composes from the row as written — its version the next one (the write
    # is guarded by this one), its time this write's — made before the write: one copy
    # of the state (a row that reads otherwise is composed again by `get`)
    written = state.model_copy(update={**changes, "version": state.version + 1, "updated_at": now})
    with store.tx():
        task = store.update_task(
            state.task_id,
            expected_version=state.version,
            now=now,
            phase=written.phase,
            status=written.status,
            status_reason=written.status_reason or None,
            plan_reentries=written.plan_reentries,
            # what is None is left out (every field that may be None defaults to None):
            # a smaller document, and one whose text has no `null` to look into again
            # (`json_text.dumps`)
            loop_state=written.model_dump(mode="json", exclude=_IN_COLUMNS, exclude_none=True),
        )
        if task is None:
            raise StaleLoopState(
                f"the loop state of {state.task_path} is no longer at version {state.version}"
            )
    discard(store, state.task_path)  # a staged state is written with this one
    return _hold(store, written)


# Tasks whose phase ends `end_phase` stages instead of writing, per store: the loop that
# drives the task's root writes (or flushes) the end before its tool step commits
# (`defer_ends`).
_deferring: weakref.WeakKeyDictionary[Store, set[str]] = weakref.WeakKeyDictionary()


def defer_ends(store: Store, task_path: str, on: bool) -> None:
    """While `on`, the task's `end_phase` stages the end (`stage`) in the caller's
    transaction rather than writing it: the caller — the loop driving the task's root,
    whose tool steps' commit hook runs in every transaction that records an end — writes
    it with what follows (the phase closed and the next one entered) or `flush`es it
    before that transaction commits (and `discard`s it if it rolls back)."""
    tasks = _deferring.setdefault(store, set())
    if on:
        tasks.add(task_path)
    else:
        tasks.discard(task_path)


def end_phase(store: Store, root_id: str, end: PhaseEnd) -> LoopState | None:
    """Record how the current phase of the loop rooted at `root_id` ended (joins the
    caller's transaction; staged while its task `defer_ends`). The first end wins: a
    phase that already ended, or a dialog that is no task's loop root, is left as it is
    (None)."""
    with store.tx():
        state = by_root(store, root_id)
        if state is None or not state.in_phase:
            return None
        ended = state.model_copy(update={"ended": end})
        if state.task_path in _deferring.get(store, ()):
            return stage(store, ended)
        return save(store, ended)


def human_spoke(store: Store, root_id: str) -> None:
    """The human said something to the task whose loop root is `root_id` (a message to
    the root, an answer to a question of its tree): the loop's drive count — steps and
    cost since their last word (agent-loop §8.2) — starts again. Joins the caller's
    transaction, the one recording what they said; nothing for a dialog that is no
    task's loop root, or a count at zero."""
    with store.tx():
        state = by_root(store, root_id)
        if state is None or (state.drive_steps == 0 and state.drive_cost == 0.0):
            return
        save(store, state, drive_steps=0, drive_cost=0.0)


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
