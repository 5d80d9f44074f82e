"""Which phase comes next: the runtime decides, from node statuses (agent-loop §4).

After each phase and on every wake the rules R0–R8 are evaluated in order over the facts
of the task (`RouteFacts`: the workspace, its waits, the ended phase and its hint); each
rule that holds adds a candidate. R0 and R1 cannot be overridden. Otherwise a hint that is
legal for the ended phase (`phases.PHASES[...].hints`; WAIT only if the phase registered a
wait; PLAN after ADJUST only while a re-plan is left) picks among the candidates, and the
first candidate wins when it does not. An illegal hint is dropped and said so
(`HINT_ILLEGAL`, counted by the driver as a FORMAT failure). No candidate at all means
nothing can move until a wait resolves: the task parks.

Everything here is pure (hypothesis tests it, `tests/loop/test_loop_routing.py`): the
driver gathers the facts, this module decides, the driver carries the decision out. The
one thing kept is a task's last count of its nodes (`KeptTally`), from which the driver
counts the next workspace: the same tally `count_nodes` makes, whatever it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import compress
from operator import is_not

from mindloop.loop.phases import PHASES, Hint, Phase
from mindloop.workspace.models import MAIN, TERMINAL, Node, NodeKind, NodeStatus, NodeType
from mindloop.workspace.state import WorkspaceState

HINT_ILLEGAL = "HINT_ILLEGAL"


class Target(StrEnum):
    """What a routing decision does next."""

    ROUTER = "ROUTER"  # a new user message: route it (for a task run, it is new scope)
    PARK = "PARK"  # nothing to do until a wait resolves
    PLAN = "PLAN"
    DO = "DO"
    CHECK = "CHECK"
    ADJUST = "ADJUST"
    END = "END"  # every node terminal: SELF_IMPROVE once, then the task ends

    @property
    def phase(self) -> Phase | None:
        return _PHASE_OF.get(self)


# The phase each target enters (its value's), looked up once per decision.
_PHASE_OF: dict[Target, Phase] = {t: Phase(t.value) for t in Target if t.value in Phase.__members__}


HINT_TARGET: dict[Hint, Target] = {
    Hint.PLAN: Target.PLAN,
    Hint.DO: Target.DO,
    Hint.CHECK: Target.CHECK,
    Hint.ADJUST: Target.ADJUST,
    Hint.WAIT: Target.PARK,
    Hint.END: Target.END,
}


@dataclass(frozen=True)
class NodeTally:
    """A workspace's execution nodes as the rules see them, counted in one pass
    (`count_nodes`): every rule reads this instead of walking the nodes again."""

    total: int = 0  # execution nodes
    terminal: int = 0  # DONE, FAILED or CANCELLED
    waiting: int = 0  # non-terminal nodes in WAIT
    check_failed: bool = False  # a node CHECK_FAILED or ADJUSTING
    complete: bool = False  # a node COMPLETE
    main_at_work: bool = False  # a MAIN node IN_PROGRESS
    main_ready: bool = False  # a MAIN node ready (`state.is_ready`)
    blocked: bool = False  # a NEW node blocked only by FAILED or CANCELLED deps (R5)
    benches_waiting: tuple[str, ...] = ()  # BENCH nodes in WAIT
    # what routing does on the way (`TaskLoop._decide`): a MAIN node waits on its own
    # waits (`node_waits.settle`), a member node is to dispatch (`phase_ops.dispatch_ready`)
    own_waiting: bool = False
    dispatchable: bool = False


def own_wait(n: Node) -> bool:
    """A MAIN node that waits and is no dispatch's (nor a BENCH waiting to be ready): its
    waits are its own (`node_waits`)."""
    return (
        n.status is NodeStatus.WAIT
        and n.dispatch is None
        and n.type is NodeType.TASK
        and n.kind is NodeKind.EXECUTION
        and n.assignee == MAIN
    )


def dispatchable(state: WorkspaceState, node: Node) -> bool:
    """A NEW member node whose deps are all DONE: the runtime dispatches it (NEW → WAIT,
    agent-loop §5.4)."""
    return (
        node.kind is NodeKind.EXECUTION
        and node.type is NodeType.TASK
        and node.status is NodeStatus.NEW
        and node.member is not None
        and all(d.status is NodeStatus.DONE for d in map(state.peek, node.deps) if d is not None)
    )


def count_nodes(state: WorkspaceState) -> NodeTally:
    """Count `state`'s execution nodes for the rules (one pass; deps looked up only for
    NEW nodes). The enum members are bound once and compared by identity: a member
    looked up through its class costs more than the test, at every node of every
    transition. NEW and the terminal statuses — where most nodes are — are tested
    first, and a MAIN node is not asked for its member (a property call)."""
    total = terminal = waiting = 0
    check_failed = complete = at_work = ready = blocked = own = member = False
    benches: list[str] = []
    peek = state.peek
    execution, bench = NodeKind.EXECUTION, NodeType.BENCH
    wait, new, done = NodeStatus.WAIT, NodeStatus.NEW, NodeStatus.DONE
    failed, cancelled = NodeStatus.FAILED, NodeStatus.CANCELLED
    failed_, adjusting = NodeStatus.CHECK_FAILED, NodeStatus.ADJUSTING
    complete_, in_progress = NodeStatus.COMPLETE, NodeStatus.IN_PROGRESS
    main = MAIN
    for n in state.view().values():  # read, none copied
        if n.kind is not execution:
            continue
        total += 1
        status = n.status
        if status is new:  # the statuses most nodes are in, tested first
            assignee = n.assignee
            if not member and assignee != main and n.member is not None:
                member = dispatchable(state, n)
            if ready and blocked:
                continue
            if not n.deps:  # the common case: ready
                ready = ready or assignee == main
                continue
            deps = [d for d in map(peek, n.deps) if d is not None]
            open_ = [d for d in deps if d.status is not done]
            if not open_:
                ready = ready or assignee == main
            elif all(d.status is failed or d.status is cancelled for d in open_):  # R5
                blocked = True
        elif status is done or status is failed or status is cancelled:  # TERMINAL
            terminal += 1
        elif status is wait:
            waiting += 1
            if n.type is bench:
                benches.append(n.id)
            own = own or own_wait(n)
        elif status is failed_ or status is adjusting:
            check_failed = True
        elif status is complete_:
            complete = True
        elif status is in_progress:
            at_work = at_work or n.assignee == main
    return NodeTally(
        total,
        terminal,
        waiting,
        check_failed,
        complete,
        at_work,
        ready,
        blocked,
        tuple(benches),
        own,
        member,
    )


# What one node adds to a tally (`_node_marks`): a bit each; a tally counts the nodes with each.
_EXECUTION, _TERMINAL, _WAITING, _CHECK_FAILED, _COMPLETE, _AT_WORK = 1, 2, 4, 8, 16, 32
_READY, _BLOCKED, _BENCH_WAITING, _OWN_WAITING, _DISPATCHABLE = 64, 128, 256, 512, 1024
_BITS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _node_marks(state: WorkspaceState, n: Node) -> int:
    """What node `n` adds to `count_nodes`'s tally, as bits (each as `count_nodes` tests
    it: the same node in the same workspace gives the same answers)."""
    if n.kind is not NodeKind.EXECUTION:
        return 0
    status = n.status
    if status is NodeStatus.NEW:
        main = n.assignee == MAIN
        out = _EXECUTION
        if not main and n.member is not None and dispatchable(state, n):
            out |= _DISPATCHABLE
        open_ = [d for d in map(state.peek, n.deps) if d is not None]
        open_ = [d for d in open_ if d.status is not NodeStatus.DONE]
        if not open_:
            return out | _READY if main else out
        if all(d.status is NodeStatus.FAILED or d.status is NodeStatus.CANCELLED for d in open_):
            out |= _BLOCKED  # R5
        return out
    if status in TERMINAL:
        return _EXECUTION | _TERMINAL
    if status is NodeStatus.WAIT:
        out = _EXECUTION | _WAITING
        if n.type is NodeType.BENCH:
            out |= _BENCH_WAITING
        return out | _OWN_WAITING if own_wait(n) else out
    if status is NodeStatus.CHECK_FAILED or status is NodeStatus.ADJUSTING:
        return _EXECUTION | _CHECK_FAILED
    if status is NodeStatus.COMPLETE:
        return _EXECUTION | _COMPLETE
    if status is NodeStatus.IN_PROGRESS and n.assignee == MAIN:
        return _EXECUTION | _AT_WORK
    return _EXECUTION


class KeptTally:
    """One task's tally (`count_nodes`) as last counted, to count the next workspace
    from: the same tally, at a cost that follows what changed, not the tree's size (the
    loop counts at every transition).

    A workspace value loaded from the store is shared and never changed in place (a
    write copies the nodes it changes), so a node that did not change is the very same
    object: the next count finds the changed nodes by identity, position by position
    (in C), while the ids are the same in the same order, and marks again (`_node_marks`)
    only them and the nodes whose deps name them (their readiness); a changed list of
    deps, or of ids, counts the whole again. The kept nodes are held, so no identity
    is reused while they are compared."""

    __slots__ = ("_benches", "_counts", "_dependents", "_keys", "_marks", "_tally", "_values")

    def __init__(self) -> None:
        self._keys: list[str] | None = None
        self._values: list[Node] = []
        self._marks: list[int] = []
        self._counts: dict[int, int] = {}  # bit -> the nodes marked with it
        self._dependents: dict[str, list[int]] = {}  # node -> where the nodes naming it are
        self._benches: tuple[str, ...] = ()
        self._tally = NodeTally()

    def count(self, state: WorkspaceState) -> NodeTally:
        nodes = state.view()
        keys, values = list(nodes), list(nodes.values())
        if keys != self._keys:
            return self._build(state, keys, values)
        before = self._values
        changed = list(compress(range(len(values)), map(is_not, values, before)))
        if not changed:
            return self._tally
        for i in changed:
            if values[i].deps != before[i].deps:
                return self._build(state, keys, values)
        todo = set(changed)
        for i in changed:
            todo.update(self._dependents.get(keys[i], ()))
        marks, counts = self._marks, self._counts
        benches = False
        for i in todo:
            old, new = marks[i], _node_marks(state, values[i])
            if old == new:
                continue
            marks[i] = new
            for bit in _BITS:
                if old & bit:
                    counts[bit] -= 1
                if new & bit:
                    counts[bit] += 1
            benches = benches or bool((old | new) & _BENCH_WAITING)
        if benches:
            self._benches = tuple(compress(keys, [m & _BENCH_WAITING for m in marks]))
        self._values = values
        self._tally = self._made()
        return self._tally

    def _build(self, state: WorkspaceState, keys: list[str], values: list[Node]) -> NodeTally:
        marks = [_node_marks(state, n) for n in values]
        dependents: dict[str, list[int]] = {}
        for i, n in enumerate(values):
            for d in n.deps:
                dependents.setdefault(d, []).append(i)
        self._keys, self._values, self._marks, self._dependents = keys, values, marks, dependents
        self._counts = {bit: sum(1 for m in marks if m & bit) for bit in _BITS}
        self._benches = tuple(compress(keys, [m & _BENCH_WAITING for m in marks]))
        self._tally = self._made()
        return self._tally

    def _made(self) -> NodeTally:
        c = self._counts
        return NodeTally(
            c[_EXECUTION],
            c[_TERMINAL],
            c[_WAITING],
            c[_CHECK_FAILED] > 0,
            c[_COMPLETE] > 0,
            c[_AT_WORK] > 0,
            c[_READY] > 0,
            c[_BLOCKED] > 0,
            self._benches,
            c[_OWN_WAITING] > 0,
            c[_DISPATCHABLE] > 0,
        )


@dataclass(frozen=True)
class RouteFacts:
    """What routing looks at, gathered by the driver in one read."""

    workspace: WorkspaceState
    new_message: bool = False  # a user message that resolved no open wait (R0)
    task_waits: int = 0  # open waits of the task itself, not of a node (R1)
    new_scope: bool = False  # a message flagged new scope (R6)
    bench_ready: frozenset[str] = frozenset()  # BENCH nodes for which BENCH_READY holds
    ended: Phase | None = None  # the phase that just ended (None: a wake)
    hint: Hint | None = None
    wait_registered: bool = False  # the ended phase registered a wait
    replan_left: bool = True  # ADJUST → PLAN still allowed (once per task)
    planned: bool = False  # PLAN ran since the scope last changed
    # `count_nodes(workspace)`, when the caller counted it already (None: counted when first
    # asked, then kept)
    nodes: NodeTally | None = None

    def execution(self) -> list[Node]:
        return [n for n in self.workspace.nodes.values() if n.kind is NodeKind.EXECUTION]

    def tally(self) -> NodeTally:
        """The workspace's execution nodes, counted once."""
        if self.nodes is None:
            object.__setattr__(self, "nodes", count_nodes(self.workspace))
        assert self.nodes is not None
        return self.nodes


