"""Routing by the runtime (issue 12, part 3): the rules R0–R8 over node statuses, hints
chosen only among legal candidates, illegal hints dropped. Examples for each rule, then
hypothesis over random trees, hints and waits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.loop.phases import PHASES, Hint, Phase
from mindloop.loop.routing import (
    RULES,
    KeptTally,
    RouteFacts,
    Target,
    blocked_by_failure,
    count_nodes,
    route,
    rules_markdown,
)
from mindloop.workspace.models import (
    MAIN,
    ROOT_ID,
    TERMINAL,
    Node,
    NodeKind,
    NodeStatus,
    NodeType,
)
from mindloop.workspace.state import WorkspaceState, is_ready, refresh_planning

S = NodeStatus


def ws(*nodes: tuple[str, NodeStatus] | Node) -> WorkspaceState:
    """A workspace with these execution nodes under the root."""
    state = WorkspaceState(task="tasks/t.tsk", exists=True)
    root = Node(id=ROOT_ID, kind=NodeKind.PLANNING, title="t")
    state.nodes[ROOT_ID] = root
    for item in nodes:
        node = item if isinstance(item, Node) else _n(*item)
        node.parent_id = ROOT_ID
        root.children.append(node.id)
        state.nodes[node.id] = node
    refresh_planning(state)
    return state


def _n(nid: str, status: NodeStatus, **kw: object) -> Node:
    return Node(id=nid, kind=NodeKind.EXECUTION, title=nid, status=status, **kw)  # type: ignore[arg-type]


def test_each_rule_in_its_order() -> None:
    def target(state: WorkspaceState, **kw: object) -> Target:
        return route(RouteFacts(workspace=state, **kw)).target  # type: ignore[arg-type]

    assert target(ws()) is Target.PLAN  # R6: nothing planned yet
    assert target(ws(), new_message=True) is Target.ROUTER  # R0 first
    assert target(ws(("a", S.NEW)), task_waits=1) is Target.PARK  # R1
    assert target(ws(("a", S.NEW), ("b", S.CHECK_FAILED))) is Target.ADJUST  # R2
    assert target(ws(("a", S.NEW), ("b", S.COMPLETE))) is Target.CHECK  # R3
    assert target(ws(("a", S.NEW), ("b", S.DONE))) is Target.DO  # R4: a ready node
    # R5: blocked by a FAILED dep only
    state = ws(("a", S.FAILED), _n("b", S.NEW, deps=["a"]))
    state.nodes["a"].conclusion = "x"
    assert target(state) is Target.ADJUST
    assert target(ws(("a", S.DONE)), new_scope=True) is Target.PLAN  # R6: new scope
    assert target(ws(("a", S.WAIT), ("b", S.DONE))) is Target.PARK  # R7
    assert target(ws(("a", S.DONE), ("b", S.CANCELLED))) is Target.END  # R8
    # a BENCH node is checked only when BENCH_READY holds (the driver says which)
    bench = _n("z", S.WAIT, type=NodeType.BENCH)
    assert target(ws(("a", S.DONE), bench.model_copy())) is Target.PARK
    assert target(ws(("a", S.DONE), bench.model_copy()), bench_ready=frozenset({"z"})) is (
        Target.CHECK
    )
    # a NEW node waiting for a dep a member works: nothing to do but wait
    assert target(ws(("a", S.WAIT), _n("b", S.NEW, deps=["a"]))) is Target.PARK
    # once PLAN ran for the scope, an empty tree is its verdict, not a reason to plan again
    assert target(ws(), ended=Phase.PLAN, planned=True) is Target.END
    assert target(ws(), ended=Phase.SELF_IMPROVE, planned=True) is Target.END
    assert target(ws(), planned=True, new_scope=True) is Target.PLAN


def test_hints_pick_among_candidates_and_illegal_ones_are_dropped() -> None:
    state = ws(("a", S.COMPLETE), ("b", S.NEW))  # candidates: R3 CHECK, R4 DO
    first = route(RouteFacts(workspace=state, ended=Phase.DO))
    assert first.target is Target.CHECK and first.rule == "R3" and not first.hint_used
    picked = route(RouteFacts(workspace=state, ended=Phase.CHECK, hint=Hint.DO))
    assert picked.target is Target.DO and picked.rule == "R4+hint" and picked.hint_used
    # DO may not hint END: dropped, the first candidate wins
    dropped = route(RouteFacts(workspace=state, ended=Phase.DO, hint=Hint.END))
    assert dropped.target is Target.CHECK and dropped.hint_dropped is not None
    # WAIT is legal after DO only if DO registered a wait
    waiting = ws(("a", S.WAIT))
    no_wait = route(RouteFacts(workspace=waiting, ended=Phase.DO, hint=Hint.WAIT))
    assert no_wait.hint_dropped is not None and "registered" in no_wait.hint_dropped
    ok = route(RouteFacts(workspace=waiting, ended=Phase.DO, hint=Hint.WAIT, wait_registered=True))
    assert ok.target is Target.PARK and ok.hint_used
    # ADJUST may go back to PLAN, once per task
    again = route(RouteFacts(workspace=state, ended=Phase.ADJUST, hint=Hint.PLAN))
    assert again.target is Target.PLAN and again.rule == "hint"
    spent = route(
        RouteFacts(workspace=state, ended=Phase.ADJUST, hint=Hint.PLAN, replan_left=False)
    )
    assert spent.target is Target.CHECK and spent.hint_dropped is not None
    # R0 and R1 cannot be overridden
    fixed = route(RouteFacts(workspace=state, ended=Phase.CHECK, hint=Hint.DO, task_waits=1))
    assert fixed.target is Target.PARK and fixed.rule == "R1"


def test_the_rule_table_is_printed_as_data() -> None:
    table = rules_markdown()
    assert [r.id for r in RULES] == [f"R{i}" for i in range(9)]
    assert "| R3 | a node is COMPLETE, or a BENCH node satisfies BENCH_READY | CHECK |" in table


# ---------------------------------------------------------------------- hypothesis

statuses = st.sampled_from(list(NodeStatus))


@st.composite
def facts(draw: st.DrawFn) -> RouteFacts:
    n = draw(st.integers(min_value=0, max_value=6))
    nodes = []
    for i in range(n):
        status = draw(statuses)
        bench = draw(st.booleans()) and status in (S.WAIT, S.CHECK_FAILED, S.DONE, S.ADJUSTING)
        deps = draw(st.lists(st.sampled_from([f"n{j}" for j in range(i)] or ["-"]), max_size=2))
        nodes.append(
            _n(
                f"n{i}",
                status,
                type=NodeType.BENCH if bench else NodeType.TASK,
                deps=sorted({d for d in deps if d != "-"}),
                assignee=draw(st.sampled_from([MAIN, MAIN, "MEMBER:qa"])),
                conclusion="c" if status in TERMINAL else "",
            )
        )
    state = ws(*nodes)
    benches = [x.id for x in nodes if x.type is NodeType.BENCH and x.status is S.WAIT]
    ended = draw(st.none() | st.sampled_from(list(Phase)))
    return RouteFacts(
        workspace=state,
        new_message=draw(st.booleans()) and draw(st.booleans()),
        task_waits=draw(st.sampled_from([0, 0, 0, 1])),
        new_scope=draw(st.booleans()) and draw(st.booleans()),
        bench_ready=frozenset(draw(st.lists(st.sampled_from(benches or ["-"]), max_size=2)))
        - {"-"},
        ended=ended,
        hint=draw(st.none() | st.sampled_from(list(Hint))) if ended else None,
        wait_registered=draw(st.booleans()),
        replan_left=draw(st.booleans()),
        planned=draw(st.booleans()),
    )


def _without_hint(f: RouteFacts) -> RouteFacts:
    return RouteFacts(**{**f.__dict__, "hint": None})


@settings(max_examples=400, deadline=None)
@given(facts())
def test_routing_properties(f: RouteFacts) -> None:
    d = route(f)
    candidates = [t for _, t in d.candidates]
    # the decision is a candidate, ADJUST's re-plan, or a park when nothing can move
    assert (
        d.target in candidates
        or (d.target is Target.PLAN and f.ended is Phase.ADJUST and f.hint is Hint.PLAN)
        or (d.target is Target.PARK and not candidates)
    )
    # R0 and R1 win whatever the hint
    if f.new_message:
        assert d.target is Target.ROUTER
    elif f.task_waits:
        assert d.target is Target.PARK and d.rule == "R1"
    # an illegal hint changes nothing, and is reported
    if f.hint is not None and f.ended is not None:
        legal = f.hint in PHASES[f.ended].hints
        legal = legal and not (f.hint is Hint.WAIT and not f.wait_registered)
        legal = legal and not (f.hint is Hint.PLAN and not f.replan_left)
        if not legal:
            assert d.hint_dropped is not None and not d.hint_used
            assert d.target is route(_without_hint(f)).target
    # without a usable hint the first candidate wins
    if not d.hint_used and candidates:
        assert d.target is candidates[0]
    execution = [x for x in f.workspace.nodes.values() if x.kind is NodeKind.EXECUTION]
    if d.target is Target.END:
        assert all(x.status in TERMINAL for x in execution)
    if d.target is Target.DO:
        assert any(
            x.assignee == MAIN and (x.status is S.IN_PROGRESS or is_ready(f.workspace, x))
            for x in execution
        )
    if d.target is Target.CHECK:
        assert any(x.status is S.COMPLETE or x.id in f.bench_ready for x in execution)
    if d.target is Target.ADJUST:
        assert any(x.status in (S.CHECK_FAILED, S.ADJUSTING, S.NEW) for x in execution)


@settings(max_examples=400, deadline=None)
@given(facts())
def test_the_one_pass_tally_says_what_each_rule_asks_node_by_node(f: RouteFacts) -> None:
    """The rules read a tally counted in one pass (`count_nodes`); each condition is the
    reference's, node by node."""
    state = f.workspace
    execution = [x for x in state.nodes.values() if x.kind is NodeKind.EXECUTION]
    t = count_nodes(state)
    open_ = [x for x in execution if x.status not in TERMINAL]
    assert t.total == len(execution)
    assert t.terminal == len(execution) - len(open_)
    assert t.waiting == sum(1 for x in open_ if x.status is S.WAIT)
    assert t.check_failed == any(x.status in (S.CHECK_FAILED, S.ADJUSTING) for x in execution)
    assert t.complete == any(x.status is S.COMPLETE for x in execution)
    assert t.main_at_work == any(
        x.assignee == MAIN and x.status is S.IN_PROGRESS for x in execution
    )
    assert t.main_ready == any(x.assignee == MAIN and is_ready(state, x) for x in execution)
    assert t.blocked == any(blocked_by_failure(state, x) for x in execution)
    assert set(t.benches_waiting) == {
        x.id for x in execution if x.type is NodeType.BENCH and x.status is S.WAIT
    }
    # what routing does on the way: a MAIN node waiting on its own waits, a member node
    # whose deps are done (dispatched)
    assert t.own_waiting == any(
        x.status is S.WAIT and x.dispatch is None and x.type is NodeType.TASK and x.assignee == MAIN
        for x in execution
    )
    assert t.dispatchable == any(
        x.status is S.NEW
        and x.type is NodeType.TASK
        and x.member is not None
        and all(state.nodes[d].status is S.DONE for d in x.deps if d in state.nodes)
        for x in execution
    )
    # the facts count it once, and a tally handed in is the one the rules read
    assert f.tally() is f.tally()
    assert route(RouteFacts(**{**f.__dict__, "nodes": t})) == route(f)


