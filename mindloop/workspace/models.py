"""The records of a task workspace: nodes (to-do items), doc references, rules, log entries.

One record for a node, whatever it is called: the seed-004 to-do item (deps, skills, assignee,
acceptance criteria, artifacts, blockers) and the seed-003 / TanmiWorkspace node (kind,
parent, children, requirement, doc references, conclusion, isolation) are the same thing
(DESIGN §1). Every enum is closed: a value outside it is an error naming the allowed ones,
never a silent default. The store keeps these records as JSON (`store.workspace`); the
projections (`projection.py`) render them for people.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class NodeStatus(StrEnum):
    """agent-loop §5.2. The last three are terminal."""

    NEW = "NEW"
    WAIT = "WAIT"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETE = "COMPLETE"
    CHECK_FAILED = "CHECK_FAILED"
    ADJUSTING = "ADJUSTING"
    DONE = "DONE"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL: frozenset[NodeStatus] = frozenset(
    {NodeStatus.DONE, NodeStatus.FAILED, NodeStatus.CANCELLED}
)


class NodeKind(StrEnum):
    """Only PLANNING nodes have children; their status is derived from them."""

    PLANNING = "PLANNING"
    EXECUTION = "EXECUTION"


class NodeType(StrEnum):
    """EXECUTION nodes only: a BENCH node is an integration or acceptance test."""

    TASK = "TASK"
    BENCH = "BENCH"


class DocStatus(StrEnum):
    """Expired docs stay listed (node refs, the index, the files) but never enter a prompt."""

    ACTIVE = "active"
    EXPIRED = "expired"


class RefAction(StrEnum):
    """What `node_reference` may do (decision 7): anything else is an error."""

    ADD = "add"
    REMOVE = "remove"
    EXPIRE = "expire"
    ACTIVATE = "activate"


MAIN = "MAIN"
MEMBER_PREFIX = "MEMBER:"
ROOT_ID = "root"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Criterion(_Record):
    """An acceptance criterion. `verify` is a command or `MANUAL:<procedure>`."""

    id: str
    when: str
    then: str
    verify: str | None = None


class DocRef(_Record):
    """A doc reference (node level) or an index entry (workspace level)."""

    path: str
    description: str = ""
    status: DocStatus = DocStatus.ACTIVE


class SelfCheck(_Record):
    """One acceptance criterion as the self-check before COMPLETE found it."""

    criterion: str
    passed: bool
    evidence: str = ""


class NodeDispatch(_Record):
    """The current dispatch of a MEMBER node (agent-loop's `tellask` field)."""

    member: str
    dispatch_id: str  # the call key of the dispatching call (the sink checks it)
    side_id: str  # the detached side dialog working the node
    caller_id: str  # the dialog that dispatched it (gets the note)
    at: float


class Node(_Record):
    """One node of the tree (agent-loop §5.1 plus the TanmiWorkspace fields)."""

    id: str
    parent_id: str | None = None
    kind: NodeKind
    type: NodeType = NodeType.TASK
    title: str
    requirement: str = ""
    status: NodeStatus = NodeStatus.NEW
    children: list[str] = Field(default_factory=list)
    deps: list[str] = Field(default_factory=list)
    skills: list[str] = Field(default_factory=list)
    assignee: str = MAIN
    can_start_immediately: bool = False
    acceptance_criteria: list[Criterion] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    no_artifacts_reason: str = ""
    docs: list[DocRef] = Field(default_factory=list)
    notes: str = ""
    conclusion: str = ""
    worklog_refs: list[int] = Field(default_factory=list)
    blockers: list[str] = Field(default_factory=list)
    self_check: list[SelfCheck] = Field(default_factory=list)
    isolate: bool = False
    started: bool = False  # was IN_PROGRESS once (WAIT returns to IN_PROGRESS, not NEW)
    attempt: int = 0
    adjust_count: int = 0
    steps_used: int = 0
    step_budget: int = 12
    checkpoint_ref: str | None = None
    checked_ref: str | None = None
    check_report_ref: str | None = None
    supersedes: str | None = None
    dispatch: NodeDispatch | None = None
    active_form: str = ""
    created_by: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    version: int = 1
    dir: str = ""  # the node's projection directory under nodes/

    @property
    def member(self) -> str | None:
        """The member id of a MEMBER:<id> assignee."""
        if self.assignee.startswith(MEMBER_PREFIX):
            return self.assignee[len(MEMBER_PREFIX) :]
        return None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def active_docs(self) -> list[DocRef]:
        return [d for d in self.docs if d.status is DocStatus.ACTIVE]

    def doc(self, path: str) -> DocRef | None:
        return next((d for d in self.docs if d.path == path), None)


class Rule(_Record):
    """A workspace rule: read-only to agents, in every dialog of the task."""

    id: int = 0  # the store's row id (0 until stored)
    text: str
    source: dict[str, Any] = Field(default_factory=dict)  # who stated it, where
    created_at: float = 0.0


class LogEntry(_Record):
    """A workspace log row (`node_id` None: the workspace's own log). Transitions are
    entries of kind `transition` with `{from, to, by, who, reason, evidence}` in `data`."""

    id: int = 0
    node_id: str | None = None
    at: float = 0.0
    actor: str = ""
    kind: str = "log"
    text: str
    data: dict[str, Any] = Field(default_factory=dict)