def _has_exec(f: RouteFacts) -> bool:
    return f.tally().total > 0


def _check_failed(f: RouteFacts) -> bool:
    # A node ADJUST left ADJUSTING (its entry ended before it moved the node) is ADJUST's
    # still: only ADJUST moves it out (invariant 2), so the reference's R2 covers it too.
    return f.tally().check_failed


def _to_check(f: RouteFacts) -> bool:
    t = f.tally()
    return t.complete or any(b in f.bench_ready for b in t.benches_waiting)


def _to_do(f: RouteFacts) -> bool:
    t = f.tally()
    return t.main_at_work or t.main_ready


def blocked_by_failure(state: WorkspaceState, node: Node) -> bool:
    """A NEW node blocked only by FAILED or CANCELLED deps (R5)."""
    if node.status is not NodeStatus.NEW:
        return False
    open_ = [state.nodes[d] for d in node.deps if d in state.nodes]
    open_ = [d for d in open_ if d.status is not NodeStatus.DONE]
    return bool(open_) and all(d.status in (NodeStatus.FAILED, NodeStatus.CANCELLED) for d in open_)


def blocked_nodes(state: WorkspaceState) -> list[str]:
    """R5's nodes, in tree pre-order: what ADJUST's plan mode is entered for."""
    return [
        n.id
        for n, _ in state.walk()
        if n.kind is NodeKind.EXECUTION and blocked_by_failure(state, n)
    ]


