"""A workspace as one value: its nodes, doc index, rules and focus; and what is derived
from them (a planning node's status, readiness, cycles).

Commands (`commands.py`) work on a copy of this value and the store writes the difference
(`repo.py`), so everything here is pure and cheap to test with hypothesis.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from mindloop.i18n import Lang
from mindloop.workspace.models import (
    MAIN,
    ROOT_ID,
    TERMINAL,
    DocRef,
    DocStatus,
    Node,
    NodeKind,
    NodeStatus,
    Rule,
)


@dataclass
class WorkspaceState:
    task: str  # the task package, rtws-relative (`tasks/login.tsk`)
    lang: Lang = "en"
    nodes: dict[str, Node] = field(default_factory=dict)  # creation order
    index: list[DocRef] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    focus: str = ROOT_ID
    offered: list[DocRef] = field(default_factory=list)  # found by the start scan
    created_at: float = 0.0
    exists: bool = False  # initialised (the store has its row)

    def copy(self) -> WorkspaceState:
        """A deep copy (every command session works on one). Nodes are plain models, so
        dumping and validating again copies them about three times faster than
        `copy.deepcopy`, on the path of every workspace command."""
        validate = Node.model_validate
        return WorkspaceState(
            task=self.task,
            lang=self.lang,
            nodes={k: validate(v.model_dump()) for k, v in self.nodes.items()},
            index=[d.model_copy() for d in self.index],
            rules=[r.model_copy(deep=True) for r in self.rules],
            focus=self.focus,
            offered=[d.model_copy() for d in self.offered],
            created_at=self.created_at,
            exists=self.exists,
        )

    @property
    def root(self) -> Node | None:
        return self.nodes.get(ROOT_ID)

    def index_doc(self, path: str) -> DocRef | None:
        return next((d for d in self.index if d.path == path), None)

    def walk(self, start: str = ROOT_ID, depth: int | None = None) -> Iterator[tuple[Node, int]]:
        """Pre-order (creation order within each parent), with each node's depth below
        `start`; `depth` cuts the walk below that many levels."""
        stack = [(start, 0)]
        while stack:
            nid, d = stack.pop()
            node = self.nodes.get(nid)
            if node is None:
                continue
            yield node, d
            if depth is None or d < depth:
                stack.extend((c, d + 1) for c in reversed(node.children))

    def ancestors(self, node_id: str) -> list[Node]:
        """Parent first, root last."""
        out: list[Node] = []
        node = self.nodes.get(node_id)
        seen = {node_id}
        while node is not None and node.parent_id is not None and node.parent_id not in seen:
            seen.add(node.parent_id)
            node = self.nodes.get(node.parent_id)
            if node is not None:
                out.append(node)
        return out

    def prompt_docs(self, node: Node) -> list[DocRef]:
        """The docs that may enter the node's prompt: its own active references whose
        index entry is not expired (an index expiry retires a doc everywhere). Nothing
        inherited, nothing of the index beyond these."""
        out = []
        for ref in node.active_docs():
            entry = self.index_doc(ref.path)
            if entry is None or entry.status is DocStatus.ACTIVE:
                out.append(ref)
        return out


def planning_status(children: Iterable[NodeStatus], *, started: bool = False) -> NodeStatus:
    """agent-loop §5.2: DONE if all children are DONE or CANCELLED; FAILED if all are
    terminal and one FAILED; IN_PROGRESS if any child started; else NEW (also with no
    children at all). A node that was split while in progress (`started`) stays
    IN_PROGRESS until its children end: its work goes on in them."""
    statuses = list(children)
    if not statuses:
        return NodeStatus.IN_PROGRESS if started else NodeStatus.NEW
    if all(s in (NodeStatus.DONE, NodeStatus.CANCELLED) for s in statuses):
        return NodeStatus.DONE
    if all(s in TERMINAL for s in statuses) and NodeStatus.FAILED in statuses:
        return NodeStatus.FAILED
    if started or any(s is not NodeStatus.NEW for s in statuses):
        return NodeStatus.IN_PROGRESS
    return NodeStatus.NEW


def refresh_planning(state: WorkspaceState) -> None:
    """Recompute every planning node's status from its children (bottom-up)."""
    order = [n for n, _ in state.walk()]
    for node in reversed(order):
        if node.kind is NodeKind.PLANNING:
            node.status = planning_status(
                (state.nodes[c].status for c in node.children if c in state.nodes),
                started=node.started,
            )


def is_ready(state: WorkspaceState, node: Node) -> bool:
    """Derived, never stored: NEW, assignee MAIN, every dep DONE."""
    return (
        node.kind is NodeKind.EXECUTION
        and node.status is NodeStatus.NEW
        and node.assignee == MAIN
        and all(state.nodes[d].status is NodeStatus.DONE for d in node.deps if d in state.nodes)
    )


def find_cycle(state: WorkspaceState) -> list[str] | None:
    """A cycle through deps and planning containment (a node waits for its deps; a
    planning node waits for its children), as the list of ids around it, or None."""
    edges: dict[str, list[str]] = {}
    for node in state.nodes.values():
        targets = list(node.deps)
        if node.kind is NodeKind.PLANNING:
            targets += node.children
        edges[node.id] = targets
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(edges, white)
    for start in edges:
        if color[start] != white:
            continue
        path: list[str] = []
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(edges[start]))]
        color[start] = grey
        path.append(start)
        while stack:
            nid, it = stack[-1]
            advanced = False
            for nxt in it:
                if nxt not in color:
                    continue
                if color[nxt] == grey:
                    return [*path[path.index(nxt) :], nxt]
                if color[nxt] == white:
                    color[nxt] = grey
                    path.append(nxt)
                    stack.append((nxt, iter(edges[nxt])))
                    advanced = True
                    break
            if not advanced:
                color[nid] = black
                path.pop()
                stack.pop()
    return None
