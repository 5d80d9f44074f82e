"""The transition table (agent-loop §5.4) and the invariants (§5.3) as the commands apply
them: every pair outside the table and every actor outside a row is rejected with
ILLEGAL_TRANSITION{from, to, by}, and a rejected command changes nothing."""

from __future__ import annotations

import pytest

from mindloop.workspace.commands import CriterionInput, Session
from mindloop.workspace.errors import IllegalTransition, WorkspaceError
from mindloop.workspace.invariants import problems
from mindloop.workspace.models import NodeKind, NodeStatus, NodeType, SelfCheck
from mindloop.workspace.state import WorkspaceState, planning_status
from mindloop.workspace.transitions import (
    TRANSITIONS,
    Actor,
    Authority,
    find_rows,
    rows_from,
    table_markdown,
)
from tests.workspace.ws_util import CHAT, RT, apply, change, complete, done, tree

S = NodeStatus

# agent-loop §5.4, as (from, to, by) for TASK nodes; "any non-terminal → CANCELLED" expanded.
REFERENCE = {
    (None, S.NEW, ("PLAN", "ADJUST")),
    (S.NEW, S.IN_PROGRESS, ("RT",)),
    (S.NEW, S.WAIT, ("RT",)),
    (S.IN_PROGRESS, S.COMPLETE, ("DO",)),
    (S.IN_PROGRESS, S.WAIT, ("RT",)),
    (S.IN_PROGRESS, S.CHECK_FAILED, ("DO", "RT")),
    (S.WAIT, S.IN_PROGRESS, ("RT",)),
    (S.WAIT, S.NEW, ("RT",)),
    (S.WAIT, S.COMPLETE, ("RT",)),
    (S.WAIT, S.CHECK_FAILED, ("RT",)),
    (S.COMPLETE, S.DONE, ("CHECK",)),
    (S.COMPLETE, S.CHECK_FAILED, ("CHECK",)),
    (S.CHECK_FAILED, S.ADJUSTING, ("RT",)),
    (S.ADJUSTING, S.IN_PROGRESS, ("ADJUST",)),
    (S.ADJUSTING, S.WAIT, ("ADJUST",)),
    (S.ADJUSTING, S.CANCELLED, ("ADJUST",)),
    (S.ADJUSTING, S.FAILED, ("ADJUST", "RT")),
} | {
    (s, S.CANCELLED, ("PLAN", "ADJUST", "RT", "USER"))
    for s in S
    if s not in (S.DONE, S.FAILED, S.CANCELLED)
}


def test_the_table_is_the_reference_table() -> None:
    task_rows = {
        (r.source, r.target, tuple(a.value for a in r.by))
        for r in TRANSITIONS
        if NodeType.TASK in r.types
    }
    assert task_rows == REFERENCE
    bench = {(r.source, r.target) for r in TRANSITIONS if r.types == {NodeType.BENCH}}
    assert bench == {
        (None, S.WAIT),
        (S.WAIT, S.DONE),
        (S.WAIT, S.CHECK_FAILED),
        (S.ADJUSTING, S.WAIT),
    }


def test_the_docs_print_the_table() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "workspace.md").read_text("utf-8")
    assert table_markdown() in doc


ALL = list(NodeStatus)


@pytest.mark.parametrize("source", ALL)
@pytest.mark.parametrize("target", ALL)
def test_every_pair_outside_the_table_is_illegal(source: S, target: S) -> None:
    state = tree()
    state.nodes["n3"].status = source  # a TASK execution node, put in `source` directly
    if source is S.COMPLETE:
        state.nodes["n3"].no_artifacts_reason = "x"
    if source in (S.DONE, S.FAILED, S.CANCELLED):
        state.nodes["n3"].conclusion = "over"
    legal = find_rows(source, target, NodeType.TASK)
    session = Session(state, Authority(frozenset(Actor), "anyone", free=True), now=1.0)
    before = state.copy()
    if legal:
        return  # legal pairs are exercised below and by the property test
    with pytest.raises(IllegalTransition) as err:
        session.transition(node_id="n3", to=target, reason="try", conclusion="c")
    assert err.value.code == "ILLEGAL_TRANSITION"
    assert f"from: {source}" in str(err.value) and f"to: {target}" in str(err.value)
    assert "by:" in str(err.value) and err.value.arg == "to"
    assert session.log == [] and state.nodes == before.nodes


