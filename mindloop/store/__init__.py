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
from mindloop.store.store import STATE_DIR, STATE_FILE, Store, StoreError, new_id

__all__ = [
    "STATE_DIR",
    "STATE_FILE",
    "DialogKind",
    "DialogRecord",
    "DialogStatus",
    "GenerationRecord",
    "MessageKind",
    "MessageRecord",
    "PendingTellask",
    "QuestionRecord",
    "Reminder",
    "ResponseRecord",
    "Store",
    "StoreError",
    "TaskdocChange",
    "UsageTotals",
    "WaitRecord",
    "WaitStatus",
    "new_id",
]
