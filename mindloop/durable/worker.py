"""`mindloop worker`: one process of a scaled-out rtws, on DBOS Transact and PostgreSQL.

Every worker of an rtws shares its PostgreSQL database (`MINDLOOP_DATABASE_URL`): the
store's tables (the source of truth for dialogs, messages, questions, waits, Taskdoc
history) and DBOS's system tables (schema `dbos`) side by side. What a worker does:

- **Drives as queued workflows.** A dialog marked to drive (a new task, a tellask's side
  dialog, a reply that revives its caller, an answered question) is enqueued as the DBOS
  workflow `mindloop.drive(dialog_id)` on the queue `mindloop-drives`, by whichever worker
  sees it first — the one whose drive made it drivable sees it at once (its engine's wake),
  the others within a poll. The dialog id is the deduplication id: while a drive of a
  dialog is queued or running, enqueueing it again returns that one. DBOS hands the
  queue's workflows to the workers, at most `--concurrency` at a time on each. A tellask's
  fan-out is so many queued workflows, driven on whichever workers have room.
- **A task's loop as a queued workflow.** `mindloop run TASK` (and a worker, when a
  loop root becomes drivable) enqueues `mindloop.loop(task)` on the queue
  `mindloop-loops`, deduplicated by the task's loop root: the loop driver's run of that
  task (`loop/fleet.py`), which drives the root through its phases and routes, while the
  tree's other dialogs are drives on `mindloop-drives`. Loops have a queue of their own,
  so a loop that waits for its tree's work never holds a slot its drives need.
- **Steps.** Inside the workflow the drive's model calls and tool calls are DBOS steps
  recorded as JSON (`dbos_steps.py`); workflow inputs and outputs are DBOS's portable JSON.
  Nothing is pickled.
- **Waits on the human** stay the store's: a dialog that asks a question ends its drive
  (and its workflow) and is parked; `mindloop answer` — from any machine — records the
  answer and marks the dialog in one transaction, and a worker enqueues its next drive. A
  workflow blocked in DBOS `recv` would hold a slot of the queue for as long as a human
  takes, and would be a second record of the question that could disagree with the one
  every face (CLI, web UI, API) reads and answers.
- **Heartbeat and takeover.** A worker registers (executor id, host, pid, rtws,
  fingerprint) in the store's `workers` table and beats every quarter of its time to live.
  A worker silent for its time to live (or stopped) is taken over by exactly one live
  worker (`store/workers.py`): its claims end, and DBOS's recovery interface returns its
  pending workflows to their queue (self-hosted DBOS recovers only its own executor's
  workflows unless asked), where any worker dequeues them once. A recovered drive resumes
  from the store, and finds the model calls that completed before the crash among its
  workflow's recorded steps. One driver per dialog still holds through the claims: a
  worker that was only slow, not dead, cannot commit after its claim was taken.
- **One rtws.** Files are not in the database: all workers must run on one shared path.
  A worker whose rtws differs from a live worker's (`fingerprint.py`) is refused.

The engine reaches this module through `Engine` (built over a `DialogRuntime` by the CLI),
so this layer does not import the dialog engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from mindloop.durable.dbos_steps import execution
from mindloop.durable.fingerprint import fingerprint, leave_probe, remove_probe, sees_probe
from mindloop.durable.steps import JsonObject
from mindloop.errors import MindloopError
from mindloop.store import Store
from mindloop.store.workers import WorkerRecord, WorkerTable

log = logging.getLogger(__name__)

APP_NAME = "mindloop"
QUEUE = "mindloop-drives"
DRIVE_WORKFLOW = "mindloop.drive"
LOOP_QUEUE = "mindloop-loops"
LOOP_WORKFLOW = "mindloop.loop"
DEFAULT_POLL = 0.5  # seconds between looks for work other processes made drivable

T = TypeVar("T")


class WorkerError(MindloopError):
    """A worker cannot start or go on (another rtws, no database, taken over)."""


class Due(BaseModel):
    """What a worker found to do: dialogs to drive, and task loops to run (loop root ->
    task package); `trees` names the loop root of each drive that is in a task's tree
    (its drive takes the step limit of that task's running loop)."""

    drives: list[str] = []
    loops: dict[str, str] = {}
    trees: dict[str, str] = {}


class Engine(Protocol):
    """What a worker needs of the dialog engine (one `DialogRuntime`)."""

    @property
    def claim_owner(self) -> str: ...

    @property
    def wake(self) -> asyncio.Event: ...

    async def drive(self, dialog_id: str, max_steps: int | None = None) -> JsonObject:
        """Drive the dialog once (inside its workflow), at most `max_steps` steps (None:
        the engine's default); how the drive ended, as JSON."""
        ...

    async def run_loop(self, task_path: str, max_steps: int | None = None) -> JsonObject:
        """Run the task's work loop (inside its workflow) until it ends as a local run
        would, `max_steps` the per-drive step limit of the run (None: the default); how
        it ended, as JSON (`outcome`, `reason` …)."""
        ...

    def due(self) -> Due:
        """Dialogs to drive and loops to run now (the store's drive rule)."""
        ...

    def step_limit(self, root_id: str) -> int | None:
        """The per-drive step limit the last `run TASK --max-steps N` of the task whose
        loop root is `root_id` gave (None: none, the default)."""
        ...

    def recover(self) -> list[str]:
        """Mark to drive the dialogs whose claims expired."""
        ...

    def tick(self) -> None:
        """Fire the timer waits that are due."""
        ...


def app_version() -> str:
    """The DBOS application version: workers recover only workflows of their version."""
    try:
        return f"{APP_NAME}-{version('mindloop')}"
    except PackageNotFoundError:
        return f"{APP_NAME}-dev"


def new_executor_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class _JsonSerializer:
    """DBOS's serializer for anything not already portable JSON: JSON, never a pickle
    (an exception is kept as its type and text)."""

    def serialize(self, data: Any) -> str:
        return json.dumps(data, default=lambda o: {"type": type(o).__name__, "text": str(o)})

    def deserialize(self, serialized_data: str) -> Any:
        return json.loads(serialized_data)

    def name(self) -> str:
        return "mindloop_json"


def _serializer() -> Any:
    from dbos import Serializer

    class JsonSerializer(_JsonSerializer, Serializer):
        pass

    return JsonSerializer()


def dbos_config(database_url: str, executor_id: str) -> Any:
    from dbos import DBOSConfig

    from mindloop.store.postgres import engine_url

    url = engine_url(database_url).set(drivername="postgresql")
    config: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": url.render_as_string(hide_password=False),
        "executor_id": executor_id,
        "application_version": app_version(),
        "serializer": _serializer(),
        "log_level": os.environ.get("MINDLOOP_DBOS_LOG_LEVEL", "WARNING"),
        "notification_listener_polling_interval_sec": 0.1,
    }
    return config


