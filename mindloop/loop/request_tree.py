"""The workspace tree section of a loop root's request (agent-loop §7.1, P4), built at a
cost that follows what changed, not the tree's size.

`tree_section` is the definition: one part per node in walk order, indented as the
input's tree; pinned (never folded): the current node, its ancestors and deps, the
nodes to check and their deps, every node not terminal; the others fold to
`id status title`. In DO with a node: that node and its deps only (the DO override),
found by their place in the tree without walking it.

`TreeParts` keeps one task's last whole tree and builds the next from it: a workspace
value loaded from the store is shared and never changed in place (`repo.load`; a write
copies the nodes it changes), so a node that did not change is the very same object.
The next tree finds the nodes that changed by identity (position by position, while the
ids are the same in the same order), keeps the walk order while no node changed its
parent, children or deps (and none was added), and builds parts again only for the
changed nodes, the nodes that depend on them (their readiness) and the
nodes whose pinning moved with the focus. The result is the same section
`tree_section` builds from scratch (tests/loop/test_loop_request_tree.py).

A task's `TreeParts` is kept per store (`tree_parts`) and shared by the request's tree
section and the phase input's tree (`inputs.tree_text`): both list every node with the
same line (`node_line`), so each builds from what the other built last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress
from operator import is_not

from mindloop.i18n import Lang
from mindloop.loop.phases import Phase
from mindloop.memory.sections import Part, Section, SectionKind
from mindloop.store import Store
from mindloop.store.per_store import PerStore
from mindloop.workspace.models import MAIN, ROOT_ID, Node, NodeKind, NodeStatus
from mindloop.workspace.state import WorkspaceState, is_ready

_KIND = SectionKind.WORKSPACE_TREE


def node_line(state: WorkspaceState, n: Node) -> str:
    """One node as the tree lists it: id, status, kind/type, title, assignee, deps."""
    kind = n.kind if n.kind is NodeKind.PLANNING else n.type
    ready = " ready" if n.status is NodeStatus.NEW and is_ready(state, n) else ""
    if n.assignee == MAIN:
        tail = f" (deps {', '.join(n.deps)})" if n.deps else ""
    elif n.deps:
        tail = f" ({n.assignee}; deps {', '.join(n.deps)})"
    else:
        tail = f" ({n.assignee})"
    # joined, not formatted: the enums are StrEnums, joined as their values without the
    # cost of `Enum.__format__` (the request's tree section lists every node each step)
    return "".join((n.id, " [", n.status, ready, "] ", kind, " ", repr(n.title), tail))


_kept: PerStore[TreeParts] = PerStore(1024)  # tasks whose tree is kept, per store


def tree_parts(store: Store, task: str) -> TreeParts:
    """The task's whole tree as this process last built it from `store`'s workspace
    (see the module doc); a new one for a task not seen yet (or long unused)."""
    found = _kept.get(store, task)
    if found is None:
        found = TreeParts()
        _kept.put(store, task, found)
    return found


def tree_section(
    ws: WorkspaceState,
    phase: Phase,
    node: str | None,
    targets: Sequence[str],
    lang: Lang,
    parts: TreeParts | None = None,
) -> Section:
    """The workspace tree (an existing one) as a section (see the module doc); `parts`:
    the root's tree as last built, to build this one from."""
    peek = ws.peek  # (no view of every node: DO's section lists a few)
    current = peek(node) if node is not None else None
    if phase is Phase.DO and node is not None and current is not None:
        keep = _in_walk_order(ws, [node, *current.deps])
        return Section(kind=_KIND, parts=tuple(_node_part(ws, n, 0, True) for n in keep))
    related = _related(ws, [n for n in (node, *targets) if n is not None and peek(n) is not None])
    if parts is None:
        parts = TreeParts()
    return Section(kind=_KIND, parts=parts.whole(ws, related))


def _related(ws: WorkspaceState, focus: Sequence[str]) -> frozenset[str]:
    """The focus nodes, their ancestors and their deps (pinned whatever their status)."""
    out: set[str] = set(focus)
    for nid in focus:
        out |= {a.id for a in ws.ancestors(nid)}
        found = ws.peek(nid)
        if found is not None:
            out |= set(found.deps)
    return frozenset(out)


