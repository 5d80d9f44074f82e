"""What a function tool is, and what it may see when it runs.

A tool declares a pydantic model for its arguments (the JSON schema offered to the model
is derived from it) and an async `run` typed over that model. It receives a `ToolContext`
that names the rtws, the calling member's ACLs, the dialog and the call, plus the few
narrow services the built-in tools need, each typed by a Protocol below. The context holds
no engine object and no untyped bag of services: a tool can do exactly what those
protocols offer, so a tool can never drive, reload or rewrite a dialog behind the engine's
back. Failures the model should see are returned as `ToolOutput(is_error=True)`, never
raised.

This module sits at the bottom of the tool layer (it imports nothing of mindloop but
`i18n`): concrete services live with the toolsets that need them (`mindloop.toolsets`),
and the engine hands them in.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from mindloop.i18n import Lang

DEFAULT_OUTPUT_CAP = 48_000

_CALL_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Acl:
    """Directory ACLs of a member, as rtws-relative glob patterns (empty = no limit)."""

    read_dirs: tuple[str, ...] = ()
    write_dirs: tuple[str, ...] = ()
    no_read_dirs: tuple[str, ...] = ()
    no_write_dirs: tuple[str, ...] = ()


def call_key(dialog_id: str, generation: int | str, index: int) -> str:
    """The idempotency key of one tool call: sha256 of `dialog|generation|index`, hex.

    Stable across a crash and a resume (all three parts are persisted before the call
    runs), distinct for every call the runtime ever makes."""
    return hashlib.sha256(f"{dialog_id}|{generation}|{index}".encode()).hexdigest()


# ---------------------------------------------------------------------------------------
# The services a tool may use. The engine provides implementations bound to the calling
# dialog; a context built without one (a test, a tool run outside a dialog) has None and
# the tool says so in its result.


class ReminderService(Protocol):
    """The calling dialog's reminders, in order (numbered 1..n when shown)."""

    def contents(self) -> list[str]: ...

    def replace(self, contents: Sequence[str]) -> list[str]:
        """Replace every reminder of the dialog with `contents`; returns the new list."""
        ...


class CourseControl(Protocol):
    """Course control of the calling dialog (`clear_mind`)."""

    def request_new_course(self, reminder: str | None) -> None:
        """Start a new course once the current step's tool calls have finished, keeping
        `reminder` (if any) as a reminder in it."""
        ...


@dataclass(frozen=True)
class TaskdocChangeOutcome:
    """What an audited Taskdoc change did: `section` (package-relative) is set when it
    changed a file; otherwise `text` says why nothing was written."""

    ok: bool
    text: str
    section: str = ""


class TaskdocAudit(Protocol):
    """Audited Taskdoc changes (`change_mind`): the audit record and the section file are
    written together, or nothing is."""

    def change_section(
        self,
        rtws: Path,
        task_path: str,
        *,
        selector: str,
        content: str,
        category: str | None,
        actor_member: str,
        actor_dialog: str,
        is_root: bool,
        maintainer: str,
        lang: Lang,
    ) -> TaskdocChangeOutcome: ...


# Called with the package-relative section after a successful change_mind (the engine
# publishes an event).
TaskdocChangedHook = Callable[[str], None]


class WorkspaceAccess(Protocol):
    """Task workspaces in the runtime's store, for the `workspace` toolset: reads here,
    writes as `StoreEffect`s committed with the call's result. Implemented over the store
    by `mindloop.toolsets.workspace.StoreWorkspaceAccess`; what it returns are
    `mindloop.workspace` values, which this layer cannot name."""

    def load(self, task_path: str) -> Any:
        """The task's workspace (`mindloop.workspace.state.WorkspaceState`)."""
        ...

    def log(self, task_path: str) -> Any:
        """Its log (`list[mindloop.workspace.models.LogEntry]`)."""
        ...

    def user_message(self, dialog_id: str, quote: str) -> int | None:
        """The id of the dialog's latest user message containing `quote`, if any."""
        ...

    def members(self) -> frozenset[str]:
        """The team's member ids."""
        ...

    def adjust_cycles(self, task_path: str, node_id: str) -> int:
        """The ADJUST cycles accepted for a node so far (its L3 retry records): a node
        goes back to work from ADJUSTING only on one it has not used yet."""
        ...

    def bench_checks(self, task_path: str) -> Any:
        """The passing CHECKs the task's loop recorded and the nodes its CHECK entry under
        way verifies (`mindloop.workspace.ref.CheckMarks`): what a BENCH node's "nothing
        changed since the checks" is judged against."""
        ...

    def loop_entry(self, dialog_id: str) -> int | None:
        """The phase entry the work loop whose root is `dialog_id` is in (numbered from 1
        per task, stable across a resume); in SELF_IMPROVE, its pass's first entry: a
        SELF_IMPROVE run is one pass, however many batches it reads (`self_md_patch`
        counts its calls per run). None when the dialog is no loop root."""
        ...

    def step_budgets(self) -> tuple[int, int]:
        """A new node's DO step budget, and the most a node may be given (`loop.nodes`)."""
        ...


