"""The loop's writes, each one transaction: entering a phase, recording how one ended,
dispatching ready member nodes, parking and finishing.

Entering a phase moves what the runtime moves on entry (DO takes its node NEW →
IN_PROGRESS; ADJUST takes a failed node CHECK_FAILED → ADJUSTING), posts the phase's
input to the loop root and records the entry, together: a kill leaves all of it or none,
so a resumed run either enters the phase again or finds it entered, never half. Ending a
phase records the end (unless `phase_end` did already, with its result) together with
what the end implies: a DO entry that ran out of steps leaves its node CHECK_FAILED; a
CHECK entry records the workspace ref at which its nodes passed (the BENCH rule).

Both commit lazily (no fsync of their own): nothing leaves the store between them and the
next step's commit, which is durable whenever an effect outside follows (tools about to
run, a question, a final answer) and so makes them durable too (the WAL is replayed as an
ordered prefix). A killed process loses nothing; a power failure can only lose a suffix
nothing outside saw, and the loop enters or closes the phase again, as after a kill.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.wait_kinds import WaitKind
from mindloop.events.types import NoteAdded
from mindloop.loop import check_ref, review_pass, step_budget
from mindloop.loop import self_improve as si
from mindloop.loop.inputs import PhaseInput, render
from mindloop.loop.ladder import Level
from mindloop.loop.phases import Phase
from mindloop.loop.policy import count_refusals
from mindloop.loop.request_tree import tree_parts
from mindloop.loop.retries import RetryLedger, reflections_for_prompt
from mindloop.loop.routing import (
    HINT_ILLEGAL,
    NodeTally,
    blocked_nodes,
    count_nodes,
    dispatchable,
)
from mindloop.memory import workspace_summary as wsum
from mindloop.store import MessageRecord, WaitRecord
from mindloop.store import loop_state as ls
from mindloop.toolsets.workspace import NODE_SINK
from mindloop.workspace import api, repo
from mindloop.workspace.commands import Session
from mindloop.workspace.context import node_context
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.fields import LIMITS
from mindloop.workspace.models import MAIN, ROOT_ID, Node, NodeKind, NodeStatus, NodeType
from mindloop.workspace.ref import workspace_ref
from mindloop.workspace.state import WorkspaceState, is_ready
from mindloop.workspace.transitions import Authority

RUNTIME = "runtime (work loop)"
# DO entries the runtime ends leave their node CHECK_FAILED with the end's reason: STUCK
# (the step budget, or the stuck detector), DO_EXHAUSTED (a node that waits is left
# WAIT: `node_waits`).
RUNTIME_FAILS = frozenset({ls.EndedBy.STEP_CAP, ls.EndedBy.RUNTIME})


@dataclass
class InHand:
    """What one transition has read already — the phase closed, the route decided and the
    next phase entered in one transaction (`TaskLoop._segue`) — handed on instead of read
    again: the workspace as last read or written, the workspace ref. (Rows such as the
    root dialog are kept by the store's memo.) Valid only inside that transaction (it
    holds the write lock: nothing else moves what was read, and nothing in it writes the
    deliverables the ref hashes)."""

    rtws: Path
    workspace: WorkspaceState | None = None  # as stored (None after a write: read again)
    # the loop root's course, when the caller has it (its tool step's dialog): else read
    root_course: int | None = None
    _ref: str | None = None

    def ref(self) -> str:
        """The workspace ref (`workspace.ref.workspace_ref`), computed once."""
        if self._ref is None:
            self._ref = workspace_ref(self.rtws)
        return self._ref

    def carry_ref(self, ref: str) -> None:
        """The ref is `ref` (still valid: `check_ref.after_do`), unless it was computed."""
        if self._ref is None:
            self._ref = ref

    def course(self, rt: DialogRuntime, root_id: str) -> int:
        """The loop root's course (read once: nothing in the transaction starts another)."""
        if self.root_course is None:
            self.root_course = rt.store.get_dialog(root_id).course
        return self.root_course