async def _queued_inputs(queue: str, workflow: str, *, load_input: bool) -> dict[str, Any]:
    """The workflows of `workflow` queued or running on `queue` now: dialog -> the input
    it was enqueued with (when `load_input`; else None). One query."""
    from dbos import DBOS

    def read() -> list[Any]:
        return list(
            DBOS.list_queued_workflows(
                queue_name=queue, name=workflow, load_input=load_input, load_output=False
            )
        )

    return {_dialog_of(w.workflow_id): w.input for w in await _outside_workflow(read)}


def _dialog_of(workflow_id: str) -> str:
    """The dialog a workflow's id names (`drive-<dialog id>-<nonce>`, `loop-<root id>-
    <nonce>`)."""
    return workflow_id.partition("-")[2].rpartition("-")[0]


def input_max_steps(inputs: Any) -> int | None:
    """The per-drive step limit a `mindloop.drive` or `mindloop.loop` workflow was
    enqueued with (its second argument), None when it has none (an input queued before
    workflows carried it runs with the default)."""
    if not isinstance(inputs, dict):
        return None
    args: Any = inputs.get("args") or []
    kwargs: Any = inputs.get("kwargs") or {}
    found = args[1] if len(args) > 1 else kwargs.get("max_steps")
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def _options(queue: str, workflow: str, prefix: str, dialog_id: str) -> Any:
    from dbos import EnqueueOptions, WorkflowSerializationFormat

    options: EnqueueOptions = {
        "queue_name": queue,
        "workflow_name": workflow,
        "workflow_id": f"{prefix}-{dialog_id}-{uuid.uuid4().hex[:8]}",
        "deduplication_id": dialog_id,
        "duplication_policy": "return-existing",
        "app_version": app_version(),
        "serialization_type": WorkflowSerializationFormat.PORTABLE,
    }
    return options


