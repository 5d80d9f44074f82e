"""The waits of the node DO works are the node's, not the task's (agent-loop §5.4, §6.3;
DESIGN.md §8 items 2 and 10): a waiting node blocks nothing else.

While the loop root is in DO its view works on DO's node (`LoopPolicy.work_node` →
`LiveDialog.node`), so a wait one of its calls opens — a `wait_for` timer or system
event, a call that needs the human's approval, an async tool — is registered for that
node (`Waits.open(node=…)`) and does not park the root. In the same transaction the
runtime moves the node IN_PROGRESS → WAIT (`on_open`, the engine's `Waits.node_opened`
hook), and DO's turn policy ends the entry (`policy.NodeWaits`). Routing then goes on:
other ready work (R4), or a park when every open node waits (R7) — the run stops with
exit 4 when only the human can move it (an approval), or waits for a timer or event.

When the node's waits have closed, routing moves it on (`settle`, before each routing
decision, from what the store holds, so it works whichever process resolved the wait and
after any crash):

- every one positive (a timer fired, an event came, the call was approved): WAIT →
  IN_PROGRESS (NEW if it never started) and DO takes it up again, the resolutions in its
  input; while another MAIN node is IN_PROGRESS (invariant 1) it stays WAIT until that
  one is done with;
- one negative (rejected, failed, or timed out where the kind's timeout fails): WAIT →
  CHECK_FAILED with `WAIT_<KIND>_<OUTCOME>: <why>` (e.g. `WAIT_USER_APPROVAL_REJECTED:
  <the human's reason>`) at once, its other open waits cancelled; ADJUST takes it (R2).
- the node ended meanwhile (cancelled, failed): its open waits are cancelled (an
  approval leaves the human's list).

The node's current spell of waiting starts at its latest move to WAIT (its log): waits
of earlier spells do not count again. An approved call of the node runs when the root
works the node again (`LiveDialog.node`), its result a note after DO's input.

Questions (`!?@human`) and tellasks the root asks in DO stay task-level: the question
record parks the dialog that asked it and its answer is written straight into that
dialog's history, which would land inside another node's DO entry if the root went on
meanwhile; making them node-level needs the engine to queue answers like other news.
PLAN's and ADJUST's waits are the task's (no node is worked there).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.wait_kinds import WAIT_KINDS, OnTimeout, Resolution, WaitKind, WaitOutcome
from mindloop.dialogs.waits import NodeHook, wait_note
from mindloop.loop import phase_ops
from mindloop.loop.phase_ops import one_line_reason
from mindloop.loop.routing import NodeTally, count_nodes, own_wait
from mindloop.store import WaitRecord, WaitStatus
from mindloop.store import loop_state as ls
from mindloop.store.waits import resolved_since
from mindloop.workspace import repo
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.models import MAIN, NodeKind, NodeStatus
from mindloop.workspace.state import WorkspaceState

log = logging.getLogger(__name__)

# The kinds whose node waits this module moves (a dispatch moves its node itself).
_NOT_OURS = WaitKind.DETACHED.value


@dataclass
class Settled:
    """What `settle` did: whether nodes moved, notes for the next phase's input, and the
    resolutions of the nodes taken up again (its "resolved waits")."""

    moved: bool = False
    notes: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)


def on_open(rt: DialogRuntime) -> NodeHook:
    """The engine's `Waits.node_opened` hook: the node a wait was opened for, if it is at
    work, moves IN_PROGRESS → WAIT in the registering transaction (agent-loop §5.4)."""

    def opened(rec: WaitRecord, task_path: str | None) -> None:
        if task_path is None or rec.node is None or rec.kind == _NOT_OURS:
            return
        node = repo.load(rt.store, task_path).nodes.get(rec.node)
        if node is None or node.status is not NodeStatus.IN_PROGRESS:
            return
        ref = WAIT_KINDS[WaitKind(rec.kind)].ref
        try:
            phase_ops.move(rt, task_path, node.id, NodeStatus.WAIT, f"{ref} {rec.id} registered")
        except WorkspaceError as exc:  # the wait stays the node's; the entry still ends
            log.warning("node %s could not wait on %s: %s", node.id, rec.id, exc)

    return opened


def negative(rec: WaitRecord) -> bool:
    """A wait that ended badly for its node: rejected, failed, or timed out where its
    kind's timeout is a failure (a question's default assumed is an answer)."""
    outcome = (rec.resolution or {}).get("outcome")
    if outcome in (WaitOutcome.REJECTED, WaitOutcome.FAILED):
        return True
    return (
        outcome == WaitOutcome.TIMEOUT
        and WAIT_KINDS[WaitKind(rec.kind)].on_timeout is OnTimeout.FAIL
    )


def failure(rec: WaitRecord) -> str:
    """`WAIT_<KIND>_<OUTCOME>: <why>`: the reason a node fails on `rec`."""
    res = rec.resolution or {}
    found = res.get("event")
    event = found if isinstance(found, dict) else {}
    code = f"{WAIT_KINDS[WaitKind(rec.kind)].ref}_{str(res.get('outcome', 'failed')).upper()}"
    why = event.get("reason") or event.get("why") or event.get("summary") or ""
    return f"{code}: {why}" if why else code


def waits_now(rt: DialogRuntime, state: ls.LoopState) -> bool:
    """Whether DO's node waits (its entry must end: a kill came between the wait's
    commit and the entry's end)."""
    if state.node_id is None:
        return False
    node = repo.load(rt.store, state.task_path).nodes.get(state.node_id)
    return node is not None and node.status is NodeStatus.WAIT


