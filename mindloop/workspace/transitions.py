"""The node state machine as data: agent-loop §5.4, one table read by the code and printed
in the docs (`table_markdown`).

A row is (from, to, who may take it, the node types it applies to, a guard, effects, the
event it stands for). Any pair that is not a row is rejected with
`ILLEGAL_TRANSITION{from, to, by}`, naming the targets that are legal from there.

Who: the phases of the work loop (PLAN, DO, CHECK, ADJUST), the runtime (RT) and the user
(a CLI or API command). A dialog without phases (`mindloop chat`) acts for the phases
(`Authority.FREE`); the runtime's rows marked `on_entry` stand for "a phase starts work on
the node" (DO selecting a ready node, ADJUST starting on a failed one), which in such a
dialog only an explicit `node_transition` can say, so it may take them too. The rows the
runtime takes on wait events (a member's reply, a wait resolved) it alone takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from mindloop.workspace.models import NodeStatus, NodeType

S = NodeStatus


class Actor(StrEnum):
    PLAN = "PLAN"
    DO = "DO"
    CHECK = "CHECK"
    ADJUST = "ADJUST"
    RT = "RT"
    USER = "USER"


class Guard(StrEnum):
    """Named conditions of rows (checked in `commands.py`, described here for the docs)."""

    NONE = "-"
    READY = "READY"  # NEW, assignee MAIN, every dep DONE; invariant 1
    DISPATCH = "DISPATCH"  # a member assignee, dispatched by the runtime (or a Q4H)
    SELF_CHECK = "SELF_CHECK"  # invariant 3
    WAITS_DONE = "WAITS_DONE"  # no open dispatch; started before → IN_PROGRESS, else NEW
    MEMBER_REPLY = "MEMBER_REPLY"  # the dispatched member replied
    BENCH_READY = "BENCH_READY"  # agent-loop §5.5
    RETRY = "RETRY"  # adjust_count < 3, assignee MAIN
    CYCLE = "CYCLE"  # adjust_count < 3: an accepted ADJUST cycle (a BENCH's plan mode)
    CONCLUSION = "CONCLUSION"  # terminal targets: a conclusion (invariant 4)


class Effect(StrEnum):
    STARTED = "STARTED"  # mark the node started and focus it
    ATTEMPT = "ATTEMPT"  # attempt + 1
    ADJUST = "ADJUST"  # adjust_count + 1
    CHECKPOINT = "CHECKPOINT"  # record checkpoint_ref: the workspace ref the runtime gives
    CHECKED = "CHECKED"  # record checked_ref: the workspace ref the runtime gives
    REPORT = "REPORT"  # CHECK's verdict: its worklog row is the node's check report


CREATE = None  # the `from` of a creation row


@dataclass(frozen=True)
class Row:
    source: NodeStatus | None
    target: NodeStatus
    by: tuple[Actor, ...]
    event: str
    guard: Guard = Guard.NONE
    types: frozenset[NodeType] = frozenset(NodeType)
    effects: tuple[Effect, ...] = ()
    on_entry: bool = False  # stands for a phase starting work (see the module doc)


_BENCH = frozenset({NodeType.BENCH})
_TASK = frozenset({NodeType.TASK})
A = Actor

_ROWS: list[Row] = [
    Row(CREATE, S.NEW, (A.PLAN, A.ADJUST), "create TASK", types=_TASK),
    Row(CREATE, S.WAIT, (A.PLAN,), "create BENCH (waits for BENCH_READY)", types=_BENCH),
    Row(
        S.NEW,
        S.IN_PROGRESS,
        (A.RT,),
        "ready and selected on DO entry",
        Guard.READY,
        effects=(Effect.STARTED,),
        on_entry=True,
    ),
    Row(
        S.NEW,
        S.WAIT,
        (A.RT,),
        "a tellask is dispatched for a MEMBER node, or a Q4H is needed before starting",
        Guard.DISPATCH,
    ),
    Row(
        S.IN_PROGRESS,
        S.COMPLETE,
        (A.DO,),
        "self-check passed; record checkpoint_ref",
        Guard.SELF_CHECK,
        effects=(Effect.CHECKPOINT,),
    ),
    Row(
        S.IN_PROGRESS,
        S.WAIT,
        (A.RT,),
        "a Q4H, tellask or async tool registered for this node",
        Guard.DISPATCH,
    ),
    Row(
        S.IN_PROGRESS,
        S.CHECK_FAILED,
        (A.DO, A.RT),
        "repairs exhausted, STUCK, or steps_used >= step_budget",
    ),
    Row(S.WAIT, S.IN_PROGRESS, (A.RT,), "waits satisfied; the node had started", Guard.WAITS_DONE),
    Row(S.WAIT, S.NEW, (A.RT,), "waits satisfied; the node had not started", Guard.WAITS_DONE),
    Row(
        S.WAIT,
        S.COMPLETE,
        (A.RT,),
        "WAIT_SUBAGENT replied `completed` for a MEMBER node",
        Guard.MEMBER_REPLY,
        types=_TASK,
    ),
    Row(
        S.WAIT,
        S.CHECK_FAILED,
        (A.RT,),
        "a wait resolved negatively (WAIT_<KIND>_<OUTCOME>)",
        Guard.MEMBER_REPLY,
        types=_TASK,
    ),
    Row(
        S.COMPLETE,
        S.DONE,
        (A.CHECK,),
        "check passed; record checked_ref",
        Guard.CONCLUSION,
        effects=(Effect.CHECKED, Effect.REPORT),
    ),
    Row(
        S.COMPLETE,
        S.CHECK_FAILED,
        (A.CHECK,),
        "check failed, report attached",
        effects=(Effect.REPORT,),
    ),
    Row(
        S.WAIT,
        S.DONE,
        (A.CHECK,),
        "BENCH_READY and the integration test passes",
        Guard.BENCH_READY,
        types=_BENCH,
        effects=(Effect.CHECKED, Effect.REPORT),
    ),
    Row(
        S.WAIT,
        S.CHECK_FAILED,
        (A.CHECK,),
        "BENCH_READY and the integration test fails (BENCH_FAIL)",
        Guard.BENCH_READY,
        types=_BENCH,
        effects=(Effect.REPORT,),
    ),
    Row(S.CHECK_FAILED, S.ADJUSTING, (A.RT,), "ADJUST starts on the node", on_entry=True),
    Row(
        S.ADJUSTING,
        S.IN_PROGRESS,
        (A.ADJUST,),
        "RetryRecord accepted, adjust_count < 3, assignee MAIN",
        Guard.RETRY,
        effects=(Effect.ATTEMPT, Effect.ADJUST, Effect.STARTED),
    ),
    Row(
        S.ADJUSTING,
        S.WAIT,
        (A.ADJUST,),
        "re-dispatch to a member (counts as an adjust), or a Q4H (does not count)",
        Guard.DISPATCH,
        types=_TASK,
    ),
    Row(
        S.ADJUSTING,
        S.WAIT,
        (A.ADJUST,),
        "BENCH plan mode: fix nodes created and added to deps (an ADJUST cycle)",
        Guard.CYCLE,
        types=_BENCH,
        effects=(Effect.ADJUST,),
    ),
    Row(
        S.ADJUSTING,
        S.CANCELLED,
        (A.ADJUST,),
        "split into NEW children, deps rewired",
        Guard.CONCLUSION,
    ),
    Row(
        S.ADJUSTING,
        S.FAILED,
        (A.ADJUST, A.RT),
        "adjust_count = 3, or judged infeasible; user notified",
        Guard.CONCLUSION,
    ),
]
# any non-terminal → CANCELLED (scope removed, or the user cancels)
_ROWS += [
    Row(
        status,
        S.CANCELLED,
        (A.PLAN, A.ADJUST, A.RT, A.USER),
        "scope removed, or the user cancels",
        Guard.CONCLUSION,
    )
    for status in NodeStatus
    if status not in (S.DONE, S.FAILED, S.CANCELLED)
]

TRANSITIONS: tuple[Row, ...] = tuple(_ROWS)

# The targets of the rows that record a workspace ref (COMPLETE, DONE): a caller computes
# the ref (`workspace.ref.workspace_ref`) only for a transition to one of these.
REF_TARGETS: frozenset[NodeStatus] = frozenset(
    r.target for r in TRANSITIONS if {Effect.CHECKPOINT, Effect.CHECKED} & set(r.effects)
)


# The ADJUST cycles accepted for a node so far: (task path, node id) -> count.
AdjustCycles = Callable[[str, str], int]

# agent-loop §5.5 condition 3 ("nothing changed since the checks") for a BENCH node whose
# scope is these nodes: why it fails, None when it holds (`workspace.ref.since_checks`).
SinceChecks = Callable[[Sequence[str]], str | None]


@dataclass(frozen=True)
class Authority:
    """Who is asking: the actors it may act as, whether it is a dialog without phases
    (which may take `on_entry` rows), and how the log names it. With `adjust_cycles`
    (the work loop's ADJUST) a node leaves ADJUSTING for work (the RETRY guard, a
    re-dispatch) only on an accepted ADJUST cycle it has not used yet (agent-loop §5.4:
    "RetryRecord accepted"); the count of accepted cycles is then the cap, not
    `MAX_ADJUSTS`. With `since_checks` (the work loop's CHECK) a BENCH node is tested
    only when §5.5 condition 3 holds too; without, conditions 1, 2 and 4 decide."""

    actors: frozenset[Actor]
    who: str = ""
    free: bool = False
    adjust_cycles: AdjustCycles | None = None
    since_checks: SinceChecks | None = None

    @classmethod
    def phase(
        cls,
        actor: Actor,
        who: str = "",
        *,
        adjust_cycles: AdjustCycles | None = None,
        since_checks: SinceChecks | None = None,
    ) -> Authority:
        return cls(frozenset({actor}), who, adjust_cycles=adjust_cycles, since_checks=since_checks)

    @classmethod
    def chat(cls, who: str = "") -> Authority:
        """A dialog without phases: it plans, does, checks and adjusts."""
        return cls(frozenset({A.PLAN, A.DO, A.CHECK, A.ADJUST}), who, free=True)

    @classmethod
    def runtime(cls, who: str = "runtime") -> Authority:
        return cls(frozenset({A.RT}), who)

    @classmethod
    def user(cls, who: str = "human") -> Authority:
        return cls(frozenset({A.USER}), who)

    def label(self) -> str:
        return "|".join(sorted(self.actors))

    def acts_as(self, row: Row) -> Actor | None:
        """The actor this authority takes `row` as (recorded as `by`), None if it may not."""
        for actor in row.by:
            if actor in self.actors:
                return actor
        if row.on_entry and self.free:
            return row.by[0]
        return None


def _indexed() -> tuple[
    dict[tuple[NodeStatus | None, NodeType], tuple[Row, ...]],
    dict[tuple[NodeStatus | None, NodeStatus, NodeType], tuple[Row, ...]],
]:
    """The table's rows by (from, node type) and by (from, to, node type), in table order:
    every command looks its rows up (a scan of the whole table each time was a tenth of a
    transition's cost), and the table is a constant."""
    by_source: dict[tuple[NodeStatus | None, NodeType], tuple[Row, ...]] = {}
    by_pair: dict[tuple[NodeStatus | None, NodeStatus, NodeType], tuple[Row, ...]] = {}
    for source in (None, *NodeStatus):
        for node_type in NodeType:
            rows = tuple(r for r in TRANSITIONS if r.source == source and node_type in r.types)
            by_source[(source, node_type)] = rows
            for target in NodeStatus:
                by_pair[(source, target, node_type)] = tuple(r for r in rows if r.target == target)
    return by_source, by_pair


_BY_SOURCE, _BY_PAIR = _indexed()


def rows_from(source: NodeStatus | None, node_type: NodeType) -> list[Row]:
    return list(_BY_SOURCE.get((source, node_type), ()))


def find_rows(source: NodeStatus | None, target: NodeStatus, node_type: NodeType) -> list[Row]:
    return list(_BY_PAIR.get((source, target, node_type), ()))


def legal_targets(source: NodeStatus | None, node_type: NodeType) -> list[NodeStatus]:
    seen: list[NodeStatus] = []
    for r in rows_from(source, node_type):
        if r.target not in seen:
            seen.append(r.target)
    return seen


def _cell(values: Iterable[str]) -> str:
    return ", ".join(values)


def table_markdown() -> str:
    """The table as the docs print it (docs/workspace.md is checked against this)."""
    lines = [
        "| From | To | By | Types | Guard | Event |",
        "|---|---|---|---|---|---|",
    ]
    for r in TRANSITIONS:
        by = _cell(r.by) + (" (on entry)" if r.on_entry else "")
        types = _cell(sorted(t.value for t in r.types))
        lines.append(f"| {r.source or '–'} | {r.target} | {by} | {types} | {r.guard} | {r.event} |")
    return "\n".join(lines)