def enqueue_options(dialog_id: str) -> Any:
    """How a drive is enqueued (by a worker): one queued or running drive per dialog."""
    return _options(QUEUE, DRIVE_WORKFLOW, "drive", dialog_id)


def loop_enqueue_options(root_id: str) -> Any:
    """How a task's loop is enqueued (by `mindloop run TASK` through a client, or by a
    worker): one queued or running loop per task, named by its loop root."""
    return _options(LOOP_QUEUE, LOOP_WORKFLOW, "loop", root_id)


# The worker of this process (DBOS is one instance per process): the drive workflow runs
# its engine.
_current: Worker | None = None
_registered = False


def _register_workflow() -> None:
    global _registered
    if _registered:
        return
    from dbos import DBOS, WorkflowSerializationFormat

    portable = WorkflowSerializationFormat.PORTABLE

    @DBOS.workflow(name=DRIVE_WORKFLOW, serialization_type=portable)
    # The step limit is an optional second argument: inputs queued before it existed
    # (one argument) still run, with the engine's default.
    async def drive_workflow(dialog_id: str, max_steps: int | None = None) -> JsonObject:
        return await _in_worker(
            f"drive {dialog_id}", lambda w: w.engine.drive(dialog_id, max_steps)
        )

    @DBOS.workflow(name=LOOP_WORKFLOW, serialization_type=portable)
    async def loop_workflow(task_path: str, max_steps: int | None = None) -> JsonObject:
        return await _in_worker(
            f"run {task_path}", lambda w: w.engine.run_loop(task_path, max_steps)
        )

    _registered = True


async def _in_worker(what: str, work: Callable[[Worker], Awaitable[JsonObject]]) -> JsonObject:
    """One execution of a workflow on this process's worker: its effects as DBOS steps
    found again by key (`execution()`), the task known to the worker (a stop cancels it)."""
    worker = _current
    if worker is None:
        raise WorkerError(f"no worker in this process to {what}")
    task = asyncio.current_task()
    if task is not None:
        worker.drives.add(task)
    try:
        async with execution():
            return await work(worker)
    finally:
        worker.drives.discard(task)  # type: ignore[arg-type]


async def _outside_workflow(fn: Callable[[], T]) -> T:
    """Run a blocking DBOS call in a thread, in a context of no workflow."""
    clean = contextvars.Context()
    return await asyncio.get_running_loop().run_in_executor(None, lambda: clean.run(fn))


