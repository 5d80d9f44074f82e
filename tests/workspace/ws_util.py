"""Helpers for the workspace tests: a workspace value built through the commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mindloop.workspace.commands import Change, CriterionInput, DocInput, Session
from mindloop.workspace.models import NodeKind, NodeStatus, SelfCheck
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import Actor, Authority

CHAT = Authority.chat("@dev")
RT = Authority.runtime()
TASK = "tasks/login.tsk"


def apply(
    state: WorkspaceState, fn: Callable[[Session], Any], authority: Authority = CHAT
) -> WorkspaceState:
    s = Session(state, authority, now=1000.0)
    fn(s)
    return s.finish().after


def change(
    state: WorkspaceState, fn: Callable[[Session], Any], authority: Authority = CHAT
) -> Change:
    s = Session(state, authority, now=1000.0)
    fn(s)
    return s.finish()


def fresh() -> WorkspaceState:
    return apply(WorkspaceState(task=TASK), lambda s: s.init())


def tree() -> WorkspaceState:
    """root ─ n1 Backend (planning) ─ n2 API (docs a, b; AC1) , n3 Schema
    root ─ n4 Form (deps n2)"""

    def build(s: Session) -> None:
        s.create_node(parent_id="root", kind=NodeKind.PLANNING, title="Backend", requirement="b")
        s.create_node(
            parent_id="n1",
            kind=NodeKind.EXECUTION,
            title="API",
            requirement="build the API",
            docs=[DocInput("docs/a.md", "A"), DocInput("docs/b.md", "")],
            acceptance_criteria=[CriterionInput("login", "200")],
        )
        s.create_node(parent_id="n1", kind=NodeKind.EXECUTION, title="Schema", requirement="s")
        s.create_node(
            parent_id="root", kind=NodeKind.EXECUTION, title="Form", requirement="f", deps=["n2"]
        )

    return apply(fresh(), build)


def complete(state: WorkspaceState, node_id: str) -> WorkspaceState:
    """NEW → IN_PROGRESS → COMPLETE (self-check of every criterion, no artifacts)."""
    node = state.nodes[node_id]
    checks = [SelfCheck(criterion=c.id, passed=True) for c in node.acceptance_criteria]

    def run(s: Session) -> None:
        s.transition(node_id=node_id, to=NodeStatus.IN_PROGRESS, reason="start")
        s.transition(
            node_id=node_id,
            to=NodeStatus.COMPLETE,
            reason="done",
            self_check=checks,
            no_artifacts_reason="nothing to ship",
        )

    return apply(state, run)


def done(state: WorkspaceState, node_id: str) -> WorkspaceState:
    state = complete(state, node_id)
    return apply(
        state,
        lambda s: s.transition(
            node_id=node_id, to=NodeStatus.DONE, reason="checked", conclusion="ok"
        ),
        Authority.phase(Actor.CHECK, "@checker"),
    )
