"""The tree section built from the root's last tree (`request_tree.TreeParts`) is the tree
section built from scratch, whatever changed between the two workspace values: statuses,
titles, assignees, deps, nodes added or moved, the focus of the phase; and DO's node
with its deps, found by their place in the tree, is what a walk of the tree finds. The
phase input's tree, built from the same last tree (the task's, shared), is the one a walk
writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.loop import inputs
from mindloop.loop.inputs import tree_text
from mindloop.loop.phases import Phase
from mindloop.loop.request_tree import TreeParts, tree_section
from mindloop.workspace.models import Node, NodeKind, NodeStatus
from mindloop.workspace.state import WorkspaceState

TASK = "tasks/t.tsk"
# NEW and DONE most often: readiness (a NEW node whose deps are all DONE) then changes
_STATUS = st.sampled_from([NodeStatus.NEW, NodeStatus.DONE]) | st.sampled_from(list(NodeStatus))
_PHASE = st.sampled_from([Phase.PLAN, Phase.CHECK, Phase.ADJUST, Phase.SELF_IMPROVE, Phase.DO])


def _tree(data: st.DataObject) -> dict[str, Node]:
    """A consistent tree: each node listed by its parent (an earlier node)."""
    count = data.draw(st.integers(1, 10))
    nodes = {"root": Node(id="root", kind=NodeKind.PLANNING, title="task")}
    for i in range(1, count + 1):
        nid = f"n{i}"
        parent = data.draw(st.sampled_from(sorted(nodes)))
        kind = data.draw(st.sampled_from([NodeKind.EXECUTION, NodeKind.PLANNING]))
        deps = data.draw(st.lists(st.sampled_from([*sorted(nodes), "zz"]), max_size=2))
        nodes[nid] = Node(
            id=nid,
            parent_id=parent,
            kind=kind,
            title=f"t{i}",
            status=data.draw(_STATUS),
            deps=deps,
            assignee=data.draw(st.sampled_from(["MAIN", "MAIN", "dev"])),
        )
        p = nodes[parent]
        nodes[parent] = p.model_copy(update={"children": [*p.children, nid]})
    return nodes


def _changed(data: st.DataObject, before: dict[str, Node]) -> dict[str, Node]:
    """A new value as a write makes it: a new mapping, the changed nodes copies, the
    others the very same objects."""
    nodes = dict(before)
    for _ in range(data.draw(st.integers(0, 3))):
        nid = data.draw(st.sampled_from(sorted(nodes)))
        what = data.draw(st.sampled_from(["status", "title", "assignee", "deps", "add", "move"]))
        n = nodes[nid]
        if what == "status":
            nodes[nid] = n.model_copy(update={"status": data.draw(_STATUS)})
        elif what == "title":
            nodes[nid] = n.model_copy(update={"title": n.title + "x"})
        elif what == "assignee":
            nodes[nid] = n.model_copy(update={"assignee": "MAIN" if n.assignee != "MAIN" else "d"})
        elif what == "deps":
            deps = data.draw(st.lists(st.sampled_from(sorted(nodes)), max_size=2))
            nodes[nid] = n.model_copy(update={"deps": deps})
        elif what == "add":
            new = f"n{len(nodes)}"
            nodes[new] = Node(id=new, parent_id=nid, kind=NodeKind.EXECUTION, title="new")
            nodes[nid] = n.model_copy(update={"children": [*n.children, new]})
        elif nid != "root":  # move under another node that is not below it
            below = {nid}
            grew = True
            while grew:
                more = {c for b in below for c in nodes[b].children} - below
                grew, below = bool(more), below | more
            to = data.draw(st.sampled_from(sorted(set(nodes) - below)))
            old = nodes[n.parent_id or "root"]
            nodes[old.id] = old.model_copy(
                update={"children": [c for c in old.children if c != nid]}
            )
            dest = nodes[to]
            nodes[to] = dest.model_copy(update={"children": [*dest.children, nid]})
            nodes[nid] = n.model_copy(update={"parent_id": to})
    return nodes


def _focus(data: st.DataObject, nodes: dict[str, Node]) -> tuple[Phase, str | None, list[str]]:
    ids = sorted(nodes)
    phase = data.draw(_PHASE)
    node = data.draw(st.none() | st.sampled_from([*ids, "zz"]))
    targets = data.draw(st.lists(st.sampled_from(ids), max_size=3))
    return phase, node, targets


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_tree_built_from_the_last_one_is_the_tree_built_from_scratch(data: st.DataObject) -> None:
    kept = TreeParts()
    nodes = _tree(data)
    for step in range(data.draw(st.integers(1, 5))):
        if step:
            nodes = _changed(data, nodes)
        ws = WorkspaceState(task=TASK, nodes=nodes, exists=True, stamp=f"s{step}")
        phase, node, targets = _focus(data, nodes)
        again = tree_section(ws, phase, node, targets, "en", kept)
        fresh = tree_section(ws, phase, node, targets, "en")
        assert again == fresh


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_inputs_tree_built_from_the_last_one_is_the_tree_a_walk_writes(
    data: st.DataObject,
) -> None:
    """The phase input's tree and the request's tree section, built in turn from one
    task's last tree, are each what it is from scratch (the input listing a few nodes at
    most, so its count of the rest is checked too)."""
    kept = TreeParts()
    nodes = _tree(data)
    lines = data.draw(st.integers(1, 12))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inputs, "TREE_LINES", lines)
        for step in range(data.draw(st.integers(1, 6))):
            if step:
                nodes = _changed(data, nodes)
            ws = WorkspaceState(task=TASK, nodes=nodes, exists=True, stamp=f"s{step}")
            if data.draw(st.booleans()):
                assert tree_text(ws, "en", kept) == tree_text(ws, "en")
            else:
                phase, node, targets = _focus(data, nodes)
                again = tree_section(ws, phase, node, targets, "en", kept)
                assert again == tree_section(ws, phase, node, targets, "en")


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_do_shows_its_node_and_deps_in_the_order_a_walk_finds_them(data: st.DataObject) -> None:
    nodes = _changed(data, _tree(data))
    ws = WorkspaceState(task=TASK, nodes=nodes, exists=True)
    node = data.draw(st.sampled_from(sorted(nodes)))
    keep = {node, *nodes[node].deps}
    walked = [n.id for n, _ in ws.walk() if n.id in keep]
    shown = tree_section(ws, Phase.DO, node, [], "en")
    assert [p.id for p in shown.parts] == walked
    assert all(p.pinned and p.text.startswith("- ") for p in shown.parts)


def test_a_node_whose_dep_got_done_is_shown_ready_in_the_next_tree() -> None:
    """Only the dep changed (the dependent is the very same object): its part is built
    again all the same, since its readiness moved."""

    def node(nid: str, status: NodeStatus, deps: tuple[str, ...] = ()) -> Node:
        return Node(
            id=nid, parent_id="root", kind=NodeKind.EXECUTION, title=nid, status=status, deps=deps
        )

    root = Node(id="root", kind=NodeKind.PLANNING, title="task", children=["n1", "n2"])
    nodes = {"root": root, "n1": node("n1", NodeStatus.IN_PROGRESS)}
    nodes["n2"] = node("n2", NodeStatus.NEW, ("n1",))
    kept = TreeParts()
    first = tree_section(
        WorkspaceState(task=TASK, nodes=nodes, exists=True), Phase.PLAN, None, [], "en", kept
    )
    assert "ready" not in first.parts[2].text
    nodes = {**nodes, "n1": nodes["n1"].model_copy(update={"status": NodeStatus.DONE})}
    ws = WorkspaceState(task=TASK, nodes=nodes, exists=True)
    again = tree_section(ws, Phase.PLAN, None, [], "en", kept)
    assert again.parts[2].text == "  - n2 [NEW ready] TASK 'n2' (deps n1)"
    assert again == tree_section(ws, Phase.PLAN, None, [], "en")