class Worker:
    """One worker process: registration, the dispatch loop, heartbeats, takeovers."""

    def __init__(
        self,
        rtws: Path,
        engine: Engine,
        store: Store,
        database_url: str,
        *,
        concurrency: int,
        ttl: float,
        poll: float = DEFAULT_POLL,
        executor_id: str | None = None,
    ) -> None:
        self.rtws = rtws
        self.engine = engine
        self.store = store
        self.table = WorkerTable(store)
        self.database_url = database_url
        self.concurrency = concurrency
        self.ttl = ttl
        self.poll = poll
        self.executor_id = executor_id or new_executor_id()
        self.fingerprint = fingerprint(rtws)
        self.enqueued = 0  # drives and loops this worker enqueued
        self.taken_over: list[str] = []  # executors whose work this worker recovered
        self.drives: set[asyncio.Task[Any]] = set()  # drive workflows running here

    # ------------------------------------------------------------------ the fleet

    def check_fleet(self, now: float | None = None) -> None:
        """Refuse to join workers that run on another rtws (nothing written yet)."""
        now = time.time() if now is None else now
        for w in self.table.all():
            if not w.alive(now):
                continue
            if w.fingerprint != self.fingerprint:
                raise WorkerError(
                    f"worker {w.executor_id} ({w.host}, pid {w.pid}) runs on an rtws whose "
                    f"configuration differs (fingerprint {w.fingerprint} at {w.rtws}; here "
                    f"{self.fingerprint} at {self.rtws}): every worker of one database must "
                    "run on the same rtws, on a path they all share"
                )
            if not sees_probe(self.rtws, w.executor_id):
                raise WorkerError(
                    f"worker {w.executor_id} ({w.host}, pid {w.pid}) runs on {w.rtws}, and "
                    f"its probe file is not in {self.rtws}/.mindloop/workers/: this is not "
                    "the same rtws (a copy?); every worker of one database must run on one "
                    "shared path"
                )

    def _register(self) -> None:
        now = time.time()
        leave_probe(self.rtws, self.executor_id)
        self.table.register(
            WorkerRecord(
                executor_id=self.executor_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                rtws=str(self.rtws),
                fingerprint=self.fingerprint,
                concurrency=self.concurrency,
                claim_owner=self.engine.claim_owner,
                ttl=self.ttl,
                started_at=now,
                heartbeat_at=now,
            )
        )

    # ------------------------------------------------------------------ running

    async def launch(self) -> None:
        """Start DBOS in this process (from inside the running loop, so that queued
        workflows run on it) and declare the queue."""
        global _current
        from dbos import DBOS

        _current = self
        _register_workflow()
        DBOS(config=dbos_config(self.database_url, self.executor_id))
        DBOS.launch()
        for queue in (QUEUE, LOOP_QUEUE):
            await DBOS.register_queue_async(
                queue,
                worker_concurrency=self.concurrency,
                polling_interval_sec=min(1.0, self.poll),
                on_conflict="always_update",
            )

    async def run(self, stop: asyncio.Event, on_ready: Callable[[], None] | None = None) -> str:
        """Work until `stop` is set or this worker was taken over; why it stopped."""
        self.check_fleet()
        why = "stopped"
        try:
            await self.launch()
            # Registered once DBOS is up: its first heartbeat is the registration (DBOS's
            # start may take longer than a time to live on a loaded machine).
            self._register()
            if on_ready is not None:
                on_ready()
            why = await self._loop(stop)
        finally:
            await self._shutdown(taken_over=why != "stopped")
        return why

    async def _loop(self, stop: asyncio.Event) -> str:
        lost = asyncio.Event()
        beating = asyncio.create_task(self._beat(stop, lost), name="worker-heartbeat")
        try:
            return await self._dispatch(stop, lost)
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating

    async def _beat(self, stop: asyncio.Event, lost: asyncio.Event) -> None:
        """The heartbeat, every quarter of the time to live, on a cadence of its own: a
        long pass of the dispatch loop (many drives to enqueue on a loaded machine) must
        not make a live worker look silent. Sets `lost` when another worker took this
        one over."""
        while not stop.is_set():
            if not self.table.beat(self.executor_id):
                lost.set()
                self.engine.wake.set()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.ttl / 4)

    async def _dispatch(self, stop: asyncio.Event, lost: asyncio.Event) -> str:
        wake = self.engine.wake
        next_look = 0.0
        while not stop.is_set():
            wake.clear()
            if lost.is_set():
                return "taken over by another worker (this one was silent too long)"
            if time.monotonic() >= next_look:  # workers gone silent, dialogs left running
                await self._take_over_gone()
                self.engine.recover()
                next_look = time.monotonic() + self.ttl / 4
            self.engine.tick()
            due = self.engine.due()
            # loop root -> the step limit of its loop queued or running now
            loops = await self._loops() if due.loops or due.trees else {}
            if due.drives:
                queued = await self._queued(QUEUE, DRIVE_WORKFLOW)
                for did in due.drives:
                    if did not in queued:
                        # a drive of a task's tree takes its running loop's step limit
                        # (`run TASK --max-steps N`), as a local run's drives do
                        root = due.trees.get(did)
                        await self.enqueue(did, self._step_limit(root, loops) if root else None)
            if due.loops:
                # A loop queued or running now sees what made it due: it looks at the
                # store until it stops, and stops only where nothing but the human (or
                # nothing at all) can move the task.
                for root, task in due.loops.items():
                    if root not in loops:
                        await self.enqueue_loop(root, task, self.engine.step_limit(root))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_first(wake, stop), self.poll)
        return "stopped"

    def _step_limit(self, root: str, loops: dict[str, int | None]) -> int | None:
        """The step limit of a drive of `root`'s tree: its running loop's, else the one
        the task's last `run TASK` recorded (its loop's workflow ended meanwhile: the
        drive follows an answer or a decision), else None (the default)."""
        running = loops.get(root)
        return running if running is not None else self.engine.step_limit(root)

    async def _queued(self, queue: str, workflow: str) -> set[str]:
        """Dialogs whose drive (or loop) is queued or running now (one query, so that a
        long queue is not enqueued again, deduplicated one by one, at every look)."""
        return set(await _queued_inputs(queue, workflow, load_input=False))

    async def _loops(self) -> dict[str, int | None]:
        """The loops queued or running now: loop root -> the step limit each was
        enqueued with (one query, inputs included)."""
        found = await _queued_inputs(LOOP_QUEUE, LOOP_WORKFLOW, load_input=True)
        return {root: input_max_steps(given) for root, given in found.items()}

    async def enqueue(self, dialog_id: str, max_steps: int | None = None) -> None:
        from dbos import DBOS

        options = enqueue_options(dialog_id)
        await _outside_workflow(
            lambda: DBOS.enqueue_workflow_with_options(options, dialog_id, max_steps)
        )
        self.enqueued += 1

    async def enqueue_loop(
        self, root_id: str, task_path: str, max_steps: int | None = None
    ) -> None:
        from dbos import DBOS

        options = loop_enqueue_options(root_id)
        await _outside_workflow(
            lambda: DBOS.enqueue_workflow_with_options(options, task_path, max_steps)
        )
        self.enqueued += 1

    async def _take_over_gone(self) -> None:
        """Recover the work of workers that went silent, each by exactly one worker."""
        from dbos import DBOS

        for gone in self.table.gone():
            if gone.executor_id == self.executor_id:
                continue
            if not self.table.take_over(gone, self.executor_id):
                continue  # another worker took it over first
            eid = gone.executor_id

            def recover(eid: str = eid) -> list[Any]:
                return list(DBOS._recover_pending_workflows([eid]))

            handles = await _outside_workflow(recover)
            self.taken_over.append(eid)
            log.warning(
                "worker %s took over silent worker %s: %d workflow(s) back on the queue",
                self.executor_id,
                eid,
                len(handles),
            )
            remove_probe(self.rtws, eid)
            self.engine.wake.set()

    async def _shutdown(self, *, taken_over: bool) -> None:
        """Settle the drives running here (each is marked to drive again, its claim
        released: another worker takes it up at once), then leave."""
        global _current
        from dbos import DBOS

        for task in list(self.drives):
            task.cancel()
        if self.drives:
            await asyncio.wait(list(self.drives), timeout=30)

        with contextlib.suppress(Exception):
            if not taken_over:
                self.table.stop(self.executor_id)  # the others take its work over at once
            remove_probe(self.rtws, self.executor_id)
        with contextlib.suppress(Exception):
            await _outside_workflow(lambda: DBOS.destroy(destroy_registry=False))
        _current = None


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
