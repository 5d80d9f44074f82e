"""A workspace as one value: its nodes, doc index, rules and focus; and what is derived
from them (a planning node's status, readiness, cycles).

Commands (`commands.py`) work on a copy-on-write view of this value (`cow`: a node is
copied when a command takes it, the doc index and the rules when a command changes them,
so a command costs what it touches, not the workspace) and the store writes the
difference (`repo.py`), so everything here is pure and cheap to test with hypothesis. A value loaded from the store may be shared (`repo.load` caches it): read
it, never change it in place; only a `cow` view is changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from enum import Enum
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

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

_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True)
class _CopyPlan:
    """What a deep copy of a record must copy beyond its own fields (`copy_plan`)."""

    lists: tuple[str, ...]  # lists of immutable values: a new list
    record_lists: tuple[str, ...]  # lists of records of immutable values: each record copied
    records: tuple[str, ...]  # a record of immutable values (or None): copied
    plain: bool  # the model and its records hold nothing beside their fields (`_plain`)


def _immutable(kind: Any) -> bool:
    if get_origin(kind) in (Union, UnionType):
        return all(_immutable(arg) for arg in get_args(kind))
    return kind in (str, int, float, bool, type(None)) or (
        isinstance(kind, type) and issubclass(kind, Enum)
    )


def _flat_record(kind: Any) -> bool:
    return (
        isinstance(kind, type)
        and issubclass(kind, BaseModel)
        and all(_immutable(f.annotation) for f in kind.model_fields.values())
    )


def _plain(model: type[BaseModel]) -> bool:
    """Whether an instance is its fields and nothing else: no private attributes, no
    extra fields (then `_shallow` copies it as `model_copy` would)."""
    return not model.__private_attributes__ and model.model_config.get("extra") != "allow"


def copy_plan(model: type[BaseModel]) -> _CopyPlan | None:
    """How to deep-copy `model`'s instances field by field, from its annotations; None
    when a field has another shape (then dump and validate again)."""
    lists, record_lists, records = [], [], []
    kinds: list[type[BaseModel]] = [model]
    for name, info in model.model_fields.items():
        kind, args = info.annotation, get_args(info.annotation)
        if _immutable(kind):
            continue
        if get_origin(kind) is list and _immutable(args[0]):
            lists.append(name)
        elif get_origin(kind) is list and _flat_record(args[0]):
            record_lists.append(name)
            kinds.append(args[0])
        elif get_origin(kind) in (Union, UnionType) and all(
            a is type(None) or _flat_record(a) for a in args
        ):
            records.append(name)
            kinds += [a for a in args if a is not type(None)]
        else:
            return None
    plain = all(_plain(k) for k in kinds)
    return _CopyPlan(tuple(lists), tuple(record_lists), tuple(records), plain)


_set = object.__setattr__


def _shallow(record: _M) -> _M:
    """`record.model_copy()` of a `_plain` model: its fields' dict and the set of the
    fields given copied, without `model_copy`'s generic path (a command copies the nodes
    it takes, and their records)."""
    copy = object.__new__(type(record))
    _set(copy, "__dict__", record.__dict__.copy())
    _set(copy, "__pydantic_fields_set__", record.__pydantic_fields_set__.copy())
    _set(copy, "__pydantic_extra__", None)
    _set(copy, "__pydantic_private__", None)
    return copy


def _model_copy(record: _M) -> _M:
    return record.model_copy()


_NODE_COPY = copy_plan(Node)


def _copy_node(node: Node) -> Node:
    """A deep copy: its lists and records copied (their items are immutable values or
    records of them), about five times faster than dumping and validating again; the
    same when a field of another shape is added (`copy_plan` gives None)."""
    plan = _NODE_COPY
    if plan is None:
        return Node.model_validate(node.model_dump())
    shallow = _shallow if plan.plain else _model_copy
    copy = shallow(node)
    fields = copy.__dict__
    for name in plan.lists:
        fields[name] = fields[name].copy()
    for name in plan.record_lists:
        fields[name] = [shallow(r) for r in fields[name]]
    for name in plan.records:
        record = fields[name]
        if record is not None:
            fields[name] = shallow(record)
    return copy


def copy_index(index: Iterable[DocRef]) -> list[DocRef]:
    """A doc index of one's own (its entries copied: a command changes them in place)."""
    return [d.model_copy() for d in index]


