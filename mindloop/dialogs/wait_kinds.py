"""The wait kinds, as data: agent-loop §6.2's closed set, one row each.

A row says what a wait of that kind carries (its payload model), which structured event
resolves it (matched on the wait's `key`), whether a task-level wait of it parks the
dialog, what falling due does (its timeout policy, with the durations from `loop.waits`
in team.yaml), and whether an event that comes before the wait is kept to be matched when
the wait is registered. Adding a kind adds a row; `Waits` reads only the table.

| kind       | reference           | key             | resolving event    | on timeout          |
|------------|---------------------|-----------------|--------------------|---------------------|
| user_input | WAIT_USER_INPUT     | the question id | Q4H_ANSWERED       | 48 h: assume the    |
|            |                     |                 |                    | default, else remind|
| approval   | WAIT_USER_APPROVAL  | the approval id | APPROVAL_DECISION  | remind every 72 h   |
| detached   | WAIT_SUBAGENT       | the side dialog | TELLASK_REPLY      | 30 min active / 24 h|
| tool       | WAIT_TOOL           | the call key    | TOOL_RESULT        | 10 min -> fail      |
| timer      | WAIT_TIMER          | (chosen)        | TIMER_FIRED        | fires               |
| external   | WAIT_SYSTEM_EVENT   | the event type  | SYSTEM_EVENT       | 24 h -> fail        |

Nothing resolves a wait by free text: every event is a typed model, and an approval only
by `APPROVAL_DECISION` (`dialogs.approvals`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from mindloop.config.loop import WaitsConfig


class WaitKind(StrEnum):
    USER_INPUT = "user_input"  # a question for the human (Q4H), with its timeout policy
    APPROVAL = "approval"  # answered only by an explicit approve / reject
    DETACHED = "detached"  # a detached side dialog's reply (a node dispatch), to a sink
    TOOL = "tool"  # an async tool's result
    TIMER = "timer"  # wakes the dialog at `due_at`
    EXTERNAL = "external"  # a system event from outside (a webhook, another system)


class WaitMode(StrEnum):
    """How a wait combines with the other waits of its node (agent-loop §6.3 Wake)."""

    ALL = "all"  # fan-out: the node waits for every one
    ANY = "any"  # alternatives: the first resolved cancels the others


class WaitOutcome(StrEnum):
    OK = "ok"
    REJECTED = "rejected"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


class OnTimeout(StrEnum):
    """What a wait's due time does."""

    FIRE = "fire"  # the due time is the event (a timer): resolved ok
    FAIL = "fail"  # the wait ends negatively (outcome timeout)
    ASSUME_DEFAULT = "assume_default"  # the stated default is taken, the user told;
    # without one it is REMIND_ONLY
    REMIND_ONLY = "remind_only"  # the human is reminded; the wait stays open


class Resolution(BaseModel):
    """How a wait ended (the record's `resolution`)."""

    outcome: WaitOutcome
    event: dict[str, Any] = Field(default_factory=dict)  # the resolving event, or the facts
    by: str | None = None  # who decided (a human's name, "timeout", "runtime")
    at: float = Field(default_factory=time.time)


# ---------------------------------------------------------------------- payloads


class WaitPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserInputPayload(WaitPayload):
    q4h_id: str
    question: str
    options: list[str] = Field(default_factory=list)
    default_assumption: str | None = None  # taken after the timeout, the user told


class ApprovalPayload(WaitPayload):
    approval_id: str
    member: str
    tool: str
    toolset: str
    arguments: str  # exactly as the model wrote them (JSON text): what runs if approved
    args_digest: str  # sha256 of tool and arguments (`approvals.args_digest`)
    call_id: str  # the tool call it holds
    call_key: str  # that call's idempotency key: the approved call runs with it
    summary: str  # one line for people: `tool(arg=…, …)`
    risk: str | None = None  # a rating its registrant may give (the loop's phase, a tool)
    # The call ran and proposed a change (`tools.approval.proposal_wait`): the dialog does
    # not wait, and the decision is carried out by the tool's `on_decision`.
    proposal: bool = False


class SubagentPayload(WaitPayload):
    member: str
    sink: str  # the reply sink (`DialogRuntime(sinks=…)`)
    node_id: str | None = None  # the workspace node dispatched (agent-loop's todo_id)
    session_slug: str | None = None


class ToolWaitPayload(WaitPayload):
    call_key: str
    tool: str
    job_id: str


class TimerPayload(WaitPayload):
    fire_at: float
    reason: str = ""


class SystemEventPayload(WaitPayload):
    event_type: str
    # What the event must carry: each pair equal in its payload (`key` is the event's key).
    filter: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------------- events


class WaitEvent(BaseModel):
    """A structured event that resolves the open waits of its kind whose key it names."""

    model_config = ConfigDict(extra="forbid")
    kind: ClassVar[WaitKind]
    key_field: ClassVar[str]  # the field that names the wait's key

    def wait_key(self) -> str:
        return str(getattr(self, self.key_field))

    def outcome(self) -> WaitOutcome:
        return WaitOutcome.OK

    def matches(self, payload: dict[str, Any]) -> bool:
        """Beyond the key: whether this event is what a wait with `payload` waits for."""
        return True


class Q4hAnswered(WaitEvent):
    kind: ClassVar[WaitKind] = WaitKind.USER_INPUT
    q4h_id: str
    text: str

    key_field: ClassVar[str] = "q4h_id"


