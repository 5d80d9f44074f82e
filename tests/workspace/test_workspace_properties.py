"""Property: no sequence of calls the commands accept breaks an invariant (agent-loop §5.3),
every status change is logged (invariant 6), and a refused call changes nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindloop.workspace.commands import Change, CriterionInput, DocInput, Session
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.invariants import problems
from mindloop.workspace.models import (
    NodeKind,
    NodeStatus,
    NodeType,
    RefAction,
    SelfCheck,
)
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import Actor, Authority, find_rows, legal_targets
from tests.workspace.ws_util import fresh

AUTHORITIES = [
    Authority.chat("@dev"),
    Authority.runtime(),
    Authority.user(),
    *(Authority.phase(a, a.value) for a in (Actor.PLAN, Actor.DO, Actor.CHECK, Actor.ADJUST)),
]
PATHS = ["docs/a.md", "docs/b.md", "https://example.com/spec", "README.md"]

pick = st.integers(min_value=0, max_value=50)
actions = st.one_of(
    st.tuples(
        st.just("create"),
        pick,
        st.sampled_from([NodeKind.EXECUTION, NodeKind.EXECUTION, NodeKind.PLANNING]),
        st.sampled_from([NodeType.TASK, NodeType.TASK, NodeType.BENCH]),
        st.lists(pick, max_size=2),
        st.sampled_from(["MAIN", "MEMBER:bob"]),
        st.booleans(),
    ),
    st.tuples(
        st.just("transition"),
        pick,
        st.one_of(st.sampled_from(list(NodeStatus)), st.integers(0, 5)),
        st.integers(0, len(AUTHORITIES) - 1),
        st.booleans(),
        st.booleans(),
    ),
    st.tuples(st.just("dispatch"), pick, st.booleans()),
    st.tuples(st.just("reply"), pick, st.booleans(), st.booleans()),
    st.tuples(st.just("split"), pick, st.booleans()),
    st.tuples(st.just("reference"), pick, st.sampled_from(list(RefAction)), st.sampled_from(PATHS)),
    st.tuples(st.just("update"), pick, st.booleans()),
)


def _node(state: WorkspaceState, i: int) -> str:
    ids = list(state.nodes)
    return ids[i % len(ids)]


def _exec(state: WorkspaceState, i: int) -> str:
    """Mostly an execution node (where the state machine lives), sometimes any node."""
    ids = [k for k, n in state.nodes.items() if n.kind is NodeKind.EXECUTION]
    if not ids or i % 7 == 6:
        return _node(state, i)
    return ids[i % len(ids)]


def _run(state: WorkspaceState, action: tuple[Any, ...], n: int) -> Session:
    kind = action[0]
    auth = AUTHORITIES[0]
    if kind == "transition":
        auth = AUTHORITIES[action[3]]
        node = state.nodes[_exec(state, action[1])]
        if isinstance(action[2], int):  # a legal target, asked by someone its row allows
            legal = legal_targets(node.status, node.type) or [NodeStatus.NEW]
            rows = find_rows(node.status, legal[action[2] % len(legal)], node.type)
            if rows:
                auth = Authority(frozenset(rows[0].by), "row")
    elif kind == "reply":
        auth = Authority.runtime()
    s = Session(state, auth, now=float(n))
    if kind == "create":
        _, p, k, t, deps, assignee, criteria = action
        planning = [k for k, v in state.nodes.items() if v.kind is NodeKind.PLANNING]
        ex = [k for k, v in state.nodes.items() if v.kind is NodeKind.EXECUTION]
        s.create_node(
            parent_id=planning[p % len(planning)] if p % 9 else _node(state, p),
            kind=k,
            type=t if k is NodeKind.EXECUTION or p % 5 == 0 else NodeType.TASK,
            title=f"node {n}",
            requirement="r",
            deps=[ex[d % len(ex)] for d in deps] if ex else [],
            assignee=assignee,
            acceptance_criteria=[CriterionInput("w", "t", verify="pytest" if criteria else None)],
            docs=[DocInput(PATHS[n % len(PATHS)], "")],
        )
    elif kind == "transition":
        _, i, to, _, checked, concl = action
        nid = _exec(state, i)
        node = state.nodes[nid]
        if isinstance(to, int):  # a target the table allows from here (mostly legal moves)
            legal = legal_targets(node.status, node.type) or [NodeStatus.NEW]
            to = legal[to % len(legal)]
        checks = [SelfCheck(criterion=c.id, passed=True) for c in node.acceptance_criteria]
        s.transition(
            node_id=nid,
            to=to,
            reason="because",
            self_check=checks if checked else None,
            no_artifacts_reason="none" if checked else None,
            conclusion="concluded" if concl else None,
        )
    elif kind == "dispatch":
        s.dispatch(
            node_id=_node(state, action[1]), dispatch_id=f"k{n}", side_id=f"s{n}", caller_id="d"
        )
    elif kind == "reply":
        nid = _exec(state, action[1])
        node = state.nodes[nid]
        key = node.dispatch.dispatch_id if node.dispatch else "none"
        text = "BLOCKED: the schema" if action[3] else "done\nARTIFACT: src/x.py"
        s.member_reply(
            node_id=nid, dispatch_id=key, ok=action[2], text=text, side_id="s", member="bob"
        )
    elif kind == "split":
        s.split_node(
            parent_id=_node(state, action[1]),
            title=f"part {n}",
            requirement="r",
            inherit_context=action[2],
        )
    elif kind == "reference":
        s.reference(node_id=_exec(state, action[1]), target=action[3], action=action[2])
    elif kind == "update":
        s.update(node_id=_exec(state, action[1]), notes="n", conclusion="c" if action[2] else None)
    return s


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(actions, min_size=1, max_size=40))
def test_no_sequence_of_accepted_calls_breaks_an_invariant(seq: list[tuple[Any, ...]]) -> None:
    state = fresh()
    for n, action in enumerate(seq):
        before = state.copy()
        try:
            change = _run(state, action, n).finish()
        except WorkspaceError:
            assert state.nodes == before.nodes and state.index == before.index
            continue
        after = change.after
        assert problems(after) == [], (action, problems(after))
        # the changed nodes `finish` found are those a comparison of the values finds
        assert change.changed_nodes == Change(change.before, after, change.log).changed_nodes
        # invariant 6: every status change of an execution node is a logged transition
        moved = {
            nid
            for nid, node in after.nodes.items()
            if node.kind is NodeKind.EXECUTION
            and nid in before.nodes
            and before.nodes[nid].kind is NodeKind.EXECUTION
            and before.nodes[nid].status is not node.status
        }
        logged = {e.node_id for e in change.log if e.kind == "transition"}
        assert moved <= logged, (action, moved, logged)
        for nid in moved:
            last = [e for e in change.log if e.kind == "transition" and e.node_id == nid][-1]
            assert last.data["to"] == after.nodes[nid].status.value
            assert {"from", "to", "by", "who", "reason"} <= set(last.data)
        state = after