def _ref_of(rt: DialogRuntime, hand: InHand | None) -> str:
    return hand.ref() if hand is not None else workspace_ref(rt.rtws)


def one_line_reason(text: str) -> str:
    """`text` as a transition's reason: one line, within the workspace's limit."""
    flat = " ".join(text.split()) or "-"
    limit = LIMITS["reason"]
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _workspace(rt: DialogRuntime, task: str) -> WorkspaceState:
    return repo.load(rt.store, task)


def _held_workspace(rt: DialogRuntime, task: str, hand: InHand | None) -> WorkspaceState:
    """The workspace the caller's transaction has in hand, else as stored."""
    if hand is not None and hand.workspace is not None:
        return hand.workspace
    return _workspace(rt, task)


def move(rt: DialogRuntime, task: str, node_id: str, to: NodeStatus, reason: str) -> WorkspaceState:
    """The runtime moves a node (in the caller's transaction; `WorkspaceError` if the
    table or an invariant refuses, with nothing written); the workspace as written."""

    def command(s: Session) -> None:
        s.transition(node_id=node_id, to=to, reason=reason)

    _, change = api.execute(rt.store, rt.rtws, task, Authority.runtime(RUNTIME), command)
    return change.after


def current_do_node(state: WorkspaceState) -> str | None:
    """DO's node: the MAIN node IN_PROGRESS, else the first ready one in tree pre-order."""
    # the enum members bound once: each look-up through the class costs more than the
    # test (a scan of every node at each entry)
    in_progress, execution = NodeStatus.IN_PROGRESS, NodeKind.EXECUTION
    at_work = [
        n
        for n in state.view().values()
        if n.status is in_progress and n.kind is execution and n.assignee == MAIN
    ]
    if len(at_work) == 1 and _in_tree(state, at_work[0]):  # the usual case: no walk
        return at_work[0].id
    if at_work:
        ids = {n.id for n in at_work}
        found = next((n.id for n, _ in state.walk() if n.id in ids), None)
        if found is not None:
            return found
    # the walk stops at the first ready node
    new = NodeStatus.NEW
    return next((n.id for n, _ in state.walk() if n.status is new and is_ready(state, n)), None)


def _in_tree(state: WorkspaceState, node: Node) -> bool:
    """`node` is reached by the tree's walk: each node up its parent chain is one of its
    parent's children, up to the root."""
    seen: set[str] = set()
    while node.id != ROOT_ID:
        parent = state.peek(node.parent_id) if node.parent_id is not None else None
        if parent is None or node.id in seen or node.id not in parent.children:
            return False
        seen.add(node.id)
        node = parent
    return True


def adjust_node(state: WorkspaceState) -> str | None:
    """ADJUST's node: one ADJUSTING (a resumed entry), else the first CHECK_FAILED; None
    is plan mode (R5: nodes blocked by failed deps; a failed BENCH re-planned)."""
    order = [n for n, _ in state.walk() if n.kind is NodeKind.EXECUTION]
    for status in (NodeStatus.ADJUSTING, NodeStatus.CHECK_FAILED):
        for n in order:
            if n.status is status:
                return n.id
    return None


def check_targets(state: WorkspaceState, ready_benches: frozenset[str]) -> list[str]:
    """CHECK's nodes, in tree pre-order: every COMPLETE one, and the ready BENCH nodes."""
    # the enum members bound once, the rarest condition first (a scan of every node)
    complete, bench, execution = NodeStatus.COMPLETE, NodeType.BENCH, NodeKind.EXECUTION
    found = [
        n
        for n in state.view().values()
        if (n.status is complete or (n.type is bench and n.id in ready_benches))
        and n.kind is execution
    ]
    if len(found) == 1 and _in_tree(state, found[0]):  # the usual case: no walk
        return [found[0].id]
    ids = {n.id for n in found}
    return [n.id for n, _ in state.walk() if n.id in ids] if ids else []