# ---------------------------------------------------------------------- a kept tally

_ASSIGNEES = st.sampled_from([MAIN, MAIN, "MEMBER:qa", "dev"])
# NEW and DONE most often: readiness (a NEW node whose deps are all DONE) then changes
_STATUS = st.sampled_from([S.NEW, S.DONE]) | statuses


def _node(data: st.DataObject, nid: str, ids: list[str]) -> Node:
    status = data.draw(_STATUS)
    return Node(
        id=nid,
        parent_id=ROOT_ID,
        kind=data.draw(
            st.sampled_from([NodeKind.EXECUTION, NodeKind.EXECUTION, NodeKind.PLANNING])
        ),
        type=data.draw(st.sampled_from([NodeType.TASK, NodeType.TASK, NodeType.BENCH])),
        title=nid,
        status=status,
        deps=data.draw(st.lists(st.sampled_from([*ids, "zz"]), max_size=2)),
        assignee=data.draw(_ASSIGNEES),
    )


def _next(data: st.DataObject, before: dict[str, Node]) -> dict[str, Node]:
    """A new value as a write makes it: a new mapping, the changed nodes copies, the
    others the very same objects (nodes added and removed too)."""
    nodes = dict(before)
    for _ in range(data.draw(st.integers(0, 4))):
        ids = sorted(set(nodes) - {ROOT_ID})
        what = data.draw(st.sampled_from(["status", "status", "assignee", "deps", "add", "drop"]))
        if what == "add" or len(ids) < 2:
            nid = f"n{len(nodes)}x{data.draw(st.integers(0, 9))}"
            nodes[nid] = _node(data, nid, ids)
            continue
        nid = data.draw(st.sampled_from(ids))
        n = nodes[nid]
        if what == "status":
            nodes[nid] = n.model_copy(update={"status": data.draw(_STATUS)})
        elif what == "assignee":
            nodes[nid] = n.model_copy(update={"assignee": data.draw(_ASSIGNEES)})
        elif what == "deps":
            deps = data.draw(st.lists(st.sampled_from([*ids, "zz"]), max_size=2))
            nodes[nid] = n.model_copy(update={"deps": deps})
        else:
            del nodes[nid]
    return nodes


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_tally_counted_from_the_last_one_is_the_tally_counted_from_scratch(
    data: st.DataObject,
) -> None:
    """`KeptTally` counts each workspace value from the one before it (the changed nodes
    found by identity, their dependents marked again): the same tally as `count_nodes`,
    whatever changed — statuses, assignees, deps, nodes added or dropped."""
    kept = KeptTally()
    nodes: dict[str, Node] = {ROOT_ID: Node(id=ROOT_ID, kind=NodeKind.PLANNING, title="t")}
    for _ in range(data.draw(st.integers(1, 8))):
        nodes = _next(data, nodes)
        state = WorkspaceState(task="tasks/t.tsk", nodes=nodes, exists=True)
        assert kept.count(state) == count_nodes(state)


