"""`mindloop run TASK` on the scale-out workers: with `MINDLOOP_DATABASE_URL` set and a
live worker on that database, the task's loop root and message are written here, its
work loop is enqueued for the workers (`mindloop.loop`, `durable/worker.py`), and this
command follows it — the phase it is in, the nodes done, the waits that open — until the
loop's workflow ends: DONE, FAILED, a cap, an error, or a wait on the human. Exit codes
as a local run: 0 done, 1 error, 3 a cap, 4 waiting on your answer or approval, 5 FAILED;
130 when you stop following (the loop goes on on the workers).

With no live worker, `run TASK` runs the loop in this process (as on SQLite), so one
machine on PostgreSQL needs no worker; `answer`, `approve` and `reject` likewise leave the
driving to live workers and drive in-process only when there are none.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from mindloop.cli.common import INTERRUPTED_EXIT, OUTCOME_EXIT_CODES, console, print_json
from mindloop.cli.loop_cmds import GLYPH, print_loop, print_stops, progress_bar
from mindloop.store import DialogRecord, DialogStatus

if TYPE_CHECKING:
    from mindloop import service
    from mindloop.loop.api import TaskStatus

POLL = 0.5  # seconds between looks at the loop's workflow and the store


def live_workers(rtws: Path) -> int:
    """How many workers of the rtws's database are alive now."""
    from mindloop.store import Store
    from mindloop.store.workers import WorkerTable

    store = Store.for_rtws(rtws)
    try:
        return len(WorkerTable(store).live())
    finally:
        store.close()


def run_on_workers(
    rtws: Path, url: str, task: str, message: str | None, as_json: bool, *, max_steps: int
) -> int:
    try:
        return asyncio.run(_enqueue_and_follow(rtws, url, task, message, as_json, max_steps))
    except KeyboardInterrupt:
        console.print(
            f"[dim]stopped following; the loop goes on on the workers (`mindloop run {task}` "
            "follows it again)[/]"
        )
        return INTERRUPTED_EXIT


async def _enqueue_and_follow(
    rtws: Path, url: str, task: str, message: str | None, as_json: bool, max_steps: int
) -> int:
    from mindloop import service
    from mindloop.durable.client import FleetClient
    from mindloop.loop.fleet import submit

    if message is not None and not message.strip():
        from mindloop.errors import MindloopError

        raise MindloopError("the message is empty: say something (nothing was posted)")
    project = service.open_project(rtws)
    try:
        rel = service.check_task(project, task)  # refused before anything is written
        rt = project.runtime
        state = submit(
            rt, rel, message, member=project.config.team.default_responder, max_steps=max_steps
        )
        client = await asyncio.to_thread(FleetClient, url)
        try:
            wid = await asyncio.to_thread(client.enqueue_loop, state.root_id, rel, max_steps)
            # a loop already queued or running was joined: its tree's drives keep its limit
            limit = await asyncio.to_thread(client.max_steps, wid)
            if not as_json:
                console.print(
                    f"[dim]{escape(rel)}: its loop is queued for the workers ({wid}); "
                    "following it[/]"
                )
                if limit != max_steps:
                    console.print(
                        f"[yellow]its loop was already under way with "
                        f"{'the default step limit' if limit is None else f'--max-steps {limit}'}"
                        f": --max-steps {max_steps} applies from its next run[/]"
                    )
            view = _Progress(project, rel, state.root_id, quiet=as_json)
            while True:
                wf = await asyncio.to_thread(client.state, wid)
                view.show()
                # As a local run, which lets the drives of its tree under way when its
                # loop stops end first: their ends (an error, the step limit) are its.
                if wf.ended and not view.tree_busy():
                    break
                await asyncio.sleep(POLL)
        finally:
            await asyncio.to_thread(client.close)
        return _report(project, rel, wf, view, as_json, limit or max_steps)
    finally:
        await project.aclose()