def enter_phase(
    rt: DialogRuntime,
    state: ls.LoopState,
    phase: Phase,
    *,
    notes: Sequence[str] = (),
    resolved: Sequence[str] = (),
    ready_benches: frozenset[str] = frozenset(),
    replan: bool = False,
    held: bool = False,
    hand: InHand | None = None,
) -> tuple[ls.LoopState, str]:
    """Enter `phase` (one lazy transaction); the new state and the input posted. `held`:
    the caller's drive holds the root and answers the input itself (not marked to drive).
    `hand`: what the caller's transaction read already (the workspace is left in it
    unless the entry moved a node). `state` may be staged (`close(save=False)`): it is
    written with the entry."""
    task = state.task_path
    store = rt.store
    with store.tx(durable=False):
        ws = read = _held_workspace(rt, task, hand)
        node: str | None = None
        targets: list[str] = []
        if phase is Phase.DO:
            node = current_do_node(ws)
            if node is not None and ws.nodes[node].status is NodeStatus.NEW:
                ws = move(rt, task, node, NodeStatus.IN_PROGRESS, "selected on DO entry")
        elif phase is Phase.ADJUST:
            node = adjust_node(ws)
            if node is not None and ws.nodes[node].status is NodeStatus.CHECK_FAILED:
                ws = move(rt, task, node, NodeStatus.ADJUSTING, "ADJUST starts on the node")
            elif node is None:  # plan mode: the nodes it is for (`loop.plan_mode`)
                targets = blocked_nodes(ws)
        elif phase is Phase.CHECK:
            targets = check_targets(ws, ready_benches)
        elif phase is Phase.PLAN:  # agent-loop §7.2 trigger 4
            wsum.refresh_on_plan(store, task, ws)
        batch: list[MessageRecord] = []
        batch_end: dict[str, int] | None = None
        dead_kb: list[str] = []
        if phase is Phase.SELF_IMPROVE:  # the next batch of the root's history (§9.3)
            limit = rt.config.team.loop.self_improve.batch_messages
            cursor = si.load_cursor(store, state.root_id)
            until = review_pass.pass_end(state)  # the history as the pass began
            batch, after = si.next_batch(store, state.root_id, cursor, limit, until=until)
            batch_end = after.model_dump()
            member = store.get_dialog(state.root_id).member
            dead_kb = [si.dead_line(r) for r in si.dead_kb_requests(store, member)]
        reflections: list[str] = []
        if node is not None:  # the node's last reflections (agent-loop §8.3)
            config = rt.config.team.loop.retries
            records = RetryLedger(store, config).records(task, node)
            reflections = reflections_for_prompt(records, config)
        entry = state.entry + 1
        ref = _ref_of(rt, hand) if phase is Phase.CHECK else None
        text = render(
            PhaseInput(
                phase=phase,
                entry=entry,
                lang=rt.lang,
                workspace=ws,
                rtws=rt.rtws,
                node=node,
                targets=targets,
                notes=list(notes),
                resolved=list(resolved),
                last_summary=state.last_summary,
                workspace_ref=ref,
                batch=batch,
                dead_kb=dead_kb,
                reflections=reflections,
                tree=tree_parts(store, task),
            )
        )
        course = hand.course(rt, state.root_id) if hand is not None else None
        msg = _post(rt, state.root_id, text, phase, entry, mark=not held, course=course)
        if ref is not None:  # its close may take it (`check_ref`)
            check_ref.hold(store, task, msg, ref)
        if hand is not None:  # a node moved: a session's copy, read again when needed
            hand.workspace = read if ws is read else None
        pass_until = review_pass.pass_until(state, msg) if phase is Phase.SELF_IMPROVE else None
        pass_entry = review_pass.pass_entry(state, entry) if phase is Phase.SELF_IMPROVE else 0
        state = ls.save(
            store,
            state,
            status=ls.LoopStatus.ACTIVE,
            status_reason="",
            phase=phase,
            entry=entry,
            entry_message_id=msg.id,
            entered_at=time.time(),
            entry_steps=0,
            node_id=node,
            targets=targets,
            ended=None,
            closed=False,
            batch_end=batch_end,
            pass_until=pass_until,
            pass_entry=pass_entry,
            new_scope=False if phase is Phase.PLAN else state.new_scope,
            replan_stale=False if phase is Phase.PLAN else state.replan_stale,
            planned=state.planned or phase is Phase.PLAN,
            plan_reentries=state.plan_reentries + (1 if replan else 0),
            # new scope reopens the task: it ends with SELF_IMPROVE again
            self_improved=phase is Phase.SELF_IMPROVE
            or (state.self_improved and phase is not Phase.PLAN),
        )
    return state, text