def test_who_may_take_a_row_is_checked() -> None:
    state = complete(tree(), "n2")
    do = Authority.phase(Actor.DO, "@dev")
    with pytest.raises(IllegalTransition) as err:
        apply(
            state,
            lambda s: s.transition(node_id="n2", to=S.DONE, reason="x", conclusion="c"),
            do,
        )
    assert "{from: COMPLETE, to: DONE, by: DO}" in str(err.value)
    assert "only CHECK may take it" in str(err.value)
    # invariant 2: COMPLETE only by DO (or the runtime on a member's reply)
    started = apply(tree(), lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"))
    check = Authority.phase(Actor.CHECK, "@c")
    with pytest.raises(IllegalTransition):
        apply(
            started,
            lambda s: s.transition(
                node_id="n3", to=S.COMPLETE, reason="x", no_artifacts_reason="none"
            ),
            check,
        )


def test_a_chat_dialog_takes_phase_rows_and_on_entry_rows_but_not_wait_events() -> None:
    state = tree()
    state = apply(state, lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"))
    assert state.nodes["n3"].status is S.IN_PROGRESS and state.focus == "n3"
    state.nodes["n3"].status = S.WAIT
    with pytest.raises(IllegalTransition) as err:
        apply(state, lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="x"))
    assert "only RT may take it" in str(err.value)


def test_planning_nodes_are_derived_and_never_set() -> None:
    state = tree()
    with pytest.raises(WorkspaceError) as err:
        apply(state, lambda s: s.transition(node_id="n1", to=S.CANCELLED, reason="x"))
    assert err.value.code == "NODE_IS_PLANNING"
    assert planning_status([]) is S.NEW
    assert planning_status([S.NEW, S.NEW]) is S.NEW
    assert planning_status([S.NEW, S.WAIT]) is S.IN_PROGRESS
    assert planning_status([S.DONE, S.CANCELLED]) is S.DONE
    assert planning_status([S.DONE, S.FAILED]) is S.FAILED
    assert planning_status([S.FAILED, S.NEW]) is S.IN_PROGRESS
    # a node split while in progress stays in progress until its children end
    assert planning_status([S.NEW, S.NEW], started=True) is S.IN_PROGRESS
    assert planning_status([S.DONE, S.DONE], started=True) is S.DONE
    state = done(state, "n2")
    assert state.nodes["n1"].status is S.IN_PROGRESS  # n3 not started, n2 done
    assert state.nodes["root"].status is S.IN_PROGRESS


def test_invariant_1_one_main_node_in_progress() -> None:
    state = apply(tree(), lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"))
    with pytest.raises(WorkspaceError) as err:
        apply(state, lambda s: s.transition(node_id="n2", to=S.IN_PROGRESS, reason="go"))
    assert err.value.code == "CONCURRENT_EXECUTION" and "n3" in str(err.value)


def test_ready_needs_deps_done() -> None:
    with pytest.raises(WorkspaceError) as err:
        apply(tree(), lambda s: s.transition(node_id="n4", to=S.IN_PROGRESS, reason="go"))
    assert err.value.code == "NOT_READY" and "n2" in str(err.value)
    state = done(tree(), "n2")
    state = apply(state, lambda s: s.transition(node_id="n4", to=S.IN_PROGRESS, reason="go"))
    assert state.nodes["n4"].status is S.IN_PROGRESS


def test_invariant_3_complete_needs_self_check_and_artifacts() -> None:
    state = apply(tree(), lambda s: s.transition(node_id="n2", to=S.IN_PROGRESS, reason="go"))
    with pytest.raises(WorkspaceError) as err:
        apply(
            state,
            lambda s: s.transition(
                node_id="n2", to=S.COMPLETE, reason="x", no_artifacts_reason="n"
            ),
        )
    assert err.value.code == "SELF_CHECK_REQUIRED" and "AC1" in str(err.value)
    with pytest.raises(WorkspaceError) as err:
        apply(
            state,
            lambda s: s.transition(
                node_id="n2",
                to=S.COMPLETE,
                reason="x",
                self_check=[SelfCheck(criterion="AC1", passed=True)],
            ),
        )
    assert err.value.code == "ARTIFACTS_REQUIRED"
    failed_check = [SelfCheck(criterion="AC1", passed=False, evidence="401")]
    with pytest.raises(WorkspaceError):
        apply(
            state,
            lambda s: s.transition(
                node_id="n2",
                to=S.COMPLETE,
                reason="x",
                self_check=failed_check,
                no_artifacts_reason="n",
            ),
        )


def test_invariant_4_terminal_needs_a_conclusion_and_is_final() -> None:
    state = complete(tree(), "n2")
    check = Authority.phase(Actor.CHECK, "@c")
    with pytest.raises(WorkspaceError) as err:
        apply(state, lambda s: s.transition(node_id="n2", to=S.DONE, reason="x"), check)
    assert err.value.code == "CONCLUSION_REQUIRED" and err.value.arg == "conclusion"
    state = done(tree(), "n2")
    with pytest.raises(IllegalTransition) as ill:
        apply(state, lambda s: s.transition(node_id="n2", to=S.NEW, reason="reopen"))
    assert "legal from there: none (terminal)" in str(ill.value)
    with pytest.raises(WorkspaceError) as err:
        apply(state, lambda s: s.update(node_id="n2", notes="more"))
    assert err.value.code == "NODE_TERMINAL"
    # reopening is a new node pointing back
    state = apply(
        state,
        lambda s: s.create_node(
            parent_id="n1",
            kind=NodeKind.EXECUTION,
            title="API again",
            requirement="r",
            supersedes="n2",
        ),
    )
    assert state.nodes["n5"].supersedes == "n2"


def test_invariant_5_bench_rules() -> None:
    with pytest.raises(WorkspaceError) as err:
        _with_bench(tree(), verify=None)
    assert err.value.code == "BENCH_NEEDS_VERIFY"
    state = _with_bench(tree(), deps=["n2"])
    assert state.nodes["n5"].status is S.WAIT  # created waiting for BENCH_READY
    with pytest.raises(WorkspaceError) as err:
        apply(
            state,
            lambda s: s.create_node(
                parent_id="root",
                kind=NodeKind.EXECUTION,
                title="T",
                requirement="r",
                deps=["n5"],
            ),
        )
    assert err.value.code == "TASK_DEPENDS_ON_BENCH" and err.value.arg == "deps"
    check = Authority.phase(Actor.CHECK, "@c")
    with pytest.raises(WorkspaceError) as err:
        apply(
            state,
            lambda s: s.transition(node_id="n5", to=S.DONE, reason="x", conclusion="c"),
            check,
        )
    assert err.value.code == "BENCH_NOT_READY" and "n2" in str(err.value)
    state = done(state, "n2")
    state = apply(
        state,
        lambda s: s.transition(node_id="n5", to=S.DONE, reason="green", conclusion="c"),
        check,
    )
    assert state.nodes["n5"].status is S.DONE


def test_adjust_cycle_counts_and_caps() -> None:
    state = apply(tree(), lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"))
    for i in range(3):
        state = apply(
            state, lambda s: s.transition(node_id="n3", to=S.CHECK_FAILED, reason="STUCK")
        )
        state = apply(state, lambda s: s.transition(node_id="n3", to=S.ADJUSTING, reason="adjust"))
        state = apply(state, lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="retry"))
        assert state.nodes["n3"].adjust_count == i + 1 and state.nodes["n3"].attempt == i + 1
    state = apply(state, lambda s: s.transition(node_id="n3", to=S.CHECK_FAILED, reason="STUCK"))
    state = apply(state, lambda s: s.transition(node_id="n3", to=S.ADJUSTING, reason="adjust"))
    with pytest.raises(WorkspaceError) as err:
        apply(state, lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="again"))
    assert err.value.code == "ADJUST_CAP"
    state = apply(
        state,
        lambda s: s.transition(node_id="n3", to=S.FAILED, reason="cap", conclusion="gave up"),
    )
    assert state.nodes["n3"].status is S.FAILED


def test_every_transition_is_logged_with_who_when_from_to_reason_evidence() -> None:
    state = tree()
    s = Session(state, CHAT, now=5.0)
    s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go", evidence="ref-1")
    ch = s.finish()
    rows = [e for e in ch.log if e.kind == "transition"]
    assert rows[0].node_id == "n3" and rows[0].at == 5.0 and rows[0].actor == "@dev"
    assert rows[0].data == {
        "from": "NEW",
        "to": "IN_PROGRESS",
        "by": "RT",
        "who": "@dev",
        "reason": "go",
        "evidence": "ref-1",
    }
    assert ch.after.nodes["n3"].version == state.nodes["n3"].version + 1


def test_the_runtime_alone_moves_waiting_nodes() -> None:
    state = tree()
    state = apply(
        state,
        lambda s: s.dispatch(
            node_id="n3", dispatch_id="k", side_id="s1", caller_id="d", member="bob"
        ),
    )
    assert state.nodes["n3"].status is S.WAIT
    with pytest.raises(IllegalTransition):
        apply(state, lambda s: s.transition(node_id="n3", to=S.COMPLETE, reason="x"))
    with pytest.raises(WorkspaceError) as err:  # the runtime: not while the dispatch is open
        apply(state, lambda s: s.transition(node_id="n3", to=S.NEW, reason="x"), RT)
    assert err.value.code == "WAIT_OPEN"
    assert problems(state) == []


def test_deps_are_added_by_plan_or_adjust_to_a_node_that_has_not_started() -> None:
    state = tree()  # n4 Form depends on n2 API; n3 Schema is free
    state = apply(state, lambda s: s.add_deps(node_id="n4", deps=["n3", "n2"]))
    assert state.nodes["n4"].deps == ["n2", "n3"]
    for authority in (Authority.phase(Actor.DO, "do"), Authority.phase(Actor.CHECK, "c"), RT):
        with pytest.raises(WorkspaceError) as err:
            apply(state, lambda s: s.add_deps(node_id="n3", deps=["n2"]), authority)
        assert err.value.code == "NOT_ALLOWED"
    with pytest.raises(WorkspaceError) as err:  # a cycle
        apply(state, lambda s: s.add_deps(node_id="n3", deps=["n4"]))
    assert err.value.code == "CYCLE"
    with pytest.raises(WorkspaceError) as err:  # nothing new
        apply(state, lambda s: s.add_deps(node_id="n4", deps=["n3"]))
    assert err.value.code == "NOTHING_TO_UPDATE"
    started = apply(state, lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"))
    with pytest.raises(WorkspaceError) as err:  # deps gate the start: too late
        apply(started, lambda s: s.add_deps(node_id="n3", deps=["n2"]))
    assert err.value.code == "NODE_STARTED"
    assert problems(state) == []


@pytest.mark.parametrize("parent", ["n3", "root"])  # an execution parent, a planning one
def test_split_creates_its_nodes_by_the_creation_row_only(parent: str) -> None:
    """`– → NEW` is PLAN's and ADJUST's: a split creates nodes, so CHECK, DO, the runtime
    and the user are refused as `create_node` refuses them, and nothing changes."""
    state = apply(tree(), lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"))
    assert state.nodes[parent].status is S.IN_PROGRESS

    def split(s: Session) -> None:
        s.split_node(parent_id=parent, title="Index", requirement="add an index")

    for authority in (
        Authority.phase(Actor.CHECK, "@c"),
        Authority.phase(Actor.DO, "@d"),
        RT,
        Authority.user(),
    ):
        session = Session(state, authority, now=2.0)
        with pytest.raises(IllegalTransition) as err:
            split(session)
        assert "{from: –, to: NEW" in str(err.value) and "only ADJUST, PLAN" in str(err.value)
        assert session.log == [] and session.state.nodes.view() == state.nodes
        assert session.state.focus == state.focus
    for actor in (Actor.PLAN, Actor.ADJUST):
        ch = change(state, split, Authority.phase(actor, "@p"))
        created = [e for e in ch.log if e.kind == "transition"]
        assert created and all(e.data["by"] == actor.value for e in created)
        assert ch.after.focus not in state.nodes


@pytest.mark.parametrize("kind", [NodeKind.PLANNING, NodeKind.EXECUTION])
def test_only_plan_and_adjust_create_nodes_of_either_kind(kind: NodeKind) -> None:
    """Who may create a child under a planning node (agent-loop §3's tool matrix, §5.4's
    creation row `– → NEW` by PLAN, ADJUST): a planning node is no exception — its status
    is derived, but creating it is still a plan change. DO, CHECK, SELF_IMPROVE (a phase
    that is no actor), the runtime and the user are refused, and nothing changes."""
    state = tree()

    def create(s: Session) -> None:
        s.create_node(parent_id="root", kind=kind, title="Frontend", requirement="f")

    for authority in (
        Authority.phase(Actor.DO, "@d"),
        Authority.phase(Actor.CHECK, "@c"),
        Authority(frozenset(), "@self-improve"),
        RT,
        Authority.user(),
    ):
        session = Session(state, authority, now=2.0)
        with pytest.raises(IllegalTransition) as err:
            create(session)
        assert "{from: –, to: NEW" in str(err.value) and "only ADJUST, PLAN" in str(err.value)
        assert session.log == [] and session.state.nodes.view() == state.nodes
        assert state.nodes["root"].children == session.state.nodes["root"].children
    for authority in (Authority.phase(Actor.PLAN, "@p"), Authority.phase(Actor.ADJUST, "@a"), CHAT):
        ch = change(state, create, authority)
        [new] = [n for n in ch.after.nodes if n not in state.nodes]
        assert ch.after.nodes[new].kind is kind and new in ch.after.nodes["root"].children
        [made] = [e for e in ch.log if e.kind == "create"]
        assert made.data["by"] in ("PLAN", "ADJUST")


def _with_bench(
    state: WorkspaceState, *, verify: str | None = "pytest", deps: list[str] | None = None
) -> WorkspaceState:
    """`state` with n5, a BENCH "E2E" (its criterion's verify, its deps)."""
    return apply(
        state,
        lambda s: s.create_node(
            parent_id="root",
            kind=NodeKind.EXECUTION,
            type=NodeType.BENCH,
            title="E2E",
            requirement="r",
            acceptance_criteria=[CriterionInput("a", "b", verify=verify)],
            deps=deps or [],
        ),
    )


def _bench_over_n2() -> WorkspaceState:
    """tree() with n5, a BENCH over n2, and n2 DONE: conditions 1, 2 and 4 hold."""
    state = _with_bench(tree(), deps=["n2"])
    return done(state, "n2")


def test_condition_3_gates_the_bench_transition_when_the_authority_carries_it() -> None:
    """agent-loop §5.5 condition 3 at the CHECK transition: the gate is asked with the
    BENCH's scope, only once conditions 1, 2 and 4 hold; its reason refuses the move
    (BENCH_NOT_READY) and nothing changes. A BENCH leaves WAIT for work (the runtime's
    "waits satisfied" rows) only under the same rule: it is tested by CHECK, not
    started early."""
    state = _bench_over_n2()
    asked: list[list[str]] = []

    def changed(scope: object) -> str | None:
        asked.append(list(scope))  # type: ignore[call-overload]
        return "the workspace changed since the checks (a → b)"

    check = Authority.phase(Actor.CHECK, "@c", since_checks=changed)
    for to in (S.DONE, S.CHECK_FAILED):
        session = Session(state, check, now=2.0)
        with pytest.raises(WorkspaceError) as err:
            session.transition(node_id="n5", to=to, reason="x", conclusion="c")
        assert err.value.code == "BENCH_NOT_READY" and "changed since the checks" in str(err.value)
        assert session.log == [] and session.state.nodes.view() == state.nodes
    assert asked == [["n2"], ["n2"]]
    # condition 1 fails first: the (costly) gate is not asked
    asked.clear()
    early = _with_bench(tree())
    with pytest.raises(WorkspaceError) as err:
        apply(
            early,
            lambda s: s.transition(node_id="n5", to=S.DONE, reason="x", conclusion="c"),
            check,
        )
    assert "scope not done" in str(err.value) and asked == []
    # the gate satisfied: the move is taken
    fine = Authority.phase(Actor.CHECK, "@c", since_checks=lambda scope: None)
    moved = apply(
        state, lambda s: s.transition(node_id="n5", to=S.DONE, reason="ok", conclusion="c"), fine
    )
    assert moved.nodes["n5"].status is S.DONE
    # the runtime cannot take a BENCH out of WAIT for work while BENCH_READY fails
    blocked = _with_bench(tree(), deps=["n2"])
    with pytest.raises(WorkspaceError) as err:
        apply(blocked, lambda s: s.transition(node_id="n5", to=S.NEW, reason="x"), RT)
    assert err.value.code == "BENCH_NOT_READY" and "n2" in str(err.value)


def test_the_runtime_counts_a_nodes_steps_and_a_new_attempt_starts_again() -> None:
    """`steps_used` (agent-loop §5.1): the runtime adds each DO entry's steps; nobody else
    may; ADJUST's next attempt starts from 0."""
    state = apply(tree(), lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"))
    state = apply(state, lambda s: s.count_steps(node_id="n3", steps=7), RT)
    state = apply(state, lambda s: s.count_steps(node_id="n3", steps=5), RT)
    assert state.nodes["n3"].steps_used == 12
    with pytest.raises(WorkspaceError) as err:
        apply(state, lambda s: s.count_steps(node_id="n3", steps=1))  # a dialog acting
    assert err.value.code == "RUNTIME_ONLY"
    for to in (S.CHECK_FAILED, S.ADJUSTING, S.IN_PROGRESS):
        state = apply(state, lambda s, to=to: s.transition(node_id="n3", to=to, reason="again"))
    assert (state.nodes["n3"].attempt, state.nodes["n3"].steps_used) == (1, 0)


def test_a_node_is_given_its_step_budget_and_its_split_parts_keep_it() -> None:
    def big(s: Session) -> None:
        s.create_node(
            parent_id="root", kind=NodeKind.EXECUTION, title="Big", requirement="b", step_budget=20
        )
        s.transition(node_id="n5", to=S.IN_PROGRESS, reason="go")
        s.split_node(parent_id="n5", title="First", requirement="the first part")

    state = apply(tree(), big)
    assert [state.nodes[n].step_budget for n in ("n3", "n6", "n7")] == [12, 20, 20]
    with pytest.raises(WorkspaceError) as err:
        apply(
            state,
            lambda s: s.create_node(
                parent_id="root", kind=NodeKind.EXECUTION, title="X", requirement="x", step_budget=0
            ),
        )
    assert err.value.arg == "step_budget"


@pytest.mark.parametrize("node_type", list(NodeType))
def test_the_rows_looked_up_are_the_tables_in_its_order(node_type: NodeType) -> None:
    """`find_rows` and `rows_from` read an index of the table: for every pair, the rows
    a scan of the table finds, in the table's order (and none for a value not a status)."""
    for source in (None, *S):
        scan = [r for r in TRANSITIONS if r.source == source and node_type in r.types]
        assert rows_from(source, node_type) == scan
        for target in S:
            assert find_rows(source, target, node_type) == [r for r in scan if r.target == target]
    assert find_rows(S.NEW, "nonsense", node_type) == []  # type: ignore[arg-type]


def test_a_command_that_moves_no_status_derives_no_planning_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step count (or a note) moves nothing a planning status is derived from: `finish`
    does not recompute its ancestors' statuses; a transition does."""
    state = apply(tree(), lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"), RT)
    derived: list[list[str]] = []
    real = WorkspaceState.statuses

    def counting(self: WorkspaceState, ids: list[str]) -> set[NodeStatus]:
        derived.append(list(ids))
        return real(self, ids)

    monkeypatch.setattr(WorkspaceState, "statuses", counting)
    counted = change(state, lambda s: s.count_steps(node_id="n3", steps=2), RT)
    assert derived == [] and counted.changed_nodes == ["n3"]
    assert counted.after.nodes["n3"].steps_used == 2
    noted = change(state, lambda s: s.update(node_id="n3", notes="half way"))
    assert derived == [] and noted.changed_nodes == ["n3"]
    # a child at work (neither NEW nor ended) makes its parent IN_PROGRESS whatever the
    # other children are: derived without gathering them
    failed = change(
        state, lambda s: s.transition(node_id="n3", to=S.CHECK_FAILED, reason="stuck"), RT
    )
    assert derived == [] and failed.after.nodes["n1"].status is S.IN_PROGRESS
    ended = change(
        state,
        lambda s: s.transition(node_id="n3", to=S.CANCELLED, reason="gone", conclusion="dropped"),
        RT,
    )
    assert ["n2", "n3"] in derived  # n1 (planning) derived from its children
    assert ended.after.nodes["n1"].status is S.IN_PROGRESS  # n2 NEW beside an ended n3