class _Progress:
    """Prints what changed in the task since the last look: each phase entered (read from
    the loop root's phase inputs, so none is missed between looks), the nodes done, new
    waits and questions, dialogs of the tree that stopped on an error."""

    def __init__(self, project: service.Project, task: str, root_id: str, *, quiet: bool) -> None:
        self.project = project
        self.store = project.runtime.store
        self.task = task
        self.root_id = root_id
        self.quiet = quiet
        self.done: tuple[int, int] = (-1, -1)
        self.seen: set[str] = set()
        # dialogs of the tree that stopped on an error / at the step limit while followed
        self.failed: list[str] = []
        self.stopped: list[str] = []
        from mindloop.store import loop_state as ls

        state = ls.get(self.store, task)
        # from the current entry's input on (shown again if it is still under way)
        self.after = 0
        if state is not None and state.entry_message_id:
            self.after = state.entry_message_id - (1 if state.in_phase else 0)
        self.seen.update(self._stopped_short())

    def status(self) -> TaskStatus:
        from mindloop import service

        return service.task_status(self.project, self.task)

    def tree_busy(self) -> bool:
        """Whether a dialog of the tree but its loop root is being driven or is marked to
        be (its drive queued on the workers)."""
        return any(
            d.id != self.root_id and (d.needs_drive or d.status is DialogStatus.RUNNING)
            for d in self.store.list_dialogs(root_id=self.root_id)
        )

    def _stopped_short(self) -> dict[str, DialogRecord]:
        """The tree's dialogs whose last drive stopped on an error or at the step limit,
        by a key of their status (a dialog retried and stopped again is new)."""
        return {
            f"{d.status}:{d.id}": d
            for d in self.store.list_dialogs(root_id=self.root_id)
            if d.status.retriable
        }

    def show(self) -> None:
        st = self.status()
        course = self.store.get_dialog(self.root_id).course
        for m in self.store.messages_after(self.root_id, course, self.after):
            self.after = max(self.after, m.id)
            entered = m.data.get("loop") if m.kind == "user" else None
            if isinstance(entered, dict):
                node = f" · node {st.node}" if st.node and entered.get("entry") == st.entry else ""
                self._print(
                    f"[bold]▶ {entered.get('phase')}[/] (entry {entered.get('entry')}){escape(node)}"
                )
        for key, d in self._stopped_short().items():
            if key not in self.seen:
                self.seen.add(key)
                if d.status is DialogStatus.ERROR:
                    self.failed.append(d.id)
                    self._print(f"[red]✗ @{escape(d.member)} ({d.id}) stopped on an error[/]")
                else:
                    self.stopped.append(d.id)
                    self._print(
                        f"[yellow]■ @{escape(d.member)} ({d.id}) stopped at the step limit[/]"
                    )
        if (st.done, st.total) != self.done:
            self.done = (st.done, st.total)
            if st.total:
                self._print(progress_bar(st.done, st.total))
        for q in st.questions:
            if q.id not in self.seen:
                self.seen.add(q.id)
                self._print(f"[cyan]⏸ question {q.id}[/]: {escape(q.headline)}")
        for w in st.waits:
            if w.id not in self.seen and w.kind != "user_input":  # (questions: above)
                self.seen.add(w.id)
                self._print(f"[cyan]⏸ {w.kind} wait {w.id}[/] {escape(w.key)}")

    def _print(self, line: str) -> None:
        if not self.quiet:
            console.print(line)


def _drive_report(
    project: service.Project, task: str, wf: Any, view: _Progress, max_steps: int
) -> service.DriveReport:
    """What the run came to, as a local `run TASK` reports it (`service.DriveReport`):
    the loop's outcome from its workflow's output, the tree's dialogs that stopped on an
    error or at the step limit while followed as their drives' ends, and the tree, its
    questions, approvals and usage from the store."""
    from mindloop import service
    from mindloop.dialogs.outcomes import DriveEnd, DriveResult

    out = wf.output or {}
    if wf.status == "SUCCESS":
        outcome, reason = str(out.get("outcome", "error")), str(out.get("reason", ""))
    else:
        outcome = "error"
        reason = f"the loop's workflow ended {wf.status}" + (f": {wf.error}" if wf.error else "")
    rtws = project.rtws
    drives = [
        DriveResult(
            did,
            DriveEnd.ERROR,
            error=f"on a worker (mindloop dialogs show -C {rtws} {did})",
        )
        for did in view.failed
    ] + [DriveResult(did, DriveEnd.STEP_LIMIT) for did in view.stopped]
    rt = project.runtime
    root = view.root_id
    tree = rt.store.list_dialogs(root_id=root)
    loop = service.LoopSummary(
        task=task,
        root_id=root,
        outcome=service.Outcome(outcome)
        if outcome in {o.value for o in service.Outcome}
        else service.Outcome.ERROR,
        reason=reason,
        phase=out.get("phase") if isinstance(out.get("phase"), str) else None,
        entries=int(out.get("entries") or 0),
    )
    return service.DriveReport(
        root_id=root,
        max_steps=max_steps,
        drives=drives,
        tree=tree,
        members={d.id: d.member for d in tree},
        questions=rt.store.open_questions(root_ids=[root]),
        approvals=rt.pending_approvals([root]),
        tree_usage=rt.store.usage(root_id=root),
        loops=[loop],
    )


def _report(
    project: service.Project, task: str, wf: Any, view: _Progress, as_json: bool, max_steps: int
) -> int:
    from mindloop.cli.chat_cmd import print_approvals, print_questions, summary
    from mindloop.store.location import state_location

    report = _drive_report(project, task, wf, view, max_steps)
    code = OUTCOME_EXIT_CODES[report.outcome]
    loop = report.loop
    assert loop is not None
    reason = loop.reason
    st = view.status()
    rtws = project.rtws
    if as_json:
        # the local run's summary (`chat_cmd.summary`), and what only the workers know
        print_json(
            summary(
                report,
                code,
                state_location(rtws),
                task=task,
                reason=reason,
                workflow_id=wf.workflow_id,
                executor_id=wf.executor_id,
                status=st.model_dump(mode="json"),
                approvals=[a.model_dump(mode="json") for a in report.approvals],
                at=time.time(),
            )
        )
        return code
    print_stops(report, rtws)
    for n in st.nodes:
        console.print(
            f"{'  ' * n.depth}{GLYPH.get(n.status, '?')} {n.id} {n.status} {escape(n.title)}"
        )
    print_questions(st.questions, rtws)
    print_approvals(report.approvals, rtws)
    print_loop(report, rtws)
    console.print(
        f"[dim]on the workers (`mindloop workers`); state in {escape(state_location(rtws))} · "
        f"`mindloop status {task}` shows it[/]"
    )
    return code