class TransientToolError(Exception):
    """Raised by a tool whose call did not take effect and may succeed if tried again (a
    service's 429 or 5xx, a connection refused, a sandbox restarting). The engine waits
    and retries the call (`ToolContext.transient_backoff`: 1, 2, 4 s by default), then
    reports the last failure as the call's error (agent-loop §8.1 TRANSIENT → TOOL_ERROR).
    Raise it only when a second call cannot act twice."""


class StepLocal:
    """What the calls of one step share until the step commits: a tool keeps here what
    its later calls in the same step must see, e.g. the workspace with the step's
    earlier changes applied (their effects commit only with the step's results). The
    engine makes one per tool step; it is gone with the step, committed or not."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self._items.get(key)

    def put(self, key: str, value: Any) -> None:
        self._items[key] = value


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a running tool may know and use: where it is, on whose behalf, which call.

    `call_key` identifies the call (see `call_key()`): the engine derives it from the
    dialog, the generation and the call's index; build contexts for tests with
    `ToolContext.for_test`.
    """

    rtws: Path
    member: str
    dialog_id: str
    call_key: str
    acl: Acl = field(default_factory=Acl)
    is_root: bool = True
    # The dialog tree's Taskdoc package (rtws-relative) and its maintainer (the root
    # dialog's member), named in errors a side dialog gets.
    task_path: str | None = None
    root_member: str | None = None
    work_language: Lang = "en"
    output_cap: int = DEFAULT_OUTPUT_CAP
    # Environment variables withheld from commands beyond the secret-suffix rule (e.g.
    # every `api_key_env` of llm.yaml).
    secret_env_names: tuple[str, ...] = ()
    reminders: ReminderService | None = None
    course: CourseControl | None = None
    taskdoc_audit: TaskdocAudit | None = None
    on_taskdoc_changed: TaskdocChangedHook | None = None
    workspace: WorkspaceAccess | None = None
    # The work-loop phase the calling dialog is in (PLAN, DO, CHECK, ADJUST,
    # SELF_IMPROVE), None outside the loop: who a workspace tool acts as.
    phase: str | None = None
    # The human's approval this call runs under (a call they approved), else None.
    approval_id: str | None = None
    # The waits before each retry of a call that failed transiently (`TransientToolError`;
    # `loop.retries.transient_backoff`); empty: no retry.
    transient_backoff: tuple[float, ...] = ()
    # Shared by the calls of one tool step (`StepLocal`); None outside a step.
    step: StepLocal | None = None

    def __post_init__(self) -> None:
        if not _CALL_KEY.fullmatch(self.call_key):
            raise ValueError(
                f"call_key must be a sha256 hex digest (see mindloop.tools.base.call_key), "
                f"got {self.call_key!r}"
            )
        if self.output_cap <= 0:
            raise ValueError(f"output_cap must be positive, got {self.output_cap}")

    @classmethod
    def for_test(
        cls, rtws: Path | str, *, member: str = "tester", dialog_id: str = "d-test", **fields: Any
    ) -> ToolContext:
        """A context outside any dialog (tests, scripts): a call key derived from the
        dialog id, every other field as given or its default."""
        fields.setdefault("call_key", call_key(dialog_id, "test", 0))
        return cls(rtws=Path(rtws), member=member, dialog_id=dialog_id, **fields)

    def for_call(self, key: str) -> ToolContext:
        """This context for another call of the same dialog: a copy with `key` as its call
        key (the engine builds one context per dialog view and one of these per call; a
        shallow copy of the fields, without `dataclasses.replace`'s re-initialisation)."""
        if not _CALL_KEY.fullmatch(key):
            raise ValueError(f"call_key must be a sha256 hex digest, got {key!r}")
        ctx = object.__new__(type(self))
        ctx.__dict__.update(self.__dict__, call_key=key)
        return ctx

    def in_step(self, step: StepLocal) -> ToolContext:
        """This context for a call of the tool step that `step` belongs to."""
        ctx = object.__new__(type(self))
        ctx.__dict__.update(self.__dict__, step=step)
        return ctx

    @property
    def maintainer(self) -> str:
        """Who maintains the Taskdoc (named when a side dialog may not change it)."""
        return self.root_member or self.member