def _blocked(f: RouteFacts) -> bool:
    return f.tally().blocked


def _to_plan(f: RouteFacts) -> bool:
    # Once PLAN ran for the current scope, an empty tree is its verdict (R8 holds
    # vacuously), not a reason to plan for ever; new scope (a message) plans again.
    return f.new_scope or (not _has_exec(f) and not f.planned)


def _all_wait(f: RouteFacts) -> bool:
    t = f.tally()
    open_ = t.total - t.terminal
    return open_ > 0 and t.waiting == open_


def _all_terminal(f: RouteFacts) -> bool:
    t = f.tally()
    return t.terminal == t.total


@dataclass(frozen=True)
class Rule:
    id: str
    condition: str  # as the reference states it
    target: Target
    holds: Callable[[RouteFacts], bool]
    fixed: bool = False  # a hint cannot override it


RULES: tuple[Rule, ...] = (
    Rule(
        "R0",
        "a new user message that resolves no open wait",
        Target.ROUTER,
        lambda f: f.new_message,
        fixed=True,
    ),
    Rule("R1", "an OPEN task-level wait", Target.PARK, lambda f: f.task_waits > 0, fixed=True),
    Rule("R2", "a node is CHECK_FAILED (or still ADJUSTING)", Target.ADJUST, _check_failed),
    Rule(
        "R3", "a node is COMPLETE, or a BENCH node satisfies BENCH_READY", Target.CHECK, _to_check
    ),
    Rule("R4", "a MAIN node is IN_PROGRESS, or a MAIN node is ready", Target.DO, _to_do),
    Rule("R5", "a NEW node is blocked only by FAILED or CANCELLED deps", Target.ADJUST, _blocked),
    Rule(
        "R6",
        "the tree has no execution node yet, or a message flagged new scope",
        Target.PLAN,
        _to_plan,
    ),
    Rule("R7", "every non-terminal node is WAIT", Target.PARK, _all_wait),
    Rule("R8", "every node is terminal", Target.END, _all_terminal),
)


