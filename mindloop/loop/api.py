"""The work loop's use cases over a runtime: run a task's loop, resume every loop, show
where a task stands. `mindloop.service` wraps them for the faces (CLI, web)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence

from pydantic import BaseModel

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler, Ticker
from mindloop.loop.driver import LoopOutcome, LoopPolicies, LoopReport, TaskLoop
from mindloop.loop.roots import LoopRoots
from mindloop.store import QuestionRecord, Store, UsageTotals, WaitRecord
from mindloop.store import loop_state as ls
from mindloop.store.drive_log import last_drive_end
from mindloop.store.retries import RetryRows
from mindloop.workspace import repo
from mindloop.workspace.models import NodeKind
from mindloop.workspace.report import find_report, report_text
from mindloop.workspace.state import is_ready


async def run_task(
    rt: DialogRuntime,
    policies: LoopPolicies,
    task: str,
    *,
    message: str | None = None,
    member: str | None = None,
    max_steps: int | None = None,
) -> LoopReport:
    """Drive the task's loop until DONE, FAILED, a cap, or a wait on the human. With
    `max_steps`, the run's per-drive step limit is recorded for the task's tree: what
    drives it on later (an answer, a decision) keeps it (`loop_state.step_limit`)."""
    loop = TaskLoop(rt, policies, task, member=member)
    if max_steps is not None:
        ls.record_step_limit(rt.store, loop.root, max_steps)
    return await loop.run(message)


def resumable(store: Store) -> list[ls.LoopState]:
    """Loops with work left (not DONE or FAILED)."""
    return [
        s
        for s in ls.all_states(store)
        if s.status not in (ls.LoopStatus.DONE, ls.LoopStatus.FAILED)
    ]


class LocalLoops:
    """The task loops a `mindloop run` without a task runs in its process: every loop with
    work left when it starts, and each loop whose tree gets work while it runs — a message
    or an answer written by another process (the web UI without its driver, `ask`,
    `answer --no-drive`) makes a dialog of the tree drivable, and the scheduler hands it
    here instead of driving it. One run of a task's loop at a time in this process;
    across processes the loop's own claim decides."""

    def __init__(self, rt: DialogRuntime, policies: LoopPolicies) -> None:
        self.rt = rt
        self.policies = policies
        self._running: dict[str, asyncio.Task[LoopReport]] = {}
        self._started: list[asyncio.Task[LoopReport]] = []

    def start(self, task_path: str) -> None:
        """Run the task's loop here unless it runs here already."""
        running = self._running.get(task_path)
        if running is not None and not running.done():
            return
        task = asyncio.get_running_loop().create_task(
            TaskLoop(self.rt, self.policies, task_path).run()
        )
        self._running[task_path] = task
        self._started.append(task)

    def start_resumable(self) -> None:
        for state in resumable(self.rt.store):
            self.start(state.task_path)

    async def finish(self) -> list[LoopReport]:
        """Wait for every loop started here (also those started meanwhile); their reports."""
        while pending := [t for t in self._started if not t.done()]:
            await asyncio.wait(pending)
        return [t.result() for t in self._started]


class OtherDialogs(Scheduler):
    """Every drivable dialog outside the task loops' trees; a drivable dialog of a loop's
    tree starts that loop in `loops` instead (the loop drives its tree)."""

    def __init__(
        self, rt: DialogRuntime, loops: LocalLoops, *, tickers: Sequence[Ticker] = ()
    ) -> None:
        super().__init__(rt, tickers=tickers)
        self._loops = loops
        self._roots = LoopRoots(rt.store)

    def drivable(self, exclude: Collection[str]) -> list[str]:
        out = []
        for did in super().drivable(exclude):
            task = self._roots.task_of_tree(did)
            if task is None:
                out.append(did)
            else:
                self._loops.start(task)
        return out


# ---------------------------------------------------------------------- status


class NodeLine(BaseModel):
    id: str
    parent_id: str | None
    depth: int
    kind: str
    type: str
    status: str
    title: str
    assignee: str
    deps: list[str]
    attempt: int
    adjust_count: int
    ready: bool
    check_report: str = ""  # `worklog:<id>` and the report in one line (CHECK's verdict)


