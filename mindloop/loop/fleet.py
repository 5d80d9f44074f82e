"""The dialog engine and the work loop as a scale-out worker runs them (the
`durable.worker.Engine` a `mindloop worker` process is built on).

Two kinds of work reach a worker through its queues:

- **a drive** of one dialog (`mindloop.drive`): every dialog of the rtws but the loop
  roots — free roots, a loop's side dialogs, the members working its dispatched nodes,
  FBR samples — driven on whichever worker has room;
- **a task's loop** (`mindloop.loop`): `TaskLoop.run` of one task, as `mindloop run TASK`
  runs it in one process, but without driving the rest of the tree itself (those are
  queued drives like any other): the loop drives its root through each phase, routes,
  and polls the store while the tree's other dialogs are at work on the fleet. It ends
  where a local run ends (DONE, FAILED, a cap, an error, a wait on the human).

So a loop root is never driven outside its loop (its drive ends phases and routes), and
`due` sorts what the store says is drivable into the two. A loop is due when its root is
drivable (a question answered, an approval decided, a reply or a message for it), and
when a drive of another dialog of its tree ended here while the loop may have stopped
waiting for the human (an answered question of a teammate's dialog, say): running a loop
with nothing new to do only routes and parks it again.

Between looks a worker also fires due timer waits and delivers the KB requests of the
outbox (what every local `mindloop run` does), so the KB teammate's dialog is driven too.
"""

from __future__ import annotations

import asyncio
import time

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.durable.steps import JsonObject
from mindloop.durable.worker import Due
from mindloop.loop.binding import bind
from mindloop.loop.driver import LoopPolicies, TaskLoop
from mindloop.loop.kb import KbDispatcher
from mindloop.loop.roots import LoopRoots
from mindloop.store import loop_state as ls

KB_POLL = 0.5  # seconds between looks at the outbox (as a local run's poll interval)
_SETTLED = (ls.LoopStatus.DONE, ls.LoopStatus.FAILED)


class FleetEngine:
    """`durable.worker.Engine` over one `DialogRuntime` built with the loop's policies."""

    def __init__(self, rt: DialogRuntime, policies: LoopPolicies) -> None:
        self.rt = rt
        self.policies = policies
        policies.bind(rt)
        self._roots = LoopRoots(rt.store)
        self._nudged: set[str] = set()  # loop roots a drive of their tree ended here
        self.kb = KbDispatcher(rt)
        self._kb_look = 0.0  # monotonic time of the next look at the outbox

    @property
    def claim_owner(self) -> str:
        return self.rt.claims.owner

    @property
    def wake(self) -> asyncio.Event:
        return self.rt.wake

    async def drive(self, dialog_id: str, max_steps: int | None = None) -> JsonObject:
        result = await self.rt.drive(dialog_id, max_steps=max_steps)
        root = self._roots.root(dialog_id)
        if root != dialog_id and self._roots.task(root) is not None:
            self._nudged.add(root)
        self.rt.wake.set()  # what it made drivable is enqueued at once
        return {
            "dialog_id": dialog_id,
            "reason": str(result.reason),
            "steps": result.steps,
            "error": result.error,
        }

    async def run_loop(self, task_path: str, max_steps: int | None = None) -> JsonObject:
        # The loop drives its root within each phase's step cap, as a local run does;
        # `max_steps` (`run TASK --max-steps N`) limits the drives of its tree, which
        # the workers enqueue with the limit of the loop running for it (`Due.trees`).
        loop = TaskLoop(self.rt, self.policies, task_path, drive_tree=False)
        report = await loop.run()
        self.rt.wake.set()
        return {
            "task": report.task_path,
            "root_id": report.root_id,
            "outcome": report.outcome.value,
            "reason": report.reason,
            "phase": report.phase.value if report.phase is not None else None,
            "entries": report.entries,
            "max_steps": max_steps,
        }

    def due(self) -> Due:
        drives: list[str] = []
        loops: dict[str, str] = {}
        trees: dict[str, str] = {}
        for did in self.rt.store.drivable_dialogs(self.rt.claims.owner):
            task = self._roots.task(did)
            if task is None:
                drives.append(did)
                root = self._roots.root(did)
                if root != did and self._roots.task(root) is not None:
                    trees[did] = root
            else:
                loops[did] = task
        nudged, self._nudged = self._nudged, set()
        for root in nudged - loops.keys():
            state = ls.by_root(self.rt.store, root)
            if state is not None and state.status not in _SETTLED:
                loops[root] = state.task_path
        return Due(drives=drives, loops=loops, trees=trees)

    def step_limit(self, root_id: str) -> int | None:
        return ls.step_limit(self.rt.store, root_id)

    def recover(self) -> list[str]:
        return self.rt.recover()

    def tick(self) -> None:
        """Fire the timer waits that are due, and deliver the KB requests that are (as
        every `mindloop run` does; a delivery is one transaction, once across workers)."""
        now = time.time()
        due = self.rt.waits.next_due()
        if due is not None and due <= now:
            self.rt.waits.fire_due()
        if time.monotonic() < self._kb_look:
            return
        self._kb_look = time.monotonic() + KB_POLL  # (a wake may come many times a second)
        due = self.kb.next_due()
        if due is not None and due <= now and self.kb.tick(now):
            self.rt.wake.set()


def submit(
    rt: DialogRuntime,
    task_path: str,
    message: str | None,
    *,
    member: str | None = None,
    max_steps: int | None = None,
) -> ls.LoopState:
    """What `mindloop run TASK [-m M] [--max-steps N]` writes before it enqueues the task's
    loop for the workers: the loop root (made on first use), the run's per-drive step
    limit (the drives of its tree keep it after the run's workflow ended: an answer, a
    decision), and the user's message to it."""
    state = bind(rt, task_path, member=member)
    if max_steps is not None:
        ls.record_step_limit(rt.store, state.root_id, max_steps)
    if message is not None:
        rt.post_user_message(state.root_id, message)
    return state
