"""Durable runtime state: a neutral store body on SQLAlchemy Core (`store.py`) over a
database dialect (`dialect.py`; SQLite in `sqlite.py`, the default)."""

from mindloop.store.records import (
    DialogKind,
    DialogRecord,
    DialogStatus,
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
from mindloop.store.router_log import RouterAttempt, RouterCandidate, RouterDecision, RouterRecord
from mindloop.store.store import STATE_DIR, STATE_FILE, IdTaken, Store, StoreError, new_id
from mindloop.store.tasks import LoopPhase, TaskRecord, TaskStatus

__all__ = [
    "STATE_DIR",
    "STATE_FILE",
    "DialogKind",
    "DialogRecord",
    "DialogStatus",
    "GenerationRecord",
    "IdTaken",
    "LoopPhase",
    "MessageKind",
    "MessageRecord",
    "PendingTellask",
    "QuestionRecord",
    "Reminder",
    "ResponseRecord",
    "RouterAttempt",
    "RouterCandidate",
    "RouterDecision",
    "RouterRecord",
    "Store",
    "StoreError",
    "TaskRecord",
    "TaskStatus",
    "TaskdocChange",
    "UsageTotals",
    "WaitRecord",
    "WaitStatus",
    "new_id",
]
