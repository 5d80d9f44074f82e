"""When a BENCH node may be tested (agent-loop §5.5), all four conditions, for routing.

The workspace's commands check conditions 1 (its scope is DONE), 2 (the workspace is
quiescent) and 4 (every criterion has a `verify`) (`Session.bench_not_ready`). Condition 3,
"nothing changed since the checks", needs the workspace itself: its *ref* now
(`workspace/ref.py`) must equal the ref recorded when the last node of the scope passed
CHECK. Routing sends a BENCH node to CHECK only when all four hold (`ready_benches`); the
CHECK phase's transition checks condition 3 again (`workspace.ref.since_checks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from mindloop.workspace.commands import Session
from mindloop.workspace.models import Node, NodeKind, NodeStatus, NodeType
from mindloop.workspace.ref import bench_scope, unchanged_since_checks, workspace_ref
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import Authority

__all__ = ["bench_candidates", "ready_benches"]


def bench_candidates(state: WorkspaceState) -> list[Node]:
    """BENCH nodes waiting to be tested whose conditions 1, 2 and 4 hold."""
    out = []
    session: Session | None = None
    for node in state.nodes.values():
        if (
            node.kind is NodeKind.EXECUTION
            and node.type is NodeType.BENCH
            and node.status is NodeStatus.WAIT
        ):
            session = session or Session(state, Authority.runtime())
            if session.bench_not_ready(node) is None:
                out.append(node)
    return out


def ready_benches(
    state: WorkspaceState,
    rtws: Path,
    checked: Callable[[], Mapping[str, tuple[float, str]]],
    ref_of: Callable[[], str] | None = None,
) -> tuple[frozenset[str], dict[str, str]]:
    """The BENCH nodes for which all four conditions hold, and why the others that pass
    1, 2 and 4 do not (condition 3). `checked()` gives the passing CHECKs recorded (read
    only when a BENCH node is a candidate), `ref_of()` the workspace ref as the caller
    computes it (by default `workspace_ref(rtws)`)."""
    candidates = bench_candidates(state)
    if not candidates:
        return frozenset(), {}
    marks = checked()
    ref = ref_of() if ref_of is not None else workspace_ref(rtws)
    ready, why = set(), {}
    for node in candidates:
        problem = unchanged_since_checks(bench_scope(state, node), marks, ref)
        if problem is None:
            ready.add(node.id)
        else:
            why[node.id] = problem
    return frozenset(ready), why
