"""Scale-out commands: `mindloop worker` (one worker process), `mindloop workers` (who
runs), and `mindloop run TASK` on workers (enqueue the task's drive, follow it).

They need `MINDLOOP_DATABASE_URL` (PostgreSQL) and the `postgres` extra. The worker
itself is `mindloop.durable.worker`; this module wires the dialog engine into it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mindloop.cli.common import (
    INTERRUPTED_EXIT,
    OUTCOME_EXIT_CODES,
    console,
    get_rtws,
    print_json,
)
from mindloop.errors import MindloopError

if TYPE_CHECKING:
    from mindloop.dialogs.runtime import DialogRuntime
    from mindloop.durable.steps import JsonObject

NEEDS_URL = (
    "{what} needs MINDLOOP_DATABASE_URL: the PostgreSQL database every worker shares "
    "(e.g. postgresql://mindloop@db.internal/mindloop; pip install 'mindloop[postgres]')"
)
DEFAULT_TASK_MESSAGE = "Work on this task until its goals are met (see your Taskdoc)."


def _database_url(what: str) -> str:
    from mindloop.store.location import database_url

    url = database_url()
    if url is None:
        raise MindloopError(NEEDS_URL.format(what=what))
    return url


class RuntimeEngine:
    """The dialog engine as a worker drives it (`durable.worker.Engine`)."""

    def __init__(self, rt: DialogRuntime) -> None:
        self.rt = rt

    @property
    def claim_owner(self) -> str:
        return self.rt.claims.owner

    @property
    def wake(self) -> asyncio.Event:
        return self.rt.wake

    async def drive(self, dialog_id: str) -> JsonObject:
        result = await self.rt.drive(dialog_id)
        self.rt.wake.set()  # what it made drivable is enqueued at once
        return {
            "dialog_id": dialog_id,
            "reason": str(result.reason),
            "steps": result.steps,
            "error": result.error,
        }

    def drivable(self) -> list[str]:
        return self.rt.store.drivable_dialogs(self.rt.claims.owner)

    def recover(self) -> list[str]:
        return self.rt.recover()

    def tick(self) -> None:
        due = self.rt.waits.next_due()
        if due is not None and due <= time.time():
            self.rt.waits.fire_due()


def worker(
    ctx: typer.Context,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-n", min=1, help="Drives at once on this worker.")
    ] = 10,
    ttl: Annotated[
        float | None,
        typer.Option(
            min=1.0,
            help="Seconds without a heartbeat after which this worker counts as dead and "
            "another takes over its work (default: MINDLOOP_CLAIM_TTL, else 60).",
        ),
    ] = None,
) -> None:
    """Run a scale-out worker: drive this rtws's dialogs as DBOS workflows, with the other
    workers of its PostgreSQL database (MINDLOOP_DATABASE_URL). Ctrl-C or SIGTERM stops it;
    the others take its work over."""
    rtws = get_rtws(ctx)
    url = _database_url("mindloop worker")
    try:
        code = asyncio.run(_worker(rtws, url, concurrency, ttl))
    except KeyboardInterrupt:
        code = INTERRUPTED_EXIT
    raise typer.Exit(code)


async def _worker(rtws: Path, url: str, concurrency: int, ttl: float | None) -> int:
    import signal

    from mindloop.dialogs.claims import claim_ttl_from_env
    from mindloop.dialogs.runtime import DialogRuntime
    from mindloop.durable.dbos_steps import DbosSteps
    from mindloop.durable.worker import Worker

    ttl = ttl or claim_ttl_from_env()
    rt = DialogRuntime(rtws, steps=DbosSteps(), claim_ttl=ttl)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    w = Worker(rtws, RuntimeEngine(rt), rt.store, url, concurrency=concurrency, ttl=ttl)

    def ready() -> None:
        console.print(
            f"worker {w.executor_id} ready: {rtws} · concurrency {concurrency} · "
            f"heartbeat every {ttl / 4:g}s",
            markup=False,
        )

    try:
        why = await w.run(stop, on_ready=ready)
    finally:
        await rt.aclose()
    console.print(f"worker {w.executor_id} {why}", markup=False)
    return 0 if why == "stopped" else 1


def workers(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
    all_: Annotated[
        bool, typer.Option("--all", help="Also the workers that stopped or died.")
    ] = False,
) -> None:
    """List the scale-out workers of this rtws's database: live ones, their heartbeats,
    what each drives now."""
    rtws = get_rtws(ctx)
    _database_url("mindloop workers")
    from mindloop.store import Store
    from mindloop.store.workers import WorkerTable

    store = Store.for_rtws(rtws)
    try:
        table = WorkerTable(store)
        rows, driving = table.all(), table.driving()
    finally:
        store.close()
    now = time.time()
    shown = [w for w in rows if all_ or w.alive(now)]
    data: list[dict[str, Any]] = [
        {
            "executor_id": w.executor_id,
            "state": _state(w, now),
            "host": w.host,
            "pid": w.pid,
            "rtws": w.rtws,
            "fingerprint": w.fingerprint,
            "concurrency": w.concurrency,
            "heartbeat_age": round(now - w.heartbeat_at, 1),
            "driving": sorted(driving.get(w.claim_owner, [])),
        }
        for w in shown
    ]
    if as_json:
        print_json(data)
        return
    from rich.markup import escape

    if not data:
        console.print("no live workers" + ("" if all_ else " (--all shows stopped ones)"))
        return
    for d in data:
        drives = ", ".join(d["driving"]) or "-"
        console.print(
            f"{escape(d['executor_id'])}  {d['state']}  {escape(d['host'])}:{d['pid']}  "
            f"heartbeat {d['heartbeat_age']:g}s ago  concurrency {d['concurrency']}  "
            f"driving {len(d['driving'])}: {escape(drives)}"
        )


def _state(w: Any, now: float) -> str:
    if w.recovered_by:
        return f"taken over by {w.recovered_by}"
    if w.stopped_at is not None:
        return "stopped"
    return "live" if w.alive(now) else "silent"


# ---------------------------------------------------------------------- run TASK


def run_on_workers(rtws: Path, task: str, message: str | None, as_json: bool) -> int:
    """`mindloop run TASK` with a database URL: start the task's root dialog, enqueue its
    drive for the workers, and follow the tree until it settles. Exit code as `run`."""
    url = _database_url("mindloop run TASK")
    return asyncio.run(_submit_and_follow(rtws, url, task, message, as_json))


async def _submit_and_follow(
    rtws: Path, url: str, task: str, message: str | None, as_json: bool
) -> int:
    from dbos import DBOSClient
    from rich.markup import escape

    from mindloop.dialogs.runtime import DialogRuntime
    from mindloop.durable.worker import dbos_config, enqueue_options
    from mindloop.store import DialogStatus
    from mindloop.store.workers import WorkerTable

    rt = DialogRuntime(rtws)
    try:
        live = [w for w in WorkerTable(rt.store).all() if w.alive(time.time())]
        if not live:
            console.print(
                "[yellow]no live worker: the task waits on the queue until one starts "
                "(`mindloop worker`)[/]"
            )
        root, _ = rt.start_root_dialog(task, message or DEFAULT_TASK_MESSAGE)
        config = dbos_config(url, "client")
        client = DBOSClient(
            system_database_url=config["system_database_url"],
            serializer=config["serializer"],
            application_name=config["name"],
        )
        try:
            handle: Any = client.enqueue(enqueue_options(root.id), root.id)
        finally:
            client.destroy()
        if not as_json:
            console.print(
                f"[dim]enqueued {root.id} ({handle.get_workflow_id()}) for "
                f"{len(live)} live worker(s); following its dialog tree[/]"
            )
        seen: dict[str, int] = {}
        while True:
            await asyncio.sleep(0.5)
            tree = rt.store.list_dialogs(root_id=root.id)
            if not as_json:
                _print_new(rt, tree, seen)
            if not rt.store.tree_busy(root.id):
                break
        questions = rt.store.open_questions(root_ids=[root.id])
        status = rt.store.get_dialog(root.id).status
        outcome = (
            "waiting"
            if questions
            else "error"
            if status is DialogStatus.ERROR
            else "step_limit"
            if status is DialogStatus.STOPPED
            else "done"
        )
        code = OUTCOME_EXIT_CODES[outcome]
        if as_json:
            print_json(
                {
                    "root_id": root.id,
                    "outcome": outcome,
                    "dialogs": len(tree),
                    "questions": [q.id for q in questions],
                }
            )
        else:
            for q in questions:
                console.print(
                    f"[cyan]open question {q.id}[/] ({q.dialog_id}): {escape(q.headline)}"
                )
            console.print(f"[dim]{outcome}: {len(tree)} dialog(s) in the tree of {root.id}[/]")
        return code
    finally:
        await rt.aclose()


def _print_new(rt: DialogRuntime, tree: list[Any], seen: dict[str, int]) -> None:
    """Print what the tree's dialogs said since the last look (answers and notes)."""
    from rich.markup import escape

    for d in tree:
        for m in rt.store.messages_after(d.id, d.course, seen.get(d.id, 0)):
            seen[d.id] = m.id or seen.get(d.id, 0)
            if m.kind in ("assistant", "note", "tellask_result") and m.data.get("text"):
                text = str(m.data["text"]).strip().splitlines()[0][:160]
                console.print(f"[bold]{escape(d.member)}[/] [dim]{d.id}[/] {escape(text)}")
