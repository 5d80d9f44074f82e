"""The work loop's state of each task: its phase, the phase's entry, how the phase ended.

One row per task binds its `*.tsk` package to the root dialog its loop drives and says
where the loop stands, so a `mindloop run` killed at any instant resumes exactly there:

- a phase is *entered* in one transaction that posts its input message to the loop root
  and records the entry (`entry`, `entry_message_id`): a crash leaves both or neither;
- a phase *ends* when its `phase_end` call's result commits (the record is a store effect
  of that result), or, for an end the runtime decides (a reply without tool calls, the
  phase's step cap), in the transaction that records it;
- routing reads the ended phase and enters the next one.

Rows in, rows out: the loop (`mindloop.loop`) decides; this module only reads and writes,
each write joining the caller's transaction and guarded by the row's `version`.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field

from mindloop.store import schema as t
from mindloop.store.store import Store


class Phase(StrEnum):
    """The phases a task's loop root goes through (agent-loop §3; the Router is a
    standalone call, not a phase of the root)."""

    PLAN = "PLAN"
    DO = "DO"
    CHECK = "CHECK"
    ADJUST = "ADJUST"
    SELF_IMPROVE = "SELF_IMPROVE"


class Hint(StrEnum):
    """`phase_end.next_behavior`: the model's proposal; the runtime decides (§4)."""

    PLAN = "PLAN"
    DO = "DO"
    CHECK = "CHECK"
    ADJUST = "ADJUST"
    WAIT = "WAIT"
    END = "END"


class LoopStatus(StrEnum):
    ACTIVE = "ACTIVE"  # the loop has work to do
    WAITING = "WAITING"  # parked: on the human, or every open node waits (R1, R7)
    DONE = "DONE"  # every node terminal and SELF_IMPROVE ran
    FAILED = "FAILED"  # a node FAILED at its cap and nothing else can go on


class EndedBy(StrEnum):
    """How a phase ended."""

    TOOL = "phase_end"  # the model called phase_end
    REPLY = "reply"  # a reply without tool calls or tellasks (phase_end without a hint)
    STEP_CAP = "step_cap"  # the phase's step cap was reached
    RUNTIME = "runtime"  # the runtime ended it (e.g. nothing left for it to do)


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
    """Where a task's loop stands (the row's `data`, plus its columns)."""

    task_path: str
    root_id: str
    status: LoopStatus = LoopStatus.ACTIVE
    status_reason: str = ""
    phase: Phase | None = None  # the phase entered last (None: none yet)
    entry: int = 0  # phase entries so far; the current one's number
    entry_message_id: int = 0  # the input message the current entry posted
    entered_at: float = 0.0  # when the current entry started
    entry_steps: int = 0  # model steps the current entry took so far
    drive_steps: int = 0  # model steps since the human last said something (the cap)
    node_id: str | None = None  # the node the current entry works (DO, ADJUST)
    targets: list[str] = Field(default_factory=list)  # CHECK: the nodes it verifies
    ended: PhaseEnd | None = None  # None while the current phase runs
    closed: bool = False  # the ended phase's bookkeeping is done (`loop.phase_ops.close`)
    last_summary: Summary | None = None  # of the phase that ended last
    # node -> (when, workspace ref) of its passing CHECK: the BENCH rule's condition 3
    checked: dict[str, tuple[float, str]] = Field(default_factory=dict)
    plan_reentries: int = 0  # ADJUST → PLAN so far (once per task)
    new_scope: bool = False  # a message brought new scope: PLAN (R6)
    hints_dropped: int = 0  # illegal hints (HINT_ILLEGAL)
    refusals: int = 0  # calls and tellasks refused as not allowed in the phase
    self_improved: bool = False  # SELF_IMPROVE ran after the nodes became terminal
    version: int = 1
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def in_phase(self) -> bool:
        """A phase was entered (its input posted) and has not ended."""
        return self.phase is not None and self.ended is None


_c = t.loop_state.c
_COLUMNS = ("task_path", "root_id", "status", "phase", "version", "updated_at")
_BY_PATH = sa.select(t.loop_state).where(_c.task_path == sa.bindparam("task_path"))
_BY_ROOT = sa.select(t.loop_state).where(_c.root_id == sa.bindparam("root_id"))
_ALL = sa.select(t.loop_state).order_by(_c.task_path)
_INSERT = sa.insert(t.loop_state)
_UPDATE = (
    sa.update(t.loop_state)
    .where(_c.task_path == sa.bindparam("_task"), _c.version == sa.bindparam("_version"))
    .values(
        status=sa.bindparam("status"),
        phase=sa.bindparam("phase"),
        version=sa.bindparam("version"),
        data=sa.bindparam("data"),
        updated_at=sa.bindparam("updated_at"),
    )
)


class StaleLoopState(Exception):
    """A loop write found the row at another version (another writer moved it first)."""


def _from_row(row: dict[str, Any]) -> LoopState:
    return LoopState.model_validate({**row["data"], **{k: row[k] for k in _COLUMNS}})


def _rows(store: Store, stmt: sa.Executable, params: dict[str, Any]) -> list[LoopState]:
    keys, rows = store._execute(stmt, params)
    return [_from_row(dict(zip(keys, r, strict=True))) for r in rows]


def _data(state: LoopState) -> dict[str, Any]:
    return state.model_dump(mode="json", exclude=set(_COLUMNS) | {"created_at"}) | {
        "created_at": state.created_at
    }


def get(store: Store, task_path: str) -> LoopState | None:
    found = _rows(store, _BY_PATH, {"task_path": task_path})
    return found[0] if found else None


def by_root(store: Store, root_id: str) -> LoopState | None:
    found = _rows(store, _BY_ROOT, {"root_id": root_id})
    return found[0] if found else None


def all_states(store: Store) -> list[LoopState]:
    return _rows(store, _ALL, {})


def insert(store: Store, state: LoopState) -> LoopState:
    now = time.time()
    state = state.model_copy(update={"version": 1, "created_at": now, "updated_at": now})
    store._write(
        _INSERT,
        {
            "task_path": state.task_path,
            "root_id": state.root_id,
            "status": state.status.value,
            "phase": state.phase.value if state.phase else None,
            "version": 1,
            "data": _data(state),
            "updated_at": now,
        },
    )
    return state


def save(store: Store, state: LoopState) -> LoopState:
    """Write `state` over the row it was read from (at `state.version`); the new state
    (version + 1). `StaleLoopState` when another writer moved the row first."""
    now = time.time()
    new = state.model_copy(update={"version": state.version + 1, "updated_at": now})
    changed = store._write(
        _UPDATE,
        {
            "_task": state.task_path,
            "_version": state.version,
            "status": new.status.value,
            "phase": new.phase.value if new.phase else None,
            "version": new.version,
            "data": _data(new),
            "updated_at": now,
        },
    )
    if changed != 1:
        raise StaleLoopState(
            f"the loop state of {state.task_path} is no longer at version {state.version}"
        )
    return new


def end_phase(store: Store, root_id: str, end: PhaseEnd) -> LoopState | None:
    """Record how the current phase of the loop rooted at `root_id` ended (joins the
    caller's transaction). The first end wins: a phase that already ended, or a dialog
    that is no task's loop root, is left as it is (None)."""
    with store.tx():
        state = by_root(store, root_id)
        if state is None or not state.in_phase:
            return None
        return save(store, state.model_copy(update={"ended": end}))
