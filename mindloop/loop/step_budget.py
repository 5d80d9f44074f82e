"""A node's step budget: the DO steps one attempt at a node may take (agent-loop §5.1
`step_budget`, `steps_used`; §8.1: `steps_used ≥ step_budget` is STUCK).

A node may be worked by several DO entries in one attempt (an entry ended by a reply,
or by the runtime, while the node stays IN_PROGRESS; a wait in between). Each entry's
model steps are added to the node's `steps_used` when the entry closes (`count`, in
`phase_ops.close`'s transaction; a new attempt — ADJUST sending the node back to work —
starts again at 0). A DO entry may take at most what its step cap leaves, and at most
what the node's budget leaves (`entry_limit`): the drive gets that many steps, and when
they are used up the entry ends the way the stuck detector ends one
(`EndedBy.STEP_CAP`, `STUCK (step_budget): …`), its node CHECK_FAILED, so ADJUST
looks at why (§5.4). An entry whose node has no budget left ends at once.

Nothing here runs per step: one cached workspace read per DO drive, one write per DO
entry.
"""

from __future__ import annotations

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop.phases import Phase
from mindloop.loop.stuck import Stuck, StuckRule
from mindloop.store import loop_state as ls
from mindloop.workspace import api, repo
from mindloop.workspace.state import WorkspaceState


def entry_limit(
    rt: DialogRuntime,
    state: ls.LoopState,
    left: int,
    why: str,
    ws: WorkspaceState | None = None,
) -> tuple[int, str]:
    """The steps the current entry may still take, and why it ends when they are used up:
    `left` (what its step cap leaves) for `why`, or in DO the node's budget left, when
    that is less, for STUCK (step_budget). `ws`: the workspace as the caller's
    transaction just read or wrote it, if it has it."""
    if state.phase is not Phase.DO or state.node_id is None:
        return left, why
    if ws is None:
        ws = repo.load(rt.store, state.task_path)
    node = ws.peek(state.node_id)
    if node is None:
        return left, why
    used = node.steps_used + state.entry_steps
    remaining = node.step_budget - used
    if remaining >= left:
        return left, why
    at_end = max(used, node.step_budget)  # when the entry ends: all of it used
    stuck = Stuck(
        rule=StuckRule.STEP_BUDGET,
        detail=f"node {node.id} used {at_end} steps of its budget of {node.step_budget} "
        "in this attempt",
    )
    return remaining, stuck.reason()


def count(
    rt: DialogRuntime,
    state: ls.LoopState,
    steps: int,
    ws: WorkspaceState | None = None,
) -> WorkspaceState | None:
    """Add a closing DO entry's `steps` to its node's `steps_used` (joins the caller's
    transaction; `workspace.api.count_steps`). `ws`: the workspace as the caller's
    transaction just read or wrote it, if it has it; the workspace as it is after the
    count (None: not read, nothing to count)."""
    node_id = state.node_id
    if state.phase is not Phase.DO or node_id is None or steps <= 0:
        return ws
    if ws is not None and (node := ws.peek(node_id)) is not None and node.terminal:
        return ws  # a terminal node's count is final
    return api.count_steps(rt.store, rt.rtws, state.task_path, node_id, steps)