def _post(
    rt: DialogRuntime,
    root_id: str,
    text: str,
    phase: Phase,
    entry: int,
    *,
    mark: bool = True,
    course: int | None = None,
) -> MessageRecord:
    """The phase input as a user message of the loop root, marked as the loop's (and the
    root marked to drive, unless `mark` is off: the poster drives it); `course`: the
    root's, when the caller has it."""
    store = rt.store
    msg = store.append_message(
        root_id,
        "user",
        {"text": text, "loop": {"phase": phase.value, "entry": entry}},
        course=store.get_dialog(root_id).course if course is None else course,
    )
    if mark:
        store.update_dialog(root_id, needs_drive=True)
    return msg


def phase_messages(rt: DialogRuntime, state: ls.LoopState) -> list[MessageRecord]:
    """The root's messages since the current entry's input (this entry's work)."""
    return _entry_messages(rt, state)[1]


def _entry_messages(
    rt: DialogRuntime, state: ls.LoopState, hand: InHand | None = None
) -> tuple[int, list[MessageRecord]]:
    """`phase_messages`, and the root's course they are of (the one it is in now)."""
    root = state.root_id
    course = hand.course(rt, root) if hand is not None else rt.store.get_dialog(root).course
    return course, rt.store.messages_after(root, course, state.entry_message_id)


def close(
    rt: DialogRuntime,
    state: ls.LoopState,
    end: ls.PhaseEnd | None,
    *,
    steps: int = 0,
    cost: float = 0.0,
    save: bool = True,
    hand: InHand | None = None,
    stored: ls.LoopState | None = None,
) -> tuple[ls.LoopState, list[MessageRecord]]:
    """Record the end of the current phase (one lazy transaction): `end` unless
    `phase_end` recorded one already; the model `steps` (and `cost`) of its last drive and the
    refusals of the entry counted; a DO entry out of steps leaves its node CHECK_FAILED;
    a CHECK entry records the refs its nodes passed at. The closed state, and the
    entry's messages (read for the count).

    `hand`: what the caller's transaction read already (the workspace is left in it
    unless the close wrote it). Without `save`, the closed state is staged (`loop_state.stage`): written with
    the next save of the task in the caller's transaction (the next entry's), or by its
    `loop_state.flush`. `stored`: the task's state as the caller's transaction just read
    it (`loop_state.get`)."""
    store = rt.store
    task = state.task_path
    with store.tx(durable=False):
        fresh = stored if stored is not None else ls.get(store, task)
        assert fresh is not None
        state = fresh
        if state.ended is None:
            if end is None:
                raise ValueError("close: the phase has not ended and no end was given")
            state = state.model_copy(update={"ended": end})
        assert state.ended is not None
        ws = read = _held_workspace(rt, task, hand)
        ended_by = state.ended.by
        if state.phase is Phase.DO and state.node_id and ended_by in RUNTIME_FAILS:
            node = ws.nodes.get(state.node_id)
            if node is not None and node.status is NodeStatus.IN_PROGRESS:
                why = one_line_reason(state.ended.reason)
                with contextlib.suppress(WorkspaceError):  # moved meanwhile (a reply)
                    ws = move(rt, task, node.id, NodeStatus.CHECK_FAILED, why)
        # DO: the node's steps_used
        after = step_budget.count(rt, state, state.entry_steps + steps, ws)
        if hand is not None:  # a write leaves a session's copy: read again when needed
            hand.workspace = read if after is read else None
        course, messages = _entry_messages(rt, state, hand)
        if hand is not None and state.phase is Phase.DO:  # the ref at COMPLETE, if still it
            carried = check_ref.after_do(rt, state, messages, after if after is not None else ws)
            if carried is not None:
                hand.carry_ref(carried)
        passed_at: str | None = None  # a CHECK pass: the ref its nodes passed at
        if state.phase is Phase.CHECK:
            done = [
                n for n in state.targets if n in ws.nodes and ws.nodes[n].status is NodeStatus.DONE
            ]
            if done:  # the ref the entry showed, if it cannot have changed (`check_ref`)
                shown = check_ref.at_close(rt, state, course, messages)
                ref = passed_at = shown if shown is not None else _ref_of(rt, hand)
                at = time.time()
                ls.record_checks(store, state.root_id, {n: (at, ref) for n in done})
        if state.phase is Phase.SELF_IMPROVE:
            # past the batch if the entry processed it (its self_md_patch and kb_request
            # calls have returned; both dedupe, so a crash before this commit re-processes
            # it harmlessly); kept if the runtime stopped the entry (errors in a row)
            si.close_batch(store, state)
        if passed_at is not None:  # agent-loop §7.2 trigger 5
            wsum.record_check_pass(store, task, passed_at, messages)
        state = state.model_copy(
            update={
                "last_summary": state.ended.summary,
                "refusals": state.refusals + count_refusals(messages),
                "hints_dropped": state.hints_dropped + count_refusals(messages, HINT_ILLEGAL),
                "entry_steps": state.entry_steps + steps,
                "drive_steps": state.drive_steps + steps,
                "drive_cost": state.drive_cost + cost,
                "closed": True,
            }
        )
        state = ls.save(store, state) if save else ls.stage(store, state)
    return state, messages


