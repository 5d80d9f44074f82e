"""ADJUST in plan mode (agent-loop §4 R5, §5.4): what ends it when it changes nothing.

R5 sends the loop to ADJUST, with no current node, when a NEW node is blocked only by
FAILED or CANCELLED deps: terminal statuses are final, so such a node can never start,
and only a change of the plan moves it — its deps rewired, a replacement for it (a node
with `supersedes`), or its cancellation. Left as it is, R5 holds again after the entry
and the loop would enter ADJUST for ever (until the drive cap asks the human).

The reference leaves the bound open (its caps are per node, and such a node has no
ADJUST cycle of its own); the decision here: each blocked node gets one plan-mode
entry. The entry is entered for the nodes R5 blocks then (`LoopState.targets`, named in
its input by `entry_notes`); when routing would enter plan mode again right after it,
the nodes it left blocked are cancelled by the runtime (NEW → CANCELLED, by RT, with a
conclusion naming their failed deps) and the user is told in a note of the loop root —
one transaction — so R8 can end the task (FAILED, its failed nodes named) unless other
work remains. Something the entry could not see earns it another entry instead: a
message, an answer or a member's reply in the root after the entry ended, or a wait of
the root resolved since (a question asked with the hint WAIT, answered later). A node
that becomes blocked only through such a cancellation gets its own entry. Not a count:
an entry that rewires some nodes and leaves others is judged node by node, and no
number of entries is spent on a node ADJUST does not touch.
"""

from __future__ import annotations

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.events.types import NoteAdded
from mindloop.loop import phase_ops
from mindloop.loop.phases import Phase
from mindloop.loop.routing import blocked_by_failure, blocked_nodes
from mindloop.store import loop_state as ls
from mindloop.store.waits import resolved_since
from mindloop.workspace import api, repo
from mindloop.workspace.commands import Session
from mindloop.workspace.fields import LIMITS
from mindloop.workspace.models import NodeStatus
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import Authority

# Records in the root after the entry ended that bring it something new to plan with.
NEWS = frozenset({"user", "tellask_result"})


def _failed_deps(ws: WorkspaceState, node_id: str) -> str:
    node = ws.nodes[node_id]
    deps = [ws.nodes[d] for d in node.deps if d in ws.nodes]
    return ", ".join(f"{d.id} {d.status.value}" for d in deps if d.status is not NodeStatus.DONE)


def entry_notes(ws: WorkspaceState) -> list[str]:
    """The runtime's note for a plan-mode ADJUST entry: the nodes it is for, and what
    becomes of those it leaves blocked. Empty when ADJUST has a current node."""
    if phase_ops.adjust_node(ws) is not None:
        return []
    blocked = blocked_nodes(ws)
    if not blocked:
        return []
    listed = "; ".join(f"{n} {ws.nodes[n].title!r} (deps {_failed_deps(ws, n)})" for n in blocked)
    return [
        f"plan mode (R5): these nodes can never start, their open deps being FAILED or "
        f"CANCELLED: {listed}. Rewire their deps, replace them, or cancel them; the runtime "
        "will cancel any this entry leaves blocked (unless it waits for an answer)."
    ]


def _news_since(rt: DialogRuntime, state: ls.LoopState, since: float) -> bool:
    """Something came in for the root after `since` that the entry did not see."""
    if resolved_since(rt.store, state.root_id, since):
        return True
    return any(
        m.kind in NEWS and m.created_at >= since for m in phase_ops.phase_messages(rt, state)
    )


def cancel_left_blocked(rt: DialogRuntime, state: ls.LoopState) -> str | None:
    """Before ADJUST enters: if the entry that just ended was ADJUST in plan mode and
    left nodes it was entered for blocked only by FAILED or CANCELLED deps, with nothing
    new since, the runtime cancels them and notes it in the loop root (one transaction).
    Returns the note, or None when ADJUST may run."""
    end = state.ended
    if state.phase is not Phase.ADJUST or state.node_id is not None or end is None:
        return None
    if not state.targets:
        return None
    ws = repo.load(rt.store, state.task_path)
    left = [n for n in state.targets if n in ws.nodes and blocked_by_failure(ws, ws.nodes[n])]
    if not left or _news_since(rt, state, end.at):
        return None
    why = {n: _failed_deps(ws, n) for n in left}

    def command(s: Session) -> None:
        for n in left:
            conclusion = (
                f"Cancelled by the runtime: it could never start (its open deps: {why[n]}), "
                f"and ADJUST in plan mode (entry {state.entry}) left it so."
            )
            s.transition(
                node_id=n,
                to=NodeStatus.CANCELLED,
                reason=phase_ops.one_line_reason(f"blocked by {why[n]}; plan mode left it"),
                conclusion=conclusion[: LIMITS["conclusion"]],
            )

    note = "[work loop] " + "; ".join(
        f"Node {n} {ws.nodes[n].title!r} CANCELLED: blocked by {why[n]}, and ADJUST in plan "
        "mode left it so"
        for n in left
    )
    with rt.store.tx():
        api.execute(
            rt.store, rt.rtws, state.task_path, Authority.runtime(phase_ops.RUNTIME), command
        )
        phase_ops.append_note(rt, state.root_id, note)
    rt.bus.publish(NoteAdded(dialog_id=state.root_id, text=note))
    return note
