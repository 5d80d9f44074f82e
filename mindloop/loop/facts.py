"""What routing and parking look at, read from the store in one pass per decision.

`gather` builds `routing.RouteFacts` for a task: its workspace, the waits of the task
itself (its loop root's open questions, blocking waits and unanswered tellasks: R1), a new
user message (R0), the BENCH nodes that are ready (all four conditions), the phase that
ended with its hint, and whether that phase registered a wait. `park_reason` says, when
the task parks, what it waits on: the human (the run stops, exit 4), work under way in
the tree (the run waits for it), a dialog of the tree stopped at a limit (the run stops;
its drive's step limit or cap makes it exit 3, and the next run drives it on), or nothing
that will move by itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from mindloop.dialogs.approvals import is_proposal
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.waits import WaitKind
from mindloop.loop.bench import ready_benches
from mindloop.loop.routing import NodeTally, RouteFacts, count_nodes
from mindloop.store import DialogStatus, MessageRecord, WaitRecord
from mindloop.store import loop_state as ls
from mindloop.workspace import repo
from mindloop.workspace.models import NodeKind, NodeStatus
from mindloop.workspace.state import WorkspaceState

# Waits only a person resolves (an approval); a question is counted on its own.
HUMAN_WAITS = frozenset({WaitKind.APPROVAL.value})


def is_user_input(m: MessageRecord) -> bool:
    """A message the human wrote to the loop root (not the loop's own phase input, not
    an answer to a question the root asked, not the prompt of a course `clear_mind`
    started)."""
    return m.kind == "user" and not {"loop", "question_id", "new_course"} & m.data.keys()


@dataclass(frozen=True)
class Gathered:
    facts: RouteFacts
    bench_why: dict[str, str]  # BENCH nodes held back by condition 3, and why


def gather(
    rt: DialogRuntime,
    state: ls.LoopState,
    messages: list[MessageRecord],
    ws: WorkspaceState | None = None,
    open_waits: Sequence[WaitRecord] | None = None,
    *,
    nodes: NodeTally | None = None,
    ref: Callable[[], str] | None = None,
) -> Gathered:
    """`messages`: the root's messages since the current entry's input; `ws`: the
    workspace as just loaded, and `open_waits` the root's open waits as just read, if the
    caller has them; `nodes`: `routing.count_nodes(ws)`, if the caller counted it; `ref`:
    the workspace ref as the caller computes it (once), if it does."""
    store = rt.store
    if ws is None:
        ws = repo.load(store, state.task_path)
        nodes = None
    if nodes is None:
        nodes = count_nodes(ws)
    pending, _, questions, blocking = store.wait_state(state.root_id)
    if nodes.benches_waiting:  # a BENCH node may be ready (else none is)
        benches, why = ready_benches(ws, rt.rtws, lambda: ls.checks(store, state.root_id), ref)
    else:
        benches, why = frozenset(), {}
    ended = state.ended
    wait_registered = False
    if ended is not None and state.phase is not None:
        since = state.entered_at
        asked = store.open_questions(dialog_id=state.root_id) if questions else []
        wait_registered = any(q.asked_at >= since for q in asked) or any(
            w.created_at >= since
            for w in (store.open_waits(state.root_id) if open_waits is None else open_waits)
        )
    facts = RouteFacts(
        workspace=ws,
        new_message=any(is_user_input(m) for m in messages),
        task_waits=pending + questions + blocking,
        new_scope=state.new_scope,
        bench_ready=benches,
        ended=state.phase if ended is not None else None,
        hint=ended.hint if ended is not None else None,
        wait_registered=wait_registered,
        replan_left=state.plan_reentries < rt.config.team.loop.retries.plan_reentries,
        planned=state.planned,
        nodes=nodes,
    )
    return Gathered(facts, why)


class Park(StrEnum):
    HUMAN = "human"  # a question or an approval: the run stops (exit 4)
    WORK = "work"  # dialogs of the tree are at work, or a timer will fire: wait for them
    STUCK = "stuck"  # nothing will move by itself: the human must act (exit 4)
    # a dialog of the tree stopped at the per-drive step limit or a spending cap, and its
    # caller waits on it: the run ends (exit 3); the next `run` of the task drives it on
    STOPPED = "stopped"


def park_reason(rt: DialogRuntime, state: ls.LoopState) -> tuple[Park, str]:
    """What a parked task waits on (see the module doc), with a sentence for people."""
    store = rt.store
    root = state.root_id
    questions = store.open_questions(root_ids=[root])
    if questions:
        return Park.HUMAN, f"question {questions[0].id}: {questions[0].headline}"
    tree = store.list_dialogs(root_id=root)
    # A human's decision nobody waits for (a change SELF_IMPROVE proposed) holds nothing
    # up, and its due time is a reminder, not an event that moves the task.
    waits = [w for d in tree for w in store.open_waits(d.id) if not is_proposal(w)]
    for w in waits:
        if w.kind in HUMAN_WAITS:
            return Park.HUMAN, f"approval {w.key}"
    busy = [
        d.id for d in tree if d.id != root and (d.status is DialogStatus.RUNNING or d.needs_drive)
    ]
    if busy:
        return Park.WORK, f"{len(busy)} dialog(s) at work: {', '.join(busy[:3])}"
    timers = [w for w in waits if w.due_at is not None]
    if timers:
        due = time.strftime("%Y-%m-%d %H:%M", time.localtime(timers[0].due_at))
        return Park.WORK, f"a {timers[0].kind} wait until {due}"
    stopped = [d for d in tree if d.id != root and d.status is DialogStatus.STOPPED]
    if stopped:
        d = stopped[0]
        return Park.STOPPED, (
            f"dialog {d.id} (@{d.member}) stopped at the per-drive step limit or a cap: "
            f"`mindloop run {state.task_path}` drives it on"
        )
    ws = repo.load(store, state.task_path)
    waiting = [
        n.id
        for n in ws.nodes.values()
        if n.kind is NodeKind.EXECUTION and n.status is NodeStatus.WAIT
    ]
    if waiting:
        return Park.STUCK, f"nodes {', '.join(waiting)} wait, and nothing is at work for them"
    return Park.STUCK, "no node can move and nothing is at work"