@dataclass
class ToolOutput:
    text: str
    is_error: bool = False
    # What the engine commits in the same transaction as this result (durably): a crash
    # leaves both or neither. A tool that must not act twice keys its effects by
    # `ToolContext.call_key`.
    effects: tuple[Effect, ...] = ()


@dataclass(frozen=True)
class EffectResult:
    """What a store effect found at commit time, replacing the call's result: the result
    as it turned out (an id assigned then), or an error when the state changed since the
    tool looked (the effect then wrote nothing, and the call's later effects are skipped)."""

    text: str
    is_error: bool = False


@dataclass(frozen=True)
class StoreEffect:
    """Rows to write with the result: `apply` gets the store (a `mindloop.store.Store`;
    this layer cannot name it) inside the result's transaction, and returns None (the
    result stands) or an `EffectResult` that replaces it."""

    apply: Callable[[Any], EffectResult | None]
    what: str = ""  # for diagnostics


@dataclass(frozen=True)
class OpenWait:
    """Make the calling dialog wait (a wait record of `dialogs.wait_kinds.WaitKind` `kind`,
    its payload that kind's model as a mapping; `due_at` None: the kind's timeout;
    `wait_id` None: a new id; `mode` "all" or "any" among its node's waits)."""

    kind: str
    key: str
    payload: dict[str, Any] = field(default_factory=dict)
    due_at: float | None = None
    wait_id: str | None = None
    mode: str = "all"
    # Whether the wait parks the dialog; None: its kind's rule. A change a tool proposed
    # for approval does not (`tools.approval.proposal_wait`).
    blocks: bool | None = None


@dataclass(frozen=True)
class StartDetached:
    """Open a detached side dialog of the calling dialog with `member`; its final reply
    goes to the registered sink `sink`."""

    member: str
    message: str
    sink: str
    payload: dict[str, Any] = field(default_factory=dict)
    side_id: str | None = None  # the side dialog's id (None: a new random one)


@dataclass(frozen=True)
class ProposalDecision:
    """The human's decision on a change a tool proposed (`Tool.on_decision`)."""

    rtws: Path
    approval_id: str
    member: str  # whose call proposed it
    approve: bool  # False: rejected
    by: str  # who decided
    reason: str | None = None  # why (a rejection has one)


# The closed set of effects a tool may return.
Effect = StoreEffect | OpenWait | StartDetached


def printable(text: str) -> str:
    """`text` safe to store and show: NUL and lone surrogates (a file name that is not
    UTF-8, say) spelled as escapes; any other text unchanged."""
    if "\x00" in text:
        text = text.replace("\x00", "\\0")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


ArgsT = TypeVar("ArgsT", bound=BaseModel)


@dataclass
class Tool(Generic[ArgsT]):
    """A function tool: `run` receives the arguments already validated into `args_model`."""

    name: str
    description: str
    args_model: type[ArgsT]
    run: Callable[[ArgsT, ToolContext], Awaitable[ToolOutput]]
    toolset: str = ""
    # Running it changes nothing outside the store: it reads, or returns store effects
    # that commit with its result. A generation that calls only such tools is not
    # committed before they run: it commits with their results (`dialogs/turn.py`).
    store_only: bool = False
    # Whether a call (its JSON arguments) needs the human's approval whatever the
    # member's `approval_required`, as the tool's own rule says (e.g. `retry_propose`
    # relaxing an acceptance criterion): None, never.
    asks_approval: Callable[[str], bool] | None = None
    # For a change the tool itself proposed for approval (its result registers a
    # `tools.approval.proposal_wait`): carries out the human's decision, when they
    # approve or reject, before the decision is recorded; returns what it did, one line,
    # or raises `MindloopError` to refuse (nothing is decided). None: it proposes nothing.
    on_decision: Callable[[ProposalDecision], str] | None = None

    def schema(self) -> dict[str, Any]:
        """JSON schema of the arguments, as providers expect it (shared: do not mutate)."""
        return _arguments_schema(self.args_model)


@functools.cache
def _arguments_schema(args_model: type[BaseModel]) -> dict[str, Any]:
    """Generating a schema costs about 2 ms; every dialog a runtime loads needs its tools'."""
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    return schema
