"""Which nodes a phase is entered for (`phase_ops.current_do_node`, `check_targets`):
found without walking the tree when one node qualifies, always the nodes, in the order, a
walk of the tree gives (hypothesis over random nested trees)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.loop.phase_ops import check_targets, current_do_node
from mindloop.workspace.models import MAIN, ROOT_ID, Node, NodeKind, NodeStatus, NodeType
from mindloop.workspace.state import WorkspaceState, is_ready


@st.composite
def trees(draw: st.DrawFn) -> WorkspaceState:
    state = WorkspaceState(task="tasks/t.tsk", exists=True)
    state.nodes[ROOT_ID] = Node(id=ROOT_ID, kind=NodeKind.PLANNING, title="t")
    parents = [ROOT_ID]
    for i in range(draw(st.integers(min_value=0, max_value=12))):
        kind = draw(st.sampled_from([NodeKind.EXECUTION, NodeKind.EXECUTION, NodeKind.PLANNING]))
        parent = draw(st.sampled_from(parents))
        node = Node(
            id=f"n{i}",
            kind=kind,
            title=f"n{i}",
            parent_id=parent,
            status=draw(st.sampled_from(list(NodeStatus))),
            type=draw(st.sampled_from(list(NodeType)))
            if kind is NodeKind.EXECUTION
            else NodeType.TASK,
            assignee=draw(st.sampled_from([MAIN, MAIN, "MEMBER:qa"])),
            deps=draw(st.lists(st.sampled_from([f"n{j}" for j in range(i)] or ["x"]), max_size=2)),
        )
        state.nodes[node.id] = node
        state.nodes[parent].children.append(node.id)
        if kind is NodeKind.PLANNING:
            parents.append(node.id)
    return state


@settings(max_examples=300, deadline=None)
@given(trees(), st.data())
def test_the_nodes_a_phase_is_entered_for_are_the_walks(
    state: WorkspaceState, data: st.DataObject
) -> None:
    order = [n for n, _ in state.walk()]
    at_work = [
        n.id
        for n in order
        if n.kind is NodeKind.EXECUTION
        and n.assignee == MAIN
        and n.status is NodeStatus.IN_PROGRESS
    ]
    ready = [n.id for n in order if is_ready(state, n)]
    assert current_do_node(state) == (at_work or ready or [None])[0]
    benches = [n.id for n in order if n.type is NodeType.BENCH]
    ready_benches = frozenset(data.draw(st.lists(st.sampled_from(benches or ["x"]), max_size=2)))
    assert check_targets(state, ready_benches) == [
        n.id
        for n in order
        if n.kind is NodeKind.EXECUTION
        and (
            n.status is NodeStatus.COMPLETE or (n.type is NodeType.BENCH and n.id in ready_benches)
        )
    ]


def test_the_first_node_at_work_is_the_walks_first_not_the_first_created() -> None:
    state = WorkspaceState(task="tasks/t.tsk", exists=True)
    state.nodes[ROOT_ID] = Node(id=ROOT_ID, kind=NodeKind.PLANNING, title="t")

    def add(nid: str, kind: NodeKind, parent: str, status: NodeStatus, **kw: object) -> None:
        state.nodes[nid] = Node(
            id=nid,
            kind=kind,
            title=nid,
            parent_id=parent,
            status=status,
            **kw,  # type: ignore[arg-type]
        )
        state.nodes[parent].children.append(nid)

    add("n0", NodeKind.PLANNING, ROOT_ID, NodeStatus.IN_PROGRESS)
    add("n1", NodeKind.EXECUTION, ROOT_ID, NodeStatus.IN_PROGRESS)
    add("n2", NodeKind.EXECUTION, "n0", NodeStatus.IN_PROGRESS)
    add("n3", NodeKind.EXECUTION, ROOT_ID, NodeStatus.COMPLETE)
    add("n4", NodeKind.EXECUTION, "n0", NodeStatus.COMPLETE)
    assert current_do_node(state) == "n2"  # walked before n1
    assert check_targets(state, frozenset()) == ["n4", "n3"]
    # a node no walk reaches (not among its parent's children) is nobody's target
    state.nodes["n5"] = Node(
        id="n5", kind=NodeKind.EXECUTION, title="n5", parent_id="n0", status=NodeStatus.COMPLETE
    )
    state.nodes["n3"].status = NodeStatus.DONE
    state.nodes["n4"].status = NodeStatus.DONE
    assert check_targets(state, frozenset()) == []
