"""The invariants of agent-loop §5.3 (and the tree's structure), checked on every write.

`problems(state)` lists what is wrong with a whole workspace value; a command whose result
has a problem its input did not have is refused (`commands.Session.finish`), so no
sequence of accepted commands can break one. `problems_near(state, before, touched)` is the
same check limited to what a command can have broken (its touched nodes and their
neighbours, cycles through the edges it added, invariant 1, the doc index if it changed):
empty when the result has no problem the input lacked, so `finish` runs the whole check
only then (tests/workspace/test_workspace_invariants_near.py holds both to each other).
Invariants 2 (who may set what) and 6 (every transition is logged) are properties of the
command path itself: the transition table decides 2, and the one transition function
writes the log row of 6.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mindloop.workspace.models import (
    MAIN,
    ROOT_ID,
    Node,
    NodeKind,
    NodeStatus,
    NodeType,
)
from mindloop.workspace.state import WorkspaceState, find_cycle, peeker, planning_status


def problems(state: WorkspaceState) -> list[str]:
    out: list[str] = []
    nodes = state.view()
    if not nodes:
        return out
    _root_problems(nodes.get(ROOT_ID), out)
    _busy_problems(nodes.values(), out)
    get = nodes.get
    for n in nodes.values():
        _node_problems(get, n, out)
    cycle = find_cycle(state)
    if cycle:
        out.append(f"deps form a cycle: {' → '.join(cycle)}")
    _doc_problems(state, nodes.values(), out)
    return out


def cycle_starts(
    state: WorkspaceState, before: WorkspaceState, touched: Iterable[str]
) -> list[str]:
    """Nodes from which every cycle that a change of the `touched` nodes closed is
    reachable (`find_cycle(state, starts)`), `before` having none (no accepted command
    leaves one). A new cycle runs through an edge `before` lacked (a dep, a planning
    node's child), whose source is a touched node: a search from that source finds it;
    when the source only gained children (a node created under a planning node, whose
    every other child a search from the parent would walk), from the children it gained."""
    starts: list[str] = []
    for nid in touched:
        now, was = state.peek(nid), before.peek(nid)
        if now is None:
            continue
        if was is None or now.deps != was.deps or now.kind is not was.kind:
            starts.append(nid)
        elif now.children != was.children and now.kind is NodeKind.PLANNING:
            starts.extend(sorted(set(now.children).difference(was.children)))
    return starts


def problems_near(
    state: WorkspaceState, before: WorkspaceState, touched: Iterable[str]
) -> list[str]:
    """The problems of `state` that a change of the `touched` nodes (from `before`) can
    have caused: a problem `problems(state)` has and `problems(before)` has not is among
    them. Call it after `refresh_planning(state, touched)` (which makes every planning
    node above a touched one agree with its children). A node's checks read only it, its
    parent and children (their `parent_id`, `children`), and its deps (their `type`); so
    besides the touched nodes, their old and new parents, and the children that came or
    went, are checked when those links moved (a child that stayed reads the same of its
    parent: it is among its children), the nodes depending on a node whose type moved,
    cycles through an edge that came (`cycle_starts`), the root when it is touched,
    invariant 1 when a touched node came to work, and the doc index for every node when
    it changed."""
    out: list[str] = []
    touched = list(touched)
    get = peeker(state)
    near: dict[str, None] = {}
    retyped: set[str] = set()
    busy = False
    for nid in touched:
        near[nid] = None
        now, was = state.peek(nid), before.peek(nid)
        if now is None:
            continue
        if was is None:
            near.update(dict.fromkeys(now.children))
            if now.parent_id is not None:
                near[now.parent_id] = None
        elif now.parent_id != was.parent_id or now.children != was.children:
            # a child that stayed a child reads the same of this node (its membership):
            # only those that came or went, and the old and new parents, can change
            near.update(dict.fromkeys(sorted(set(now.children).symmetric_difference(was.children))))
            for parent in (now.parent_id, was.parent_id):
                if parent is not None:
                    near[parent] = None
        if was is not None and now.type is not was.type:
            retyped.add(nid)
        # invariant 1 breaks only where a node comes to work: the others at work now were
        # at work before (a node leaving work, or staying, cannot add a second one)
        busy = busy or (_at_work(now) and (was is None or not _at_work(was)))
    if ROOT_ID in near:
        _root_problems(state.peek(ROOT_ID), out)
    if busy:
        _busy_problems(state.view().values(), out)
    if retyped:
        near.update((n.id, None) for n in state.view().values() if retyped.intersection(n.deps))
    for nid in near:
        node = get(nid)
        if node is not None:
            _node_problems(get, node, out)
    starts = cycle_starts(state, before, touched)
    cycle = find_cycle(state, starts) if starts else None
    if cycle:
        out.append(f"deps form a cycle: {' → '.join(cycle)}")
    if state.index is not before.index and state.index != before.index:
        _doc_problems(state, state.view().values(), out)
    else:
        _doc_problems(state, (n for n in map(state.peek, touched) if n is not None), out)
    return out


def _at_work(n: Node) -> bool:
    return (
        n.kind is NodeKind.EXECUTION and n.status is NodeStatus.IN_PROGRESS and n.assignee == MAIN
    )


def _root_problems(root: Node | None, out: list[str]) -> None:
    if root is None or root.parent_id is not None or root.kind is not NodeKind.PLANNING:
        out.append("the root node must exist, be a planning node and have no parent")


def _busy_problems(nodes: Iterable[Node], out: list[str]) -> None:
    # 1. At most one MAIN node in progress (`_at_work`, the status first: most are not;
    # the enum members bound once: a look-up through the class costs more than the test)
    in_progress, execution = NodeStatus.IN_PROGRESS, NodeKind.EXECUTION
    busy = [
        n.id
        for n in nodes
        if n.status is in_progress and n.kind is execution and n.assignee == MAIN
    ]
    if len(busy) > 1:
        out.append(f"invariant 1: more than one MAIN node is IN_PROGRESS: {', '.join(busy)}")


def _node_problems(get: Callable[[str], Node | None], n: Node, out: list[str]) -> None:
    # structure
    if n.parent_id is not None:
        parent = get(n.parent_id)
        if parent is None:
            out.append(f"{n.id}: its parent {n.parent_id} does not exist")
        elif n.id not in parent.children:
            out.append(f"{n.id}: not among its parent {parent.id}'s children")
    if n.children and n.kind is not NodeKind.PLANNING:
        out.append(f"{n.id}: only planning nodes have children")
    statuses = set()  # of its children (invariant 7, below)
    for c in n.children:
        child = get(c)
        if child is None:
            out.append(f"{n.id}: child {c} does not name it as parent")
            continue
        statuses.add(child.status)
        if child.parent_id != n.id:
            out.append(f"{n.id}: child {c} does not name it as parent")
    missing = [d for d in n.deps if get(d) is None]
    if missing:
        out.append(f"{n.id}: deps that do not exist: {', '.join(missing)}")
    if n.kind is NodeKind.PLANNING:
        # 7. a planning node's status is derived, never set
        derived = planning_status(statuses, started=n.started)
        if n.status is not derived:
            out.append(f"invariant 7: planning node {n.id} is {n.status}, derived {derived}")
        return
    # 3. COMPLETE needs a self-check covering every criterion, and artifacts or a reason.
    if n.status is NodeStatus.COMPLETE:
        passed = {c.criterion for c in n.self_check if c.passed}
        uncovered = [c.id for c in n.acceptance_criteria if c.id not in passed]
        if uncovered:
            out.append(f"invariant 3: {n.id} is COMPLETE but {', '.join(uncovered)} unchecked")
        if not n.artifacts and not n.no_artifacts_reason:
            out.append(f"invariant 3: {n.id} is COMPLETE without artifacts or a reason")
    # 4. Terminal statuses need a conclusion.
    if n.terminal and not n.conclusion.strip():
        out.append(f"invariant 4: {n.id} is {n.status} without a conclusion")
    # 5. No TASK depends on a BENCH; a BENCH has a criterion with `verify`.
    if n.type is NodeType.TASK:
        bench = [d for d in n.deps if (dep := get(d)) is not None and dep.type is NodeType.BENCH]
        if bench:
            out.append(f"invariant 5: TASK {n.id} depends on BENCH {', '.join(bench)}")
    elif not any(c.verify for c in n.acceptance_criteria):
        out.append(f"invariant 5: BENCH {n.id} has no criterion with `verify`")
    if n.dispatch is not None and n.status is not NodeStatus.WAIT:
        out.append(f"{n.id}: dispatched to @{n.dispatch.member} but {n.status}, not WAIT")


def _doc_problems(state: WorkspaceState, nodes: Iterable[Node], out: list[str]) -> None:
    # decision 8: every doc a node references is in the index
    indexed: set[str] | None = None  # made for the first node with docs (most have none)
    for n in nodes:
        if not n.docs:
            continue
        if indexed is None:
            indexed = {d.path for d in state.index}
        for d in n.docs:
            if d.path not in indexed:
                out.append(f"{n.id}: doc {d.path} is not in the workspace index")
