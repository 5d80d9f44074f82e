"""The staleness check when a task's loop resumes after a wait (agent-loop §6.3, step 4).

The engine photographs the task when a wait opens (`dialogs.staleness`: the workspace ref
and a hash of goals.md and constraints.md) and judges a resume against the task as it is
then (`Waits.staleness`). This module is the loop's side of it:

- `workspace_ref_for`: the workspace ref the loop's runtime photographs — the
  deliverables' ref (`workspace.ref.workspace_ref`: git HEAD plus what differs from it, or a tree
  hash) for a task with a loop, nothing for other dialogs' tasks (a wait of a free chat
  costs one indexed read, no git call);
- `resumed`: the loop root's own waits (those that parked it: questions, approvals,
  timers, system events; a node's waits do not, the root worked on meanwhile) closed
  since the loop last looked, judged; the driver asks whenever it goes on (between
  phases, or before driving a phase again) — one indexed read, never per step;
- `note`: what the model is told — the signals, and the workspace tree as it is now (the
  reloaded workspace summary).

The driver acts on the verdict: one signal adds the note (to the resumed phase's history
and to the next phase's input); two or more send the task back to PLAN, once per task
(after that, a note).
"""

from __future__ import annotations

from dataclasses import dataclass

from mindloop.dialogs.approvals import is_proposal
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.staleness import Staleness, StaleSignal, WorkspaceRef
from mindloop.i18n import Lang
from mindloop.loop.inputs import tree_text
from mindloop.store import Store
from mindloop.store import loop_state as ls
from mindloop.workspace import repo
from mindloop.workspace.ref import workspace_ref

SIGNAL_TEXT: dict[StaleSignal, str] = {
    StaleSignal.WORKSPACE_CHANGED: "the workspace changed (files someone else wrote, or a commit)",
    StaleSignal.TASKDOC_CHANGED: "goals.md or constraints.md changed (the Taskdoc in your "
    "system prompt is the current one)",
    StaleSignal.WAITED_LONG: "waited {waited} (longer than loop.waits.stale_after)",
}


def workspace_ref_for(store: Store, rtws_ref: WorkspaceRef) -> WorkspaceRef:
    """The ref a wait of `task_path` photographs: `rtws_ref` for a task with a loop."""

    def ref(task_path: str) -> str | None:
        if store.task_by_path(task_path) is None:
            return None
        return rtws_ref(task_path)

    return ref


def loop_workspace_ref(rt: DialogRuntime) -> WorkspaceRef:
    """`workspace_ref_for` over the runtime's store and rtws."""
    rtws = rt.rtws
    return workspace_ref_for(rt.store, lambda _task: workspace_ref(rtws))


@dataclass(frozen=True)
class Resumed:
    """The loop root's waits closed since the loop last looked, judged."""

    staleness: Staleness
    checked_at: float  # the latest close among them: the next look starts after it


def resumed(rt: DialogRuntime, state: ls.LoopState) -> Resumed | None:
    """The verdict on the root's waits closed since `state.stale_checked_at` (None: none
    closed). Only waits that held the root count (not a node's, not an approval of a
    change SELF_IMPROVE proposed, which nothing waited for)."""
    since = max(state.stale_checked_at, state.created_at)
    waits = [
        w
        for w in rt.waits.resolved_since(state.root_id, since)
        if w.node is None and not is_proposal(w)
    ]
    if not waits:
        return None
    closed = max(w.resolved_at or since for w in waits)
    return Resumed(rt.waits.staleness(waits, state.task_path), closed)


def _waited(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def note(rt: DialogRuntime, state: ls.LoopState, st: Staleness, *, replan: bool) -> str:
    """What the model is told on a stale resume (see the module doc)."""
    lang: Lang = rt.lang
    signals = "; ".join(SIGNAL_TEXT[s].format(waited=_waited(st.waited)) for s in st.signals)
    if replan:
        what = "Two or more signals: the task goes back to PLAN (once per task) to check the plan."
    elif len(st.signals) > 1:
        what = "PLAN already ran once for a stale context: check your plan against it here."
    else:
        what = "Check what you do next against it."
    tree = tree_text(repo.load(rt.store, state.task_path), lang)
    return (
        f"[work loop] The context may be stale after the wait: {signals}. {what}\n"
        f"The workspace tree now:\n{tree}"
    )