@dataclass(frozen=True)
class Decision:
    target: Target
    rule: str  # the rule that chose it ("hint" when a hint picked it, "-" for none)
    candidates: tuple[tuple[str, Target], ...] = ()
    hint: Hint | None = None
    hint_used: bool = False
    hint_dropped: str | None = None  # why an illegal hint was dropped (HINT_ILLEGAL)
    notes: tuple[str, ...] = field(default_factory=tuple)


def hint_problem(f: RouteFacts) -> str | None:
    """Why the ended phase's hint is illegal (None: legal, or no hint)."""
    if f.hint is None or f.ended is None:
        return None
    legal = PHASES[f.ended].hints
    if f.hint not in legal:
        allowed = ", ".join(legal)
        return f"{f.hint} is not a legal hint after {f.ended} (legal: {allowed})"
    if f.hint is Hint.WAIT and not f.wait_registered:
        return f"WAIT needs a registered wait; {f.ended} registered none"
    if f.hint is Hint.PLAN and not f.replan_left:
        return "ADJUST may go back to PLAN once per task, and already did"
    return None


def route(f: RouteFacts) -> Decision:
    """The next step of the loop (pure)."""
    found = tuple((r.id, r.target) for r in RULES if r.holds(f))
    problem = hint_problem(f)
    for rule in RULES:
        if rule.fixed and (rule.id, rule.target) in found:
            return Decision(rule.target, rule.id, found, f.hint, hint_dropped=problem)
    candidates = list(found)
    if problem is None and f.hint is not None:
        wanted = HINT_TARGET[f.hint]
        if f.hint is Hint.PLAN and f.ended is Phase.ADJUST:
            candidates.append(("hint", Target.PLAN))  # ADJUST's re-plan (once per task)
        for rule_id, target in candidates:
            if target is wanted:
                by = rule_id if rule_id == "hint" else f"{rule_id}+hint"
                return Decision(target, by, found, f.hint, hint_used=True)
    if not candidates:
        return Decision(Target.PARK, "-", found, f.hint, hint_dropped=problem)
    rule_id, target = candidates[0]
    return Decision(target, rule_id, found, f.hint, hint_dropped=problem)


def rules_markdown() -> str:
    """The rule table as the docs print it."""
    lines = ["| # | Condition | Candidate |", "|---|---|---|"]
    lines += [f"| {r.id} | {r.condition} | {r.target} |" for r in RULES]
    return "\n".join(lines)
