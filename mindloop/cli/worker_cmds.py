"""Scale-out commands: `mindloop worker` (one worker process) and `mindloop workers` (who
runs); `mindloop run TASK` on the workers is `run_workers.py`.

They need `MINDLOOP_DATABASE_URL` (PostgreSQL) and the `postgres` extra. The worker
itself is `mindloop.durable.worker`; the engine it runs (drives and task loops) is
`mindloop.loop.fleet`.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mindloop.cli.common import (
    INTERRUPTED_EXIT,
    console,
    get_rtws,
    print_json,
)
from mindloop.errors import MindloopError

NEEDS_URL = (
    "{what} needs MINDLOOP_DATABASE_URL: the PostgreSQL database every worker shares "
    "(e.g. postgresql://mindloop@db.internal/mindloop; pip install 'mindloop[postgres]')"
)


def _database_url(what: str) -> str:
    from mindloop.store.location import database_url

    url = database_url()
    if url is None:
        raise MindloopError(NEEDS_URL.format(what=what))
    return url


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

    from mindloop.config import load_config
    from mindloop.dialogs.claims import claim_ttl_from_env
    from mindloop.dialogs.runtime import DialogRuntime
    from mindloop.durable.dbos_steps import DbosSteps
    from mindloop.durable.worker import Worker
    from mindloop.loop.driver import LoopPolicies
    from mindloop.loop.fleet import FleetEngine

    ttl = ttl or claim_ttl_from_env()
    config = load_config(rtws)
    # Loop roots get their phase's turn policy, like in `mindloop run TASK`.
    policies = LoopPolicies(config.team.work_language)
    rt = DialogRuntime(rtws, config=config, steps=DbosSteps(), claim_ttl=ttl, policies=policies)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    w = Worker(rtws, FleetEngine(rt, policies), rt.store, url, concurrency=concurrency, ttl=ttl)

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
        console.print("no workers" if all_ else "no live workers (--all shows stopped ones)")
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