def fail_exhausted_adjust(rt: DialogRuntime, state: ls.LoopState) -> str | None:
    """Before ADJUST enters: if its node used its `loop.retries.adjust_per_node` ADJUST
    cycles (and has no accepted one left to use), the runtime fails it instead
    (CHECK_FAILED → ADJUSTING → FAILED, agent-loop §5.4) and tells the user with a note
    in the loop root — one transaction. Returns the note, or None when ADJUST may run."""
    task = state.task_path
    store = rt.store
    config = rt.config.team.loop.retries
    ws = _workspace(rt, task)
    node_id = adjust_node(ws)
    if node_id is None:
        return None
    node = ws.nodes[node_id]
    cycles = [r for r in RetryLedger(store, config).records(task, node_id) if r.level is Level.L3]
    if len(cycles) < config.adjust_per_node or node.adjust_count < len(cycles):
        return None
    moves = [e for e in repo.log(store, task) if e.node_id == node_id and e.kind == "transition"]
    failure = next(
        (
            str(e.data.get("reason", ""))
            for e in reversed(moves)
            if e.data.get("to") == "CHECK_FAILED"
        ),
        "",
    )
    last = cycles[-1]
    conclusion = (
        f"FAILED after {len(cycles)} ADJUST cycles (loop.retries.adjust_per_node): the last "
        f"({last.change_kind}: {last.change_summary}) did not pass either. Last failure: "
        f"{failure or 'not recorded'}"
    )
    note = (
        f"[work loop] Node {node_id} {node.title!r} FAILED: its {len(cycles)} ADJUST cycles "
        f"(loop.retries.adjust_per_node) are used up. Last failure: {failure or 'not recorded'}"
    )

    def command(s: Session) -> None:
        if s.node(node_id).status is NodeStatus.CHECK_FAILED:
            s.transition(
                node_id=node_id, to=NodeStatus.ADJUSTING, reason="ADJUST starts on the node"
            )
        s.transition(
            node_id=node_id,
            to=NodeStatus.FAILED,
            reason=f"ADJUST cap: {len(cycles)} cycles used",
            conclusion=conclusion[: LIMITS["conclusion"]],
        )

    with store.tx():
        api.execute(store, rt.rtws, task, Authority.runtime(RUNTIME), command)
        append_note(rt, state.root_id, note)
    rt.bus.publish(NoteAdded(dialog_id=state.root_id, text=note))
    return note