def copy_rules(rules: Iterable[Rule]) -> list[Rule]:
    """Rules of one's own (each copied with its source: the store completes a new rule's
    id in place)."""
    return [r.model_copy(deep=True) for r in rules]


class NodeMap(MutableMapping[str, Node]):
    """A session's nodes over a shared base that is never changed: a node is copied the
    first time it is taken (`[]`, `get`, `values`, `items`), and the copy is the session's
    from then on. `peek` and `view` read without copying (for checks that change nothing);
    `touched` names the nodes that may differ from the base. Nodes are never removed.
    A state's reads tell it from a plain dict by its exact type (`type(nodes) is NodeMap`:
    an ABC's isinstance of a dict costs five times as much, at every read): not to be
    subclassed."""

    __slots__ = ("_base", "_own")

    def __init__(self, base: Mapping[str, Node]) -> None:
        self._base = base
        self._own: dict[str, Node] = {}

    def __getitem__(self, key: str) -> Node:
        node = self._own.get(key)
        if node is None:
            node = self._own[key] = _copy_node(self._base[key])
        return node

    def __setitem__(self, key: str, node: Node) -> None:
        self._own[key] = node

    def __delitem__(self, key: str) -> None:
        raise TypeError("workspace nodes are never removed")

    def __contains__(self, key: object) -> bool:
        return key in self._own or key in self._base

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from (k for k in self._own if k not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(1 for k in self._own if k not in self._base)

    def peek(self, key: str) -> Node | None:
        return self._own.get(key) or self._base.get(key)

    def view(self) -> dict[str, Node]:
        """Every node as it stands now, in creation order, none copied: to read (a new
        dict: the base's order, the session's nodes in their places, new ones after)."""
        out = dict(self._base)
        out.update(self._own)
        return out

    def touched(self) -> list[str]:
        return list(self._own)


@dataclass
class WorkspaceState:
    task: str  # the task package, rtws-relative (`tasks/login.tsk`)
    lang: Lang = "en"
    nodes: MutableMapping[str, Node] = field(default_factory=dict)  # creation order
    index: list[DocRef] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    focus: str = ROOT_ID
    # found by the start scan; replaced whole (`Session.init`), never changed in place
    offered: list[DocRef] = field(default_factory=list)
    created_at: float = 0.0
    exists: bool = False  # initialised (the store has its row)
    stamp: str = ""  # the store's stamp of this value (`ws_meta.stamp`; "": not stored)

    def copy(self) -> WorkspaceState:
        """A deep copy."""
        return WorkspaceState(
            task=self.task,
            lang=self.lang,
            nodes={k: _copy_node(v) for k, v in self.view().items()},
            index=copy_index(self.index),
            rules=copy_rules(self.rules),
            focus=self.focus,
            offered=[d.model_copy() for d in self.offered],
            created_at=self.created_at,
            exists=self.exists,
            stamp=self.stamp,
        )

    def cow(self) -> WorkspaceState:
        """A copy whose nodes are copied when taken (`NodeMap`): what a command session
        works on. The doc index and the rules are shared until a command takes them
        (`SessionBase.index_taken`, `rules_taken`: copied whole, a command changes their
        records in place); the docs found are shared (replaced whole, never changed in
        place). A command costs the nodes and lists it changes, not the workspace."""
        return self._sharing(NodeMap(self.view()), self.stamp)

    def unstamped(self) -> WorkspaceState:
        """The same value, its parts shared, without a store stamp (`dataclasses.replace`
        without its generic path: a tool step keeps each call's value for the next)."""
        return self._sharing(self.nodes, "")

    def _sharing(self, nodes: MutableMapping[str, Node], stamp: str) -> WorkspaceState:
        """A value with these nodes and stamp, sharing every other part with this one."""
        return WorkspaceState(
            task=self.task,
            lang=self.lang,
            nodes=nodes,
            index=self.index,
            rules=self.rules,
            focus=self.focus,
            offered=self.offered,
            created_at=self.created_at,
            exists=self.exists,
            stamp=stamp,
        )

    def view(self) -> Mapping[str, Node]:
        """The nodes to read (none copied, none to change)."""
        nodes = self.nodes
        return nodes.view() if type(nodes) is NodeMap else nodes

    def touched(self) -> list[str]:
        """The nodes that may differ from the value this one was made from (`cow`)."""
        nodes = self.nodes
        return nodes.touched() if type(nodes) is NodeMap else list(nodes)

    def statuses(self, ids: Iterable[str]) -> set[NodeStatus]:
        """The statuses of the nodes `ids` names (those that exist): a planning node's
        children, in one pass without a call per child."""
        nodes = self.nodes
        if type(nodes) is NodeMap:  # one merged look-up per child (a few are the session's)
            own = nodes._own
            get = {**nodes._base, **own}.get if own else nodes._base.get
        else:
            get = nodes.get
        return {n.status for n in map(get, ids) if n is not None}

    def peek(self, node_id: str) -> Node | None:
        """One node to read (not copied, not to change)."""
        nodes = self.nodes
        return nodes.peek(node_id) if type(nodes) is NodeMap else nodes.get(node_id)

    @property
    def root(self) -> Node | None:
        return self.peek(ROOT_ID)

    def index_doc(self, path: str) -> DocRef | None:
        return next((d for d in self.index if d.path == path), None)

    def walk(self, start: str = ROOT_ID, depth: int | None = None) -> Iterator[tuple[Node, int]]:
        """Pre-order (creation order within each parent), with each node's depth below
        `start`; `depth` cuts the walk below that many levels. The nodes are to read (take
        one with `nodes[id]` to change it)."""
        nodes = self.nodes
        peek = nodes.peek if type(nodes) is NodeMap else nodes.get  # bound once: hot
        stack = [(start, 0)]
        pop, push = stack.pop, stack.extend
        while stack:
            nid, d = pop()
            node = peek(nid)
            if node is None:
                continue
            yield node, d
            children = node.children
            if children and (depth is None or d < depth):
                below = d + 1
                push([(c, below) for c in reversed(children)])

    def ancestors(self, node_id: str) -> list[Node]:
        """Parent first, root last (to read: none is taken)."""
        out: list[Node] = []
        node = self.peek(node_id)
        seen = {node_id}
        while node is not None and node.parent_id is not None and node.parent_id not in seen:
            seen.add(node.parent_id)
            node = self.peek(node.parent_id)
            if node is not None:
                out.append(node)
        return out

    def pending_offers(self) -> list[DocRef]:
        """The start scan's docs (`offered`) that no node references yet: offered to the
        planner, not dispatched. Shown by `node_list`, `node_get root` and PLAN's input,
        so an agent learns them however the workspace was first touched."""
        if not self.offered:
            return []
        given = {d.path for n in self.view().values() for d in n.docs}
        return [d for d in self.offered if d.path not in given]

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
    statuses = set(children)  # which statuses occur is all that decides (one pass)
    if not statuses:
        return NodeStatus.IN_PROGRESS if started else NodeStatus.NEW
    if statuses <= _ENDED_WELL:
        return NodeStatus.DONE
    if statuses <= TERMINAL and NodeStatus.FAILED in statuses:
        return NodeStatus.FAILED
    if started or statuses != _ONLY_NEW:
        return NodeStatus.IN_PROGRESS
    return NodeStatus.NEW


_ENDED_WELL = frozenset({NodeStatus.DONE, NodeStatus.CANCELLED})
_ONLY_NEW = frozenset({NodeStatus.NEW})
# a child in one of these makes its planning parent IN_PROGRESS, whatever the others are
_AT_WORK = frozenset(NodeStatus) - TERMINAL - _ONLY_NEW


def refresh_planning(state: WorkspaceState, touched: Iterable[str] | None = None) -> None:
    """Recompute planning nodes' statuses from their children (bottom-up): every one, or
    with `touched` only the ancestors of those nodes (a status is derived from the
    children's alone, so no other can move). Only the nodes whose status moves are taken
    (copied, in a session)."""
    peek = peeker(state)  # sees the nodes this refresh takes (the session's copies)
    if touched is None:
        order = [n.id for n, _ in state.walk()]
    else:
        depth: dict[str, int] = {}
        for nid in touched:
            chain = []
            node = peek(nid)
            while node is not None and node.id not in depth and node.id not in chain:
                chain.append(node.id)
                node = peek(node.parent_id) if node.parent_id is not None else None
            base = depth[node.id] if node is not None and node.id in depth else -1
            for i, cid in enumerate(reversed(chain)):
                depth[cid] = base + 1 + i
        order = sorted(depth, key=depth.__getitem__)  # parents before children
    # a planning node with a child at work (neither NEW nor ended) is IN_PROGRESS whatever
    # its other children are (`planning_status`): known from the touched child (or the
    # refreshed planning child) below it, without gathering every child's status
    at_work: set[str] = set()
    for nid in reversed(order):  # children before their parents
        node = peek(nid)
        if node is None:
            continue
        status = node.status
        if node.kind is NodeKind.PLANNING:
            if nid in at_work:
                status = NodeStatus.IN_PROGRESS
            else:
                status = planning_status(state.statuses(node.children), started=node.started)
            if status is not node.status:
                state.nodes[nid].status = status
        parent = node.parent_id
        if status in _AT_WORK and parent is not None and parent not in at_work:
            above = peek(parent)
            if above is not None and nid in above.children:
                at_work.add(parent)


def is_ready(state: WorkspaceState, node: Node) -> bool:
    """Derived, never stored: NEW, assignee MAIN, every dep DONE."""
    return (
        node.kind is NodeKind.EXECUTION
        and node.status is NodeStatus.NEW
        and node.assignee == MAIN
        and all(
            dep.status is NodeStatus.DONE
            for dep in (state.peek(d) for d in node.deps)
            if dep is not None
        )
    )


def peeker(state: WorkspaceState) -> Callable[[str], Node | None]:
    """A state's node by id, read without copying and without building a dict (checks of
    a few nodes read only what they reach): one call per lookup."""
    nodes = state.nodes
    if type(nodes) is not NodeMap:
        return nodes.get
    own, base = nodes._own, nodes._base

    def peek(key: str) -> Node | None:
        node = own.get(key)
        return node if node is not None else base.get(key)

    return peek


def find_cycle(state: WorkspaceState, starts: Iterable[str] | None = None) -> list[str] | None:
    """A cycle through deps and planning containment (a node waits for its deps; a
    planning node waits for its children), as the list of ids around it, or None. With
    `starts`, only cycles reachable from those nodes (a change can only close a cycle
    through an edge it added: `invariants.cycle_starts`)."""
    whole = state.view() if starts is None else None
    get = whole.get if whole is not None else peeker(state)

    def edges(nid: str) -> list[str]:
        node = get(nid)
        assert node is not None
        return [*node.deps, *node.children] if node.kind is NodeKind.PLANNING else node.deps

    white, grey, black = 0, 1, 2
    color: dict[str, int] = {}
    for start in whole if whole is not None else list(starts or ()):
        if get(start) is None or color.get(start, white) != white:
            continue
        path: list[str] = []
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(edges(start)))]
        color[start] = grey
        path.append(start)
        while stack:
            nid, it = stack[-1]
            advanced = False
            for nxt in it:
                if get(nxt) is None:
                    continue
                c = color.get(nxt, white)
                if c == grey:
                    return [*path[path.index(nxt) :], nxt]
                if c == white:
                    color[nxt] = grey
                    path.append(nxt)
                    stack.append((nxt, iter(edges(nxt))))
                    advanced = True
                    break
            if not advanced:
                color[nid] = black
                path.pop()
                stack.pop()
    return None
