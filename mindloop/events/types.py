"""The runtime's events: one typed record per kind, a closed set.

The engine publishes these on the `EventBus`; faces (the CLI transcript, the web UI's
event stream) render them. Each kind is a small frozen dataclass with a class-level
`type` (an `EventType`), so a consumer matches on the class or on `ev.type` and reads
typed attributes, never keys of a free dict. They are dataclasses, not pydantic models:
the engine publishes several per step (text chunks many more), and building one must
cost next to nothing; `to_dict` gives the JSON form for the stored log and the web.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar


class EventType(StrEnum):
    GENERATION_START = "generation_start"
    TEXT_CHUNK = "text_chunk"
    THINKING_CHUNK = "thinking_chunk"
    GENERATION_END = "generation_end"
    GENERATION_RESTART = "generation_restart"
    PROVIDER_RETRY = "provider_retry"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    ERROR = "error"
    NOTE = "note"
    DRIVE_START = "drive_start"
    DRIVE_END = "drive_end"
    DIALOG_CREATED = "dialog_created"
    TELLASK_CALL = "tellask_call"
    TELLASK_RESPONSE = "tellask_response"
    QUESTION_ASKED = "question_asked"
    QUESTION_ANSWERED = "question_answered"
    TASKDOC_CHANGED = "taskdoc_changed"
    WAIT_OPENED = "wait_opened"
    WAIT_RESOLVED = "wait_resolved"
    WAIT_REMINDER = "wait_reminder"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_RESOLVED = "approval_resolved"
    PHASE_START = "phase_start"
    PHASE_END = "phase_end"
    LOOP_ROUTED = "loop_routed"
    CONTEXT_TRIMMED = "context_trimmed"
    CONTEXT_COMPACTED = "context_compacted"


# Kinds a slow subscriber may lose (the oldest first); every other kind is kept.
CHUNK_TYPES = frozenset({EventType.TEXT_CHUNK, EventType.THINKING_CHUNK})


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    type: ClassVar[EventType]
    dialog_id: str | None = None
    ts: float = field(default_factory=time.time)

    def payload(self) -> dict[str, Any]:
        """The kind's own fields (without dialog id and time)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("dialog_id", "ts")
        }

    def to_dict(self) -> dict[str, Any]:
        return {"type": str(self.type), "dialog_id": self.dialog_id, "ts": self.ts} | {
            "data": self.payload()
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationStarted(Event):
    type: ClassVar[EventType] = EventType.GENERATION_START
    member: str
    model: str
    provider: str | None = None  # the llm.yaml provider's name


@dataclass(frozen=True, slots=True, kw_only=True)
class TextChunk(Event):
    type: ClassVar[EventType] = EventType.TEXT_CHUNK
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingChunk(Event):
    type: ClassVar[EventType] = EventType.THINKING_CHUNK
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationEnded(Event):
    type: ClassVar[EventType] = EventType.GENERATION_END
    finish_reason: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool_calls: int = 0
    cost_usd: float | None = None  # None: no known price


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationRestarted(Event):
    """A retry after a failure mid-stream: what was streamed so far is void."""

    type: ClassVar[EventType] = EventType.GENERATION_RESTART
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderRetried(Event):
    """A generation's model call failed and is tried again: `attempt` (2 for the first
    retry) of `max_attempts` starts after `delay` seconds. `host` is the server tried
    (None for a provider without one, e.g. the mock), `status` the HTTP status if any."""

    type: ClassVar[EventType] = EventType.PROVIDER_RETRY
    member: str | None
    provider: str
    model: str
    host: str | None
    attempt: int
    max_attempts: int
    status: int | None
    error: str
    delay: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCalled(Event):
    type: ClassVar[EventType] = EventType.TOOL_CALL
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResulted(Event):
    type: ClassVar[EventType] = EventType.TOOL_RESULT
    call_id: str
    name: str
    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorRaised(Event):
    type: ClassVar[EventType] = EventType.ERROR
    message: str
    code: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteAdded(Event):
    type: ClassVar[EventType] = EventType.NOTE
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DriveStarted(Event):
    type: ClassVar[EventType] = EventType.DRIVE_START
    member: str
    task: str | None = None  # the dialog's task package (rtws-relative)
    kind: str | None = None  # root | side | fbr
    root_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DriveEnded(Event):
    type: ClassVar[EventType] = EventType.DRIVE_END
    reason: str
    steps: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DialogCreated(Event):
    type: ClassVar[EventType] = EventType.DIALOG_CREATED
    member: str
    kind: str
    task: str | None = None
    parent_id: str | None = None
    session: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TellaskCalled(Event):
    type: ClassVar[EventType] = EventType.TELLASK_CALL
    side_id: str
    call_type: str
    headline: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TellaskResponded(Event):
    type: ClassVar[EventType] = EventType.TELLASK_RESPONSE
    side_id: str
    call_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionAsked(Event):
    type: ClassVar[EventType] = EventType.QUESTION_ASKED
    question_id: str
    headline: str
    body: str


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionAnswered(Event):
    type: ClassVar[EventType] = EventType.QUESTION_ANSWERED
    question_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskdocChanged(Event):
    type: ClassVar[EventType] = EventType.TASKDOC_CHANGED
    section: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitOpened(Event):
    type: ClassVar[EventType] = EventType.WAIT_OPENED
    wait_id: str
    kind: str
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitResolved(Event):
    type: ClassVar[EventType] = EventType.WAIT_RESOLVED
    wait_id: str
    kind: str
    status: str
    outcome: str | None = None  # ok | rejected | failed | timeout | cancelled
    detail: str | None = None  # what the human should know (e.g. the default assumed)


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitReminded(Event):
    """An open wait on the human is still open after its reminder interval: tell them."""

    type: ClassVar[EventType] = EventType.WAIT_REMINDER
    wait_id: str
    kind: str
    reminders: int  # reminders sent so far, this one included
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested(Event):
    """A call waits for the human's approval before it runs (`mindloop approve|reject`)."""

    type: ClassVar[EventType] = EventType.APPROVAL_REQUESTED
    approval_id: str
    member: str
    tool: str
    arguments: str
    args_digest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalResolved(Event):
    type: ClassVar[EventType] = EventType.APPROVAL_RESOLVED
    approval_id: str
    decision: str  # approve | reject | edit
    by: str
    reason: str | None = None


# ---------------------------------------------------------------------- the work loop


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseStarted(Event):
    """A task's loop root entered a phase (its input was posted); `dialog_id` is the root."""

    type: ClassVar[EventType] = EventType.PHASE_START
    task: str
    phase: str
    entry: int
    node: str | None = None  # the node the entry works (DO, ADJUST)
    member: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseEnded(Event):
    type: ClassVar[EventType] = EventType.PHASE_END
    task: str
    phase: str
    entry: int
    by: str  # phase_end | reply | step_cap | runtime
    hint: str | None = None
    summary: str = ""  # the summary's progress line


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopRouted(Event):
    """The runtime's routing decision after a phase or a wake (agent-loop §4)."""

    type: ClassVar[EventType] = EventType.LOOP_ROUTED
    task: str
    target: str  # PLAN | DO | CHECK | ADJUST | END | PARK | ROUTER
    rule: str
    hint: str | None = None
    hint_dropped: str | None = None  # HINT_ILLEGAL: why the hint was dropped
    done: int = 0  # execution nodes terminal
    total: int = 0  # execution nodes


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextTrimmed(Event):
    """A budgeted request was compiled with sections trimmed (`memory.compiler`): the
    trim log. `trims` are `memory.TrimRecord`s as dicts; `taskdoc_over` is set when the
    Taskdoc (sent whole) passed its budget."""

    type: ClassVar[EventType] = EventType.CONTEXT_TRIMMED
    budget: int
    tokens: int
    trims: tuple[dict[str, Any], ...] = ()
    taskdoc_tokens: int = 0
    taskdoc_over: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextCompacted(Event):
    """A dialog was compacted (`memory.compaction`): how, and what it replaced."""

    type: ClassVar[EventType] = EventType.CONTEXT_COMPACTED
    method: str
    tokens_before: int
    tokens_after: int
    replaced: tuple[str, ...] = ()
    llm_pending: bool = False