class TreeParts:
    """One task's whole tree as last built (see the module doc)."""

    __slots__ = ("_at", "_dependents", "_keys", "_order", "_parts", "_related", "_values")

    def __init__(self) -> None:
        # the nodes it was built from: their ids and the nodes, in the mapping's order
        self._keys: list[str] | None = None
        self._values: list[Node] = []
        self._related: frozenset[str] = frozenset()
        self._order: list[tuple[str, int]] = []  # (node, depth) in walk order
        self._at: dict[str, int] = {}  # node -> its place in `_order` (None: rebuild)
        self._dependents: dict[str, list[str]] = {}  # node -> the nodes whose deps name it
        self._parts: list[Part] = []

    def current(self, ws: WorkspaceState) -> tuple[Part, ...]:
        """Every node's part in walk order, pinned as last built (what the phase input's
        tree lists: the lines, whatever their pins)."""
        return self.whole(ws, self._related)

    def whole(self, ws: WorkspaceState, related: frozenset[str]) -> tuple[Part, ...]:
        """Every node's part in walk order, `related` ones pinned."""
        nodes = ws.view()
        # the same ids in the same order (a workspace's nodes are kept in creation
        # order): the nodes compared by identity, position by position, in C
        keys, values = list(nodes), list(nodes.values())
        if keys != self._keys or len(self._at) != len(self._order):
            return self._build(ws, nodes, related, keys, values)
        before = self._values
        changed = list(compress(range(len(values)), map(is_not, values, before)))
        for i in changed:
            old, new = before[i], values[i]
            if old.parent_id != new.parent_id or old.children != new.children:
                return self._build(ws, nodes, related, keys, values)
            if old.deps != new.deps:
                return self._build(ws, nodes, related, keys, values)
        todo = {keys[i] for i in changed}.union(self._related.symmetric_difference(related))
        for i in changed:
            todo.update(self._dependents.get(keys[i], ()))
        order, at, parts = self._order, self._at, self._parts
        for k in todo:
            j = at.get(k)
            if j is not None:
                n = nodes[k]
                parts[j] = _node_part(ws, n, order[j][1], k in related or not n.terminal)
        self._values, self._related = values, related
        return tuple(parts)

    def _build(
        self,
        ws: WorkspaceState,
        nodes: Mapping[str, Node],
        related: frozenset[str],
        keys: list[str],
        values: list[Node],
    ) -> tuple[Part, ...]:
        order: list[tuple[str, int]] = []
        parts: list[Part] = []
        dependents: dict[str, list[str]] = {}
        for n, depth in ws.walk():
            order.append((n.id, depth))
            parts.append(_node_part(ws, n, depth, n.id in related or not n.terminal))
        for n in values:
            for d in n.deps:
                dependents.setdefault(d, []).append(n.id)
        # lists of their own: what it was built from, whatever becomes of the mapping
        self._keys, self._values, self._related = keys, values, related
        self._order, self._parts, self._dependents = order, parts, dependents
        # a node the walk reaches twice (listed by two parents) rebuilds every time
        self._at = {nid: i for i, (nid, _) in enumerate(order)}
        return tuple(parts)


def _in_walk_order(ws: WorkspaceState, ids: Sequence[str]) -> list[Node]:
    """The nodes of `ids` that `ws.walk()` reaches, in its order (pre-order, children in
    their parent's order), each once: sorted by the path of child positions from the
    root, so the cost is their depth, not the tree's size."""
    keyed: dict[str, tuple[tuple[int, ...], Node]] = {}
    for nid in ids:
        node = ws.peek(nid)
        if node is None or nid in keyed:
            continue
        path = _path(ws, node)
        if path is not None:
            keyed[nid] = (path, node)
    return [n for _, n in sorted(keyed.values(), key=lambda pn: pn[0])]


def _path(ws: WorkspaceState, node: Node) -> tuple[int, ...] | None:
    """The node's place in the walk from the root: each ancestor's position among its
    parent's children, root first (None: the walk never reaches it)."""
    out: list[int] = []
    current = node
    limit = len(ws.nodes)  # (counted, not viewed: a view is a new dict of every node)
    while current.id != ROOT_ID:
        parent = ws.peek(current.parent_id) if current.parent_id is not None else None
        if parent is None or len(out) > limit:
            return None
        try:
            out.append(parent.children.index(current.id))
        except ValueError:
            return None
        current = parent
    out.reverse()
    return tuple(out)


def _node_part(ws: WorkspaceState, n: Node, depth: int, pinned: bool) -> Part:
    indent = "  " * depth + "- "
    # joined (the status as its value, like `node_line`), not formatted
    folded = None if pinned else "".join((indent, n.id, " ", n.status, " ", n.title))
    return Part(id=n.id, text=indent + node_line(ws, n), pinned=pinned, folded=folded)