class RetryLine(BaseModel):
    """One retry record (agent-loop §8.3) as `status` shows it."""

    node: str
    level: str  # L2: a DO self-repair attempt; L3: an ADJUST cycle
    attempt: int
    entry: int  # L2: the DO entry it belongs to
    failure_class: str
    change_kind: str
    change_summary: str
    reflection: str
    at: float


class TaskStatus(BaseModel):
    """Where a task's loop stands (`mindloop status TASK`)."""

    task: str
    bound: bool  # the task has a loop root
    root_id: str | None = None
    status: str | None = None
    reason: str = ""
    # The loop root stopped short of its work (`error`, or `stopped` at the step limit)
    # and why: `run TASK` goes on once the cause is fixed. None: it did not.
    root_status: str | None = None
    root_error: str = ""
    phase: str | None = None
    entry: int = 0
    in_phase: bool = False
    node: str | None = None
    last_end: ls.PhaseEnd | None = None
    last_summary: ls.Summary | None = None
    nodes: list[NodeLine] = []
    done: int = 0  # execution nodes terminal
    total: int = 0  # execution nodes
    questions: list[QuestionRecord] = []
    waits: list[WaitRecord] = []
    refusals: int = 0
    hints_dropped: int = 0
    plan_reentries: int = 0
    retries: int = 0  # retry records: DO self-repair attempts and ADJUST cycles
    retry_records: list[RetryLine] = []  # oldest first
    usage: UsageTotals = UsageTotals()


def task_status(store: Store, task: str) -> TaskStatus:
    """`task` as stored (rtws-relative)."""
    state = ls.get(store, task)
    ws = repo.load(store, task)
    lines = []
    # the rows the nodes' check reports name (read only when some node has one)
    log = repo.log(store, task) if any(n.check_report_ref for n in ws.nodes.values()) else []
    if ws.exists:
        for n, depth in ws.walk():
            report = find_report(n, log)
            lines.append(
                NodeLine(
                    id=n.id,
                    parent_id=n.parent_id,
                    depth=depth,
                    kind=n.kind.value,
                    type=n.type.value,
                    status=n.status.value,
                    title=n.title,
                    assignee=n.assignee,
                    deps=list(n.deps),
                    attempt=n.attempt,
                    adjust_count=n.adjust_count,
                    ready=is_ready(ws, n),
                    check_report=f"{n.check_report_ref} {report_text(report)}" if report else "",
                )
            )
    execution = [n for n in ws.nodes.values() if n.kind is NodeKind.EXECUTION]
    records = [
        RetryLine(
            node=r.todo_id,
            level=r.level,
            attempt=r.attempt,
            entry=r.entry,
            failure_class=r.failure_class,
            change_kind=r.change_kind,
            change_summary=r.change_summary,
            reflection=r.reflection,
            at=r.created_at,
        )
        for r in RetryRows(store).of_task(task)
    ]
    out = TaskStatus(
        task=task,
        bound=state is not None,
        nodes=lines,
        done=sum(1 for n in execution if n.terminal),
        total=len(execution),
        retries=len(records),
        retry_records=records,
        usage=store.usage(task_path=task),
    )
    if state is None:
        return out
    tree = store.list_dialogs(root_id=state.root_id)
    root = next((d for d in tree if d.id == state.root_id), None)
    stopped = root is not None and root.status.retriable
    ended = last_drive_end(store, state.root_id) if stopped else None
    return out.model_copy(
        update={
            "root_id": state.root_id,
            "root_status": root.status.value if root is not None and stopped else None,
            "root_error": (ended or {}).get("error") or "",
            "status": state.status.value,
            "reason": state.status_reason,
            "phase": state.phase.value if state.phase else None,
            "entry": state.entry,
            "in_phase": state.in_phase,
            "node": state.node_id,
            "last_end": state.ended,
            "last_summary": state.last_summary,
            "questions": store.open_questions(root_ids=[state.root_id]),
            "waits": [w for d in tree for w in store.open_waits(d.id)],
            "refusals": state.refusals,
            "hints_dropped": state.hints_dropped,
            "plan_reentries": state.plan_reentries,
        }
    )


__all__ = [
    "LocalLoops",
    "LoopOutcome",
    "LoopPolicies",
    "LoopReport",
    "OtherDialogs",
    "RetryLine",
    "TaskStatus",
    "run_task",
    "task_status",
]
