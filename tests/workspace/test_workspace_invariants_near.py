"""Property: the invariant check limited to what a change touched (`problems_near`) finds
something whenever the whole check finds a problem the input did not have, whatever a
session did to the nodes it took; and a session's planning refresh of the touched nodes'
ancestors gives what a refresh of the whole tree gives."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindloop.workspace.commands import Session
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.invariants import problems, problems_near
from mindloop.workspace.models import DocRef, NodeKind, NodeStatus, NodeType
from mindloop.workspace.state import WorkspaceState, find_cycle, refresh_planning
from tests.workspace.test_workspace_properties import _run, actions
from tests.workspace.ws_util import CHAT, apply, fresh, tree

pick = st.integers(min_value=0, max_value=50)
edits = st.lists(
    st.tuples(
        pick,
        st.sampled_from(
            ["status", "parent", "child", "dep", "kind", "type", "doc", "dispatch", "index"]
        ),
        pick,
        st.sampled_from(list(NodeStatus)),
    ),
    min_size=1,
    max_size=4,
)


def _edit(s: Session, edit: tuple[Any, ...]) -> None:
    """A raw change of one taken node (or the index), as a buggy command might make."""
    i, what, j, status = edit
    ids = list(s.state.nodes)
    node = s.state.nodes[ids[i % len(ids)]]
    other = ids[j % len(ids)]
    if what == "status":
        node.status = status
    elif what == "parent":
        node.parent_id = other
    elif what == "child":
        node.children = [*node.children, other]
    elif what == "dep":
        node.deps = [*node.deps, other]
    elif what == "kind":
        node.kind = NodeKind.PLANNING if node.kind is NodeKind.EXECUTION else NodeKind.EXECUTION
    elif what == "type":
        node.type = NodeType.BENCH if node.type is NodeType.TASK else NodeType.TASK
    elif what == "doc":
        node.docs = [*node.docs, DocRef(path=f"docs/new{j}.md")]
    elif what == "dispatch":
        node.dispatch = None
        node.status = NodeStatus.WAIT if j % 2 else node.status
    elif s.state.index:
        index = s.index_taken()
        index.pop(j % len(index))


def _build(seq: list[tuple[Any, ...]]) -> WorkspaceState:
    state = fresh()
    for n, action in enumerate(seq):
        try:
            state = _run(state, action, n).finish().after
        except WorkspaceError:
            continue
    return state


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(actions, min_size=1, max_size=25), edits)
def test_the_near_check_finds_every_new_problem(
    seq: list[tuple[Any, ...]], raw: list[tuple[Any, ...]]
) -> None:
    before = _build(seq)
    s = Session(before, CHAT)
    for edit in raw:
        _edit(s, edit)
    refresh_planning(s.state, s.state.touched())
    old = set(problems(before))
    new = [p for p in problems(s.state) if p not in old]
    near = problems_near(s.state, before, s.state.touched())
    assert not new or near, (new, near)  # what `finish` relies on
    cycle = "deps form a cycle"  # the same cycle may be named from another node
    assert {p for p in new if not p.startswith(cycle)} <= set(near), (new, near)
    assert not any(p.startswith(cycle) for p in new) or any(p.startswith(cycle) for p in near)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(actions, min_size=1, max_size=25), edits)
def test_refreshing_the_touched_ancestors_is_refreshing_the_tree(
    seq: list[tuple[Any, ...]], raw: list[tuple[Any, ...]]
) -> None:
    before = _build(seq)
    s = Session(before, CHAT)
    for edit in raw:
        if edit[1] in ("status", "kind"):  # what a planning status derives from
            _edit(s, edit)
    whole = s.state.copy()
    refresh_planning(whole)
    refresh_planning(s.state, s.state.touched())
    assert {k: v.status for k, v in s.state.view().items()} == {
        k: v.status for k, v in whole.view().items()
    }


def test_a_dep_that_becomes_a_bench_is_found_at_the_task_that_depends_on_it() -> None:
    before = tree()  # n4 (TASK) depends on n2
    s = Session(before, CHAT)
    s.state.nodes["n2"].type = NodeType.BENCH
    near = problems_near(s.state, before, s.state.touched())
    assert "invariant 5: TASK n4 depends on BENCH n2" in near


def test_a_second_main_node_at_work_is_found_without_touching_the_first() -> None:
    before = apply(
        tree(), lambda s: s.transition(node_id="n2", to=NodeStatus.IN_PROGRESS, reason="go")
    )
    s = Session(before, CHAT)
    s.state.nodes["n3"].status = NodeStatus.IN_PROGRESS
    refresh_planning(s.state, s.state.touched())
    near = problems_near(s.state, before, s.state.touched())
    assert "invariant 1: more than one MAIN node is IN_PROGRESS: n2, n3" in near


def test_a_cycle_closed_by_a_new_dep_is_found() -> None:
    before = tree()  # n4 depends on n2
    s = Session(before, CHAT)
    s.state.nodes["n2"].deps = ["n4"]
    near = problems_near(s.state, before, s.state.touched())
    assert any(p.startswith("deps form a cycle: n2 → n4 → n2") for p in near)


class _WholeTreeCycleCheck(Session):
    """The cycle check as it was: the whole tree searched after every command."""

    def _check_cycle(self, arg: str) -> None:
        cycle = find_cycle(self.state)
        if cycle:
            raise WorkspaceError(
                "CYCLE", f"the deps would form a cycle: {' → '.join(cycle)}", arg=arg
            )


graph_actions = st.lists(
    st.tuples(
        st.sampled_from(["create", "create", "deps"]),
        pick,
        st.sampled_from([NodeKind.PLANNING, NodeKind.EXECUTION]),
        st.lists(pick, max_size=3),
    ),
    min_size=1,
    max_size=30,
)


def _graph_step(s: Session, action: tuple[Any, ...], n: int) -> None:
    what, i, kind, picks = action
    ids = list(s.state.nodes)
    planning = [k for k, v in s.state.view().items() if v.kind is NodeKind.PLANNING]
    if what == "create":
        s.create_node(
            parent_id=planning[i % len(planning)],
            kind=kind,
            title=f"node {n}",
            requirement="r",
            deps=[ids[p % len(ids)] for p in picks],
        )
    else:
        s.add_deps(node_id=ids[i % len(ids)], deps=[ids[p % len(ids)] for p in picks] or ["root"])


def _outcome(cls: type[Session], state: WorkspaceState, action: Any, n: int) -> Any:
    s = cls(state, CHAT, now=float(n))
    try:
        _graph_step(s, action, n)
        change = s.finish()
    except WorkspaceError as exc:
        return ("refused", exc.code, str(exc))
    return change.after


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph_actions)
def test_the_cycle_check_from_the_new_edges_decides_as_the_whole_tree_search(
    seq: list[tuple[Any, ...]],
) -> None:
    state = fresh()
    for n, action in enumerate(seq):
        got = _outcome(Session, state, action, n)
        want = _outcome(_WholeTreeCycleCheck, state, action, n)
        if isinstance(want, tuple):
            assert got == want
            continue
        assert isinstance(got, WorkspaceState)
        assert got.view() == want.view()
        state = got
        assert find_cycle(state) is None
