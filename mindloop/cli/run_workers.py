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
from mindloop.cli.loop_cmds import GLYPH, progress_bar

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


def run_on_workers(rtws: Path, url: str, task: str, message: str | None, as_json: bool) -> int:
    try:
        return asyncio.run(_enqueue_and_follow(rtws, url, task, message, as_json))
    except KeyboardInterrupt:
        console.print(
            f"[dim]stopped following; the loop goes on on the workers (`mindloop run {task}` "
            "follows it again)[/]"
        )
        return INTERRUPTED_EXIT


async def _enqueue_and_follow(
    rtws: Path, url: str, task: str, message: str | None, as_json: bool
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
        state = submit(rt, rel, message, member=project.config.team.default_responder)
        client = await asyncio.to_thread(FleetClient, url)
        try:
            wid = await asyncio.to_thread(client.enqueue_loop, state.root_id, rel)
            if not as_json:
                console.print(
                    f"[dim]{escape(rel)}: its loop is queued for the workers ({wid}); "
                    "following it[/]"
                )
            view = _Progress(project, rel, state.root_id, quiet=as_json)
            while True:
                wf = await asyncio.to_thread(client.state, wid)
                view.show()
                if wf.ended:
                    break
                await asyncio.sleep(POLL)
        finally:
            await asyncio.to_thread(client.close)
        return _report(project, rel, wf, view, as_json)
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
        self.errors: list[str] = []  # dialogs of the tree that errored while followed
        from mindloop.store import loop_state as ls

        state = ls.get(self.store, task)
        # from the current entry's input on (shown again if it is still under way)
        self.after = 0
        if state is not None and state.entry_message_id:
            self.after = state.entry_message_id - (1 if state.in_phase else 0)
        self.seen.update(self._errored())

    def status(self) -> TaskStatus:
        from mindloop import service

        return service.task_status(self.project, self.task)

    def _errored(self) -> dict[str, str]:
        from mindloop.store import DialogStatus

        return {
            f"error:{d.id}": f"@{d.member} ({d.id}) stopped on an error"
            for d in self.store.list_dialogs(root_id=self.root_id)
            if d.status is DialogStatus.ERROR
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
        for key, text in self._errored().items():
            if key not in self.seen:
                self.seen.add(key)
                self.errors.append(text)
                self._print(f"[red]✗ {escape(text)}[/]")
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


def _report(project: service.Project, task: str, wf: Any, view: _Progress, as_json: bool) -> int:
    from mindloop import service

    out = wf.output or {}
    if wf.status == "SUCCESS":
        outcome, reason = str(out.get("outcome", "error")), str(out.get("reason", ""))
    else:
        outcome = "error"
        reason = f"the loop's workflow ended {wf.status}" + (f": {wf.error}" if wf.error else "")
    if view.errors and outcome != "error":  # as a local run: a failed drive is an error
        outcome, reason = "error", "; ".join(view.errors)
    code = OUTCOME_EXIT_CODES.get(outcome, 1)
    st = view.status()
    approvals = service.list_approvals(project, task=task)
    rtws = project.rtws
    if as_json:
        print_json(
            {
                "task": task,
                "root_id": st.root_id,
                "workflow_id": wf.workflow_id,
                "executor_id": wf.executor_id,
                "outcome": outcome,
                "reason": reason,
                "exit_code": code,
                "status": st.model_dump(mode="json"),
                "approvals": [a.model_dump(mode="json") for a in approvals],
                "at": time.time(),
            }
        )
        return code
    for n in st.nodes:
        console.print(
            f"{'  ' * n.depth}{GLYPH.get(n.status, '?')} {n.id} {n.status} {escape(n.title)}"
        )
    for q in st.questions:
        console.print(
            f"[cyan]question {q.id}[/] from dialog {q.dialog_id}: {escape(q.headline)}\n"
            f'  answer with: mindloop answer -C {rtws} {q.id} "…"'
        )
    for a in approvals:
        console.print(
            f"[cyan]approval {a.id}[/] from dialog {a.dialog_id}: @{escape(a.member)} asks "
            f"to run {escape(a.summary)}\n"
            f"  approve with: mindloop approve -C {rtws} {a.id}\n"
            f'  reject with:  mindloop reject -C {rtws} {a.id} --reason "…"'
        )
    color = {"done": "green", "failed": "red", "waiting": "cyan"}.get(outcome, "yellow")
    console.print(
        f"[{color}]task {escape(task)}: {outcome}[/]" + (f" — {escape(reason)}" if reason else "")
    )
    console.print(f"[dim]on the workers (`mindloop workers`); `mindloop status {task}` shows it[/]")
    return code