def test_a_dependent_is_counted_again_when_only_its_dep_changed() -> None:
    """The NEW node is the very same object: its readiness moved with its dep all the
    same (ready once the dep is DONE, R5's blocked once it FAILED)."""
    dep = _n("a", S.IN_PROGRESS)
    node = _n("b", S.NEW, deps=["a"])
    kept = KeptTally()
    for status in (S.IN_PROGRESS, S.DONE, S.FAILED, S.IN_PROGRESS):
        nodes = {"a": dep.model_copy(update={"status": status}), "b": node}
        state = WorkspaceState(task="tasks/t.tsk", nodes=nodes, exists=True)
        tally = kept.count(state)
        assert tally == count_nodes(state)
        assert tally.main_ready is (status is S.DONE)
        assert tally.blocked is (status is S.FAILED)


def test_a_node_that_names_a_new_dep_is_counted_again_when_that_dep_changes() -> None:
    """Its deps changed, so the tally is counted whole again: the dep, changing next, is
    known to have it as a dependent."""
    a, b = _n("a", S.IN_PROGRESS), _n("b", S.NEW)
    kept = KeptTally()
    steps = [
        {"a": a, "b": b},
        {"a": a, "b": (b := b.model_copy(update={"deps": ["a"]}))},
        {"a": a.model_copy(update={"status": S.DONE}), "b": b},
    ]
    for nodes in steps:
        state = WorkspaceState(task="tasks/t.tsk", nodes=nodes, exists=True)
        assert kept.count(state) == count_nodes(state)
    assert kept.count(state).main_ready