class Decision(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    EDIT = "edit"  # approved with other arguments (the human's), which then run


class ApprovalDecision(WaitEvent):
    kind: ClassVar[WaitKind] = WaitKind.APPROVAL
    approval_id: str
    decision: Decision
    by: str
    edited_args: str | None = None  # with EDIT: the arguments that run instead (JSON text)
    reason: str | None = None  # why (required to reject)

    key_field: ClassVar[str] = "approval_id"

    def outcome(self) -> WaitOutcome:
        return WaitOutcome.REJECTED if self.decision is Decision.REJECT else WaitOutcome.OK


class TellaskReply(WaitEvent):
    kind: ClassVar[WaitKind] = WaitKind.DETACHED
    side_id: str
    status: Literal["completed", "failed", "cancelled"]
    response: str
    artifacts: list[str] = Field(default_factory=list)

    key_field: ClassVar[str] = "side_id"

    def outcome(self) -> WaitOutcome:
        return {"completed": WaitOutcome.OK, "failed": WaitOutcome.FAILED}.get(
            self.status, WaitOutcome.CANCELLED
        )


class ToolResult(WaitEvent):
    kind: ClassVar[WaitKind] = WaitKind.TOOL
    call_key: str
    ok: bool
    summary: str
    output_ref: str | None = None

    key_field: ClassVar[str] = "call_key"

    def outcome(self) -> WaitOutcome:
        return WaitOutcome.OK if self.ok else WaitOutcome.FAILED


class TimerFired(WaitEvent):
    kind: ClassVar[WaitKind] = WaitKind.TIMER
    wait_id: str

    key_field: ClassVar[str] = "wait_id"


class SystemEvent(WaitEvent):
    kind: ClassVar[WaitKind] = WaitKind.EXTERNAL
    event_type: str
    key: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)

    key_field: ClassVar[str] = "event_type"

    def matches(self, payload: dict[str, Any]) -> bool:
        wanted = SystemEventPayload.model_validate(payload).filter
        have = {"key": self.key, **self.payload}
        return all(k in have and have[k] == v for k, v in wanted.items())


# ---------------------------------------------------------------------- the table

# A duration of `loop.waits`, by its dotted path (`WaitsConfig` in `config.loop`).
DurationKey = Literal[
    "user_input.timeout",
    "user_input.remind_every",
    "approval.remind_every",
    "subagent.active",
    "tool.timeout",
    "system_event.timeout",
]


def duration(config: WaitsConfig, key: DurationKey) -> float:
    value: Any = config
    for part in key.split("."):
        value = getattr(value, part)
    return float(value)


@dataclass(frozen=True)
class WaitSpec:
    ref: str  # its name in agent-loop §6.2
    blocks: bool  # a dialog-level wait of this kind parks the dialog while open
    payload: type[WaitPayload]
    event: type[WaitEvent]
    on_timeout: OnTimeout | None  # None: it has no due time
    after: DurationKey | None = None  # due this long after it opens (None: an explicit time)
    remind_every: DurationKey | None = None  # then again this often (REMIND_ONLY)
    keeps_early: bool = False  # an event before the wait is kept and matched at registration
    id_prefix: str = "w-"

    def due_in(self, config: WaitsConfig) -> float | None:
        return None if self.after is None else duration(config, self.after)

    def remind_in(self, config: WaitsConfig) -> float | None:
        key = self.remind_every or self.after
        return None if key is None else duration(config, key)


WAIT_KINDS: dict[WaitKind, WaitSpec] = {
    # The question itself parks the dialog (the `questions` table); this record carries
    # its timeout policy and is resolved when it is answered.
    WaitKind.USER_INPUT: WaitSpec(
        "WAIT_USER_INPUT",
        blocks=False,
        payload=UserInputPayload,
        event=Q4hAnswered,
        on_timeout=OnTimeout.ASSUME_DEFAULT,
        after="user_input.timeout",
        remind_every="user_input.remind_every",
    ),
    WaitKind.APPROVAL: WaitSpec(
        "WAIT_USER_APPROVAL",
        blocks=True,
        payload=ApprovalPayload,
        event=ApprovalDecision,
        on_timeout=OnTimeout.REMIND_ONLY,
        after="approval.remind_every",
        id_prefix="apv-",
    ),
    # A node dispatch does not park its caller; past its active-time or wall-clock limit
    # the side dialog is cancelled and its sink told it failed.
    WaitKind.DETACHED: WaitSpec(
        "WAIT_SUBAGENT",
        blocks=False,
        payload=SubagentPayload,
        event=TellaskReply,
        on_timeout=OnTimeout.FAIL,
        after="subagent.active",
    ),
    WaitKind.TOOL: WaitSpec(
        "WAIT_TOOL",
        blocks=True,
        payload=ToolWaitPayload,
        event=ToolResult,
        on_timeout=OnTimeout.FAIL,
        after="tool.timeout",
        keeps_early=True,
    ),
    WaitKind.TIMER: WaitSpec(
        "WAIT_TIMER",
        blocks=True,
        payload=TimerPayload,
        event=TimerFired,
        on_timeout=OnTimeout.FIRE,
    ),
    WaitKind.EXTERNAL: WaitSpec(
        "WAIT_SYSTEM_EVENT",
        blocks=True,
        payload=SystemEventPayload,
        event=SystemEvent,
        on_timeout=OnTimeout.FAIL,
        after="system_event.timeout",
        keeps_early=True,
    ),
}