def _spell_start(rt: DialogRuntime, task: str, node_id: str) -> float | None:
    """When the node last moved to WAIT (None: never)."""
    for e in reversed(repo.node_log(rt.store, task, node_id)):
        if e.kind == "transition" and e.data.get("to") == NodeStatus.WAIT.value:
            return e.at
    return None


def settle(
    rt: DialogRuntime,
    state: ls.LoopState,
    ws: WorkspaceState,
    open_waits: Sequence[WaitRecord],
    nodes: NodeTally | None = None,
) -> Settled:
    """Move on the nodes whose waits closed (see the module doc); `open_waits`: the loop
    root's open waits as just read; `nodes`: `routing.count_nodes(ws)`, if the caller
    counted it. Reads nothing more when no MAIN node waits."""
    out = Settled()
    for w in open_waits:  # a node that ended meanwhile waits on nothing (§6.3 Cancel)
        node = ws.nodes.get(w.node) if w.node is not None else None
        if w.node is not None and w.kind != _NOT_OURS and (node is None or node.terminal):
            status = node.status.value if node is not None else "gone"
            _cancel(rt, w, f"node {w.node} is {status}")
            out.moved = True
    if nodes is None:
        nodes = count_nodes(ws)
    if not nodes.own_waiting:  # the common case
        return out
    task, root = state.task_path, state.root_id
    busy = any(
        n.kind is NodeKind.EXECUTION and n.assignee == MAIN and n.status is NodeStatus.IN_PROGRESS
        for n in ws.nodes.values()
    )
    for node in [n for n, _ in ws.walk() if own_wait(n)]:  # in tree order
        since = _spell_start(rt, task, node.id)
        if since is None:
            continue
        closed = [
            w
            for w in resolved_since(rt.store, root, since)
            if w.node == node.id and w.kind != _NOT_OURS
        ]
        if not closed:  # nothing of its own resolved yet (or it waits on no record)
            continue
        still = [w for w in open_waits if w.node == node.id and w.kind != _NOT_OURS]
        bad = next((w for w in closed if negative(w)), None)
        try:
            if bad is not None:
                reason = one_line_reason(failure(bad))
                with rt.store.tx():
                    phase_ops.move(rt, task, node.id, NodeStatus.CHECK_FAILED, reason)
                    for w in still:
                        _cancel(rt, w, f"node {node.id} failed: {reason}")
                out.notes.append(f"node {node.id}: WAIT → CHECK_FAILED ({reason})")
                out.moved = True
                continue
            if still or (node.started and busy):  # more to come; or after the node at work
                continue
            to = NodeStatus.IN_PROGRESS if node.started else NodeStatus.NEW
            phase_ops.move(rt, task, node.id, to, "its waits are satisfied")
        except WorkspaceError as exc:  # moved meanwhile: the next routing looks again
            log.warning("node %s: its closed waits could not move it: %s", node.id, exc)
            continue
        busy = busy or to is NodeStatus.IN_PROGRESS
        out.moved = True
        out.resolved += [
            f"{node.id}: {wait_note(w)}" for w in closed if w.status is not WaitStatus.CANCELLED
        ]
    return out


def _cancel(rt: DialogRuntime, rec: WaitRecord, why: str) -> None:
    """Close a failed node's other wait (an approval leaves the human's list)."""
    res = Resolution(outcome=WaitOutcome.CANCELLED, event={"why": why}, by="runtime")
    rt.waits.resolve(
        rec.id,
        res,
        status=WaitStatus.CANCELLED,
        note=f"[work loop] {rec.kind} wait {rec.id} cancelled: {why}",
    )
