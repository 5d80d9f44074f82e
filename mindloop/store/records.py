"""Typed records that cross the store boundary."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

DialogKind = Literal["root", "side", "fbr"]


class DialogStatus(StrEnum):
    """Where a dialog stands between drives (persisted as its value)."""

    IDLE = "idle"  # answered, or nothing to do
    RUNNING = "running"  # a drive holds it (see the claim)
    WAITING = "waiting"  # waits on side dialogs, the human, or another wait
    ERROR = "error"  # its last drive stopped on an error (`run --retry-errors`)
    STOPPED = "stopped"  # its last drive reached the step limit (`run --retry-errors`)
    INTERRUPTED = "interrupted"  # a drive was cut off (Ctrl-C, crash): driven again

    @property
    def retriable(self) -> bool:
        """Stopped short of an answer: driven again only when asked to."""
        return self in (DialogStatus.ERROR, DialogStatus.STOPPED)


# Message kinds, in the order they can appear in a dialog's history.
MessageKind = Literal[
    "user",  # user/human text, or a runtime prompt sent as the user
    "assistant",  # assistant saying (text)
    "thinking",  # assistant reasoning output, never sent back to the model
    "tool_call",  # one function call requested by the model
    "tool_result",  # the result of one function call
    "note",  # runtime note shown to the model as user text (errors, notices)
    "tellask_result",  # a side dialog's answer, or a failed tellask
]


class DialogRecord(BaseModel):
    id: str
    root_id: str
    parent_id: str | None = None
    member: str
    task_path: str
    kind: DialogKind = "root"
    status: DialogStatus = DialogStatus.IDLE
    course: int = 1
    needs_drive: bool = False
    session_key: str | None = None
    assignment: dict[str, Any] | None = None
    title: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    # The process driving it, and until when its claim holds (see `Store.claim_dialog`).
    claim_owner: str | None = None
    claim_expires: float | None = None


class MessageRecord(BaseModel):
    id: int = 0
    dialog_id: str
    course: int = 1
    kind: MessageKind
    data: dict[str, Any] = Field(default_factory=dict)
    generation_id: int | None = None
    created_at: float = 0.0


class GenerationRecord(BaseModel):
    id: int = 0
    dialog_id: str
    provider: str
    model: str
    started_at: float
    ended_at: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    cost_usd: float | None = None  # None: the model has no known price


class UsageTotals(BaseModel):
    """Tokens and cost summed over generations (of a dialog, a tree, a task, a drive).
    `unpriced` generations have no known price: `cost_usd` leaves them out."""

    generations: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, gen: GenerationRecord) -> None:
        """Count one more generation in."""
        self.generations += 1
        self.input_tokens += gen.input_tokens or 0
        self.output_tokens += gen.output_tokens or 0
        if gen.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_usd += gen.cost_usd

    def merge(self, other: UsageTotals) -> None:
        """Count `other`'s generations in too."""
        self.generations += other.generations
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd += other.cost_usd
        self.unpriced += other.unpriced


class TaskdocChange(BaseModel):
    """One audited change of one Taskdoc section (the previous content is kept)."""

    id: int = 0
    task_path: str  # rtws-relative path of the .tsk package
    section: str  # package-relative file, e.g. "constraints.md", "bearinmind/risks.md"
    actor_member: str
    actor_dialog: str | None = None
    ts: float
    hash_before: str | None = None
    hash_after: str
    content_before: str | None = None
    content_after: str


class PendingTellask(BaseModel):
    id: int = 0
    caller_id: str
    side_id: str
    call_id: str
    call_type: str  # fresh | session | fbr | tellask_back
    headline: str
    created_at: float = 0.0


class ResponseRecord(BaseModel):
    """A side dialog's answer (or a tellask-back answer) queued for its caller."""

    id: int = 0
    caller_id: str
    side_id: str
    call_id: str
    data: dict[str, Any] = Field(default_factory=dict)
    delivered: bool = False
    created_at: float = 0.0


class QuestionRecord(BaseModel):
    """A Q4H question: asked by a dialog, answered by the human."""

    id: str
    dialog_id: str
    root_id: str
    headline: str
    body: str
    call_id: str
    course: int
    asked_at: float = 0.0
    answered_at: float | None = None
    answer: str | None = None
    status: str = "open"  # open | answered | discarded


class Reminder(BaseModel):
    id: int = 0
    dialog_id: str
    position: int
    content: str
    created_at: float = 0.0


class WaitStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class WaitRecord(BaseModel):
    """Something a dialog waits on besides tellasks and questions (`dialogs.waits`)."""

    id: str
    dialog_id: str
    kind: str
    key: str
    payload: dict[str, Any] = Field(default_factory=dict)
    blocks: bool = True
    created_at: float = 0.0
    due_at: float | None = None
    status: WaitStatus = WaitStatus.OPEN
    resolution: dict[str, Any] | None = None
    resolved_at: float | None = None
    node: str | None = None  # the workspace node it belongs to (None: the dialog)
    mode: str = "all"  # all | any: how it combines with the node's other waits
    snapshot: dict[str, Any] | None = None  # the task when it was opened (staleness)
    reminders: int = 0  # reminders sent while it was open