def cancel_abandoned(
    rt: DialogRuntime, ws: WorkspaceState, open_waits: Sequence[WaitRecord]
) -> list[WaitRecord]:
    """Among the loop root's `open_waits`: the side dialogs it dispatched that still work
    on a node that ended meanwhile (cancelled or failed: by a phase, ADJUST's cap, or the
    user from another process) are stopped (`DialogTree.cancel_detached`), so they spend
    nothing more and their questions leave the human's list. The waits still open."""
    still = []
    for rec in open_waits:
        node = ws.nodes.get(rec.node) if rec.node is not None else None
        ended = node is None or node.terminal
        if rec.kind == WaitKind.DETACHED.value and rec.node is not None and ended:
            status = node.status.value if node is not None else "gone"
            if rt.tree.cancel_detached(rec, f"node {rec.node} is {status}") is not None:
                continue
        still.append(rec)
    return still


def dispatch_ready(
    rt: DialogRuntime,
    state: ls.LoopState,
    ws: WorkspaceState | None = None,
    nodes: NodeTally | None = None,
) -> list[str]:
    """Dispatch every NEW member node whose deps are all DONE (the runtime's NEW → WAIT,
    agent-loop §5.4), each in one transaction with its detached side dialog. `ws`: the
    workspace as just loaded, if the caller has it, and `nodes` its `count_nodes`."""
    if ws is None:
        ws, nodes = _workspace(rt, state.task_path), None
    out: list[str] = []
    if not (nodes or count_nodes(ws)).dispatchable:  # the common case: no walk
        return out
    ready = {n.id for n in ws.view().values() if n.status is NodeStatus.NEW and dispatchable(ws, n)}
    for node in [n for n, _ in ws.walk() if n.id in ready]:  # in tree order
        assert node.member is not None
        with contextlib.suppress(WorkspaceError):
            _dispatch(rt, state, node.id, node.member, node.version)
            out.append(node.id)
    if out:
        rt.wake.set()
    return out


def _dispatch(rt: DialogRuntime, state: ls.LoopState, node_id: str, member: str, v: int) -> None:
    task = state.task_path
    key = f"loop:{state.root_id}:{node_id}:{v}"  # the dispatch id: one per node version
    side_id = "s" + hashlib.sha256(key.encode()).hexdigest()[:12]
    members = frozenset(rt.config.team.members)

    def command(s: Session) -> str:
        s.dispatch(
            node_id=node_id,
            dispatch_id=key,
            side_id=side_id,
            caller_id=state.root_id,
            members=members,
        )
        return node_context(s.state, node_id, rtws=rt.rtws, lang=rt.lang)

    with rt.store.tx():
        message, _ = api.execute(rt.store, rt.rtws, task, Authority.runtime(RUNTIME), command)
        root = rt.store.get_dialog(state.root_id)
        rt.tree.start_detached(
            root,
            member,
            message,
            sink=NODE_SINK,
            payload={"task": task, "node_id": node_id, "dispatch_id": key},
            side_id=side_id,
        )


def append_note(rt: DialogRuntime, root_id: str, text: str) -> None:
    """A runtime note in the loop root's history, read by the model at its next step
    (joins the caller's transaction; the caller publishes `NoteAdded` after it)."""
    with rt.store.tx():
        rec = rt.store.get_dialog(root_id)
        rt.store.append_message(root_id, "note", {"text": text}, course=rec.course)


def save(rt: DialogRuntime, state: ls.LoopState, **changes: object) -> ls.LoopState:
    """Change fields of the loop state (one lazy transaction: bookkeeping a crash may
    lose is recomputed on resume)."""
    with rt.store.tx(durable=False):
        fresh = ls.get(rt.store, state.task_path)
        assert fresh is not None
        return ls.save(rt.store, fresh, **changes)
