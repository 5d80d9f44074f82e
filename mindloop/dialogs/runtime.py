"""The dialog engine's façade: what users of the engine call.

`DialogRuntime` wires one rtws's parts — config, store, providers, tools, the dialog
tree, the event bus — and offers the dialog API: create a root dialog, post to it,
answer a question, drive a dialog. The work is done by modules with one job each:

- `live.py`: the in-memory views of dialogs being driven (evicted when a drive settles);
- `drive.py`: the step loop of one drive;
- `policy.py`: the turn policy a drive consults at each step (`fbr.FbrPolicy` for FBR);
- `request.py`: the parts requests are built from;
- `turn.py`: deciding a generation's turn (pure) and committing it (one transaction);
- `tool_step.py`: running a step's tool calls and recording their results;
- `course.py`: `clear_mind`'s new course;
- `tree.py`: the dialog tree's state changes (tellasks, replies, questions, recovery).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mindloop.config import Config, ConfigError, load_config, tool_selection_problems
from mindloop.dialogs.approvals import Approvals, ApprovalView
from mindloop.dialogs.claims import Claims, claim_ttl_from_env
from mindloop.dialogs.context import ContextBuilder
from mindloop.dialogs.drive import Driver, Segue
from mindloop.dialogs.fbr import FbrPolicy
from mindloop.dialogs.live import LiveCache, LiveDialog
from mindloop.dialogs.node_sink import node_sink
from mindloop.dialogs.outcomes import DriveEnd, DriveResult
from mindloop.dialogs.policy import DefaultPolicy, PolicyResolver, TurnPolicy
from mindloop.dialogs.request import RequestBuilder
from mindloop.dialogs.staleness import WorkspaceRef
from mindloop.dialogs.tool_step import ToolStep
from mindloop.dialogs.tree import DialogTree, Sink
from mindloop.dialogs.wait_kinds import (
    ApprovalDecision,
    Decision,
    Resolution,
    WaitEvent,
    WaitKind,
    WaitMode,
    WaitPayload,
)
from mindloop.dialogs.waits import Ingested, Waits
from mindloop.durable.steps import Steps
from mindloop.errors import MindloopError, NotFoundError
from mindloop.events.bus import EventBus
from mindloop.events.types import DialogCreated, TaskdocChanged
from mindloop.i18n import Lang
from mindloop.providers.base import Provider
from mindloop.providers.pool import ProviderPool
from mindloop.store import (
    DialogRecord,
    DialogStatus,
    MessageRecord,
    QuestionRecord,
    Store,
    WaitRecord,
    WaitStatus,
    loop_state,
    new_id,
)
from mindloop.tools.base import Acl, ToolContext
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import (
    StoreReminders,
    StoreTaskdocAudit,
    config_registry,
    llm_secret_env_names,
)
from mindloop.toolsets.workspace import NODE_SINK, StoreWorkspaceAccess
from mindloop.workspace.api import refresh_all as refresh_projections
from mindloop.workspace.rules import RulesText

__all__ = ["DEFAULT_MAX_STEPS", "DialogRuntime", "DriveEnd", "DriveResult"]

DEFAULT_MAX_STEPS = 50

_DEFAULT_POLICY = DefaultPolicy()
_FBR_POLICY = FbrPolicy()
_heap_settled = False


def _settle_heap() -> None:
    """Once per process, when its first runtime is built: what is alive by then (the
    modules, their classes and schemas, the config, compiled statements — ~90k objects)
    stays alive as long as the process, so it moves to the collector's permanent
    generation (`gc.freeze`). A full collection, which comes every few hundred steps of
    a drive, then walks what the drives made instead of all of that again (measured in
    bench scenario 7: 30–60 ms per full collection before, under 10 after). Only the
    cycle collector is affected: objects freed by their reference counts are freed as
    before."""
    global _heap_settled
    if not _heap_settled:
        _heap_settled = True
        gc.freeze()


class DialogRuntime:
    """One rtws's runtime: config, store, providers, tools, the dialog tree, the bus."""

    def __init__(
        self,
        rtws: Path | str,
        *,
        config: Config | None = None,
        store: Store | None = None,
        bus: EventBus | None = None,
        tools: ToolRegistry | None = None,
        policies: PolicyResolver | None = None,
        claim_ttl: float | None = None,
        sinks: Mapping[str, Sink] | None = None,
        providers: Mapping[str, Provider] | None = None,
        durable: bool = True,
        max_steps: int = DEFAULT_MAX_STEPS,
        lang: Lang | None = None,
        workspace_ref: WorkspaceRef | None = None,
        steps: Steps | None = None,
    ) -> None:
        self.rtws = Path(rtws).resolve()
        self.config = config or load_config(self.rtws)
        self.lang: Lang = lang or self.config.team.work_language
        self.tools = tools or config_registry(self.config, lang=self.lang)
        # Before the store is opened (nothing written yet): a toolset or tool team.yaml
        # names that this registry lacks is a file:line error now, not a surprise mid-drive
        # for the member it hits. Every entry point (CLI or Python API) gets this check.
        problems = tool_selection_problems(
            self.rtws, self.tools.toolset_names, self.tools.tool_names
        )
        if problems:
            raise ConfigError(problems)
        # Also before the store: an injected provider with no llm.yaml entry is refused
        # with nothing written.
        self.providers = ProviderPool(self.config.llm, self.rtws, providers)
        self.store = store or Store.for_rtws(self.rtws, durable=durable)
        self.bus = bus or EventBus()
        # Waits snapshot the task when they open (staleness on resume): `workspace_ref`
        # gives a task's workspace ref (the workspace package's; none: not compared).
        self.waits = Waits(
            self.store,
            self.bus,
            self.config.team.loop.waits,
            rtws=self.rtws,
            workspace_ref=workspace_ref,
        )
        # Built-in sinks first: the workspace's dispatched nodes (`node_dispatch`).
        self.tree = DialogTree(
            self.store,
            self.bus,
            self.lang,
            {NODE_SINK: node_sink(self.rtws), **(sinks or {})},
            waits=self.waits,
        )
        self.approvals = Approvals(
            self.store, self.bus, self.waits, tools=self.tools, rtws=self.rtws
        )
        self.max_steps = max_steps
        nodes = self.config.team.loop.nodes
        self._workspace = StoreWorkspaceAccess(
            self.store,
            frozenset(self.config.team.members),
            (nodes.step_budget, nodes.max_step_budget),
        )
        self.context = ContextBuilder(
            self.rtws, self.config, self.lang, rules=RulesText(self.store, self.rtws, self.lang)
        )
        self.parts = RequestBuilder(self.config, self.tools, self.context, self.lang)
        self._policies = policies
        self._secret_env_names = llm_secret_env_names(self.config.llm)
        self._transient_backoff = tuple(self.config.team.loop.retries.transient_backoff)
        self.live = LiveCache(self.store, self.config, self.policy_for)
        self.wake = asyncio.Event()  # set whenever a dialog may have become drivable
        self.claims = Claims(self.store, claim_ttl or claim_ttl_from_env())
        self._driver = Driver(
            self.store,
            self.tree,
            self.bus,
            self.providers,
            self.parts,
            ToolStep(
                self.store,
                self.bus,
                self.parts,
                self.claims,
                self.tree,
                self._tool_context,
                steps,
            ),
            self.claims,
            self.wake,
            steps,
        )
        _settle_heap()

    async def aclose(self) -> None:
        await self.providers.aclose()
        self.store.close()

    async def __aenter__(self) -> DialogRuntime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def policy_for(self, record: DialogRecord) -> TurnPolicy:
        """The turn policy of a dialog: the resolver's choice, else FBR's for FBR side
        dialogs and the default for the others."""
        if self._policies is not None:
            chosen = self._policies(record)
            if chosen is not None:
                return chosen
        return _FBR_POLICY if record.kind == "fbr" else _DEFAULT_POLICY

    # ------------------------------------------------------------------ dialogs

    def create_root_dialog(
        self, task_path: str | Path, member: str | None = None, title: str | None = None
    ) -> DialogRecord:
        """Open a root dialog bound for life to one `*.tsk` package."""
        pkg = self.context.package(str(task_path))
        if not pkg.exists():
            raise MindloopError(
                f"task package {pkg.rel_path} does not exist "
                f"(create it with `mindloop task new <slug>`)"
            )
        member_id = member or self.config.team.default_responder
        self.config.member(member_id)  # raises a clear error for an unknown member
        did = new_id("d")
        rec = DialogRecord(
            id=did, root_id=did, member=member_id, task_path=pkg.rel_path, kind="root", title=title
        )
        rec = self.store.create_dialog(rec)
        self.bus.publish(
            DialogCreated(dialog_id=did, member=member_id, task=pkg.rel_path, kind="root")
        )
        return rec

    def start_root_dialog(
        self,
        task_path: str | Path,
        text: str,
        member: str | None = None,
        title: str | None = None,
        *,
        reserve: bool = False,
    ) -> tuple[DialogRecord, MessageRecord]:
        """Open a root dialog and post its first message in one transaction: a crash
        leaves both or neither (never a root without its message). `reserve`: as for
        `post_user_message`."""
        if not text.strip():
            raise MindloopError("the message is empty")
        with self.store.tx():
            rec = self.create_root_dialog(task_path, member, title)
            message = self.post_user_message(rec.id, text, reserve=reserve)
        return rec, message

    def post_user_message(
        self, dialog_id: str, text: str, *, reserve: bool = False
    ) -> MessageRecord:
        """Append a user message and mark the dialog to be driven (one transaction). While
        a drive holds the dialog (here or in another process) the message waits in its
        inbox for the drive's next step boundary (`DialogTree.queue_post`; returned with
        id 0 until then). `reserve`: this process drives the dialog next; its claim is
        taken in the same transaction (`Claims.reserve`), so no other process does."""
        if not text.strip():
            raise MindloopError("the message is empty")
        live = self.live.get(dialog_id)
        with self.store.tx():  # the write lock: no drive starts or settles meanwhile
            rec = self.store.get_dialog(dialog_id)
            if rec.status is DialogStatus.RUNNING:
                stored = self.tree.queue_post(rec, text)
            else:
                stored = self.store.append_message(
                    dialog_id, "user", {"text": text}, course=rec.course
                )
            self.store.update_dialog(dialog_id, needs_drive=True)
            if rec.kind == "root":  # the human spoke: a task's drive count starts again
                loop_state.human_spoke(self.store, dialog_id)
            if reserve and rec.status is not DialogStatus.RUNNING:
                self.claims.reserve(dialog_id)
        if live is not None and stored.id:
            live.history.add(stored)
        self.wake.set()
        return stored

    def take_queued(self, dialog_id: str) -> bool:
        """What waits in the inbox of a dialog no drive holds now (a post or a reply that
        came in as its last drive ended: `queue_post`) comes into its history, as the next
        drive would take it; True when anything did. For a caller that must judge the
        history without driving it (the work loop, before it ends a task)."""
        if not self.store.undelivered_responses(dialog_id):
            return False
        with self.store.tx(durable=False):
            rec = self.store.get_dialog(dialog_id)
            if rec.status is DialogStatus.RUNNING:  # a drive holds it: it takes them
                return False
            taken = self.tree.take_responses(rec)
        self.live.evict(dialog_id)
        return bool(taken)

    def answer_question(self, question_id: str, answer: str) -> str:
        """Record the human's answer; the asking dialog becomes drivable. Returns its id."""
        if not answer.strip():
            raise MindloopError("the answer is empty")
        with self.store.tx():
            try:
                q = self.tree.answer_question(question_id, answer)
            except NotFoundError:
                self.not_an_approval(question_id)
                raise
            loop_state.human_spoke(self.store, q.root_id)  # its task's drive count restarts
        self.live.evict(q.dialog_id)
        self.wake.set()
        return q.dialog_id

    def ask_human(
        self,
        dialog_id: str,
        headline: str,
        body: str = "",
        *,
        options: Sequence[str] = (),
        default_assumption: str | None = None,
    ) -> QuestionRecord:
        """Put a question to the human for a dialog (as `!?@human` does), with the options
        and the default assumption agent-loop's WAIT_USER_INPUT carries: unanswered after
        `loop.waits.user_input.timeout`, the default is assumed and the user told."""
        if not headline.strip():
            raise MindloopError("the question is empty")
        with self.store.tx():
            rec = self.store.get_dialog(dialog_id)
            q = self.tree.ask(
                rec,
                headline.strip(),
                body.strip(),
                options=options,
                default_assumption=default_assumption,
            )
        self.wake.set()
        return q

    def not_an_approval(self, wait_id: str) -> None:
        """Raise, naming the commands that decide it, if `wait_id` (given as a question
        id) is an approval: an approval is never answered by free text."""
        try:
            rec = self.store.get_wait(wait_id)
        except NotFoundError:
            return
        if rec.kind == WaitKind.APPROVAL:
            raise MindloopError(
                f"{wait_id} is an approval, not a question: it is decided only with "
                f"`mindloop approve {wait_id}` or `mindloop reject {wait_id} --reason …`"
            )

    def retry_stopped(self, root_id: str | None = None) -> list[str]:
        """Mark to drive again the dialogs (of one tree, or all) that stopped short of an
        answer, once their cause is fixed: roots that stopped on an error, and any dialog
        stopped at the step limit (its callers still wait on it). A side dialog that
        failed on an error is not retried: its failure was already delivered to its
        caller, exactly once. Returns the ids marked."""
        chosen = [
            d.id
            for d in self.store.list_dialogs(root_id=root_id)
            if d.status == DialogStatus.STOPPED
            or (d.status == DialogStatus.ERROR and d.kind == "root")
        ]
        with self.store.tx():
            for did in chosen:
                self.store.update_dialog(did, needs_drive=True)
        if chosen:
            self.wake.set()
        return chosen

    # ------------------------------------------------------------------ waits

    def open_wait(
        self,
        dialog_id: str,
        kind: WaitKind,
        key: str | None = None,
        payload: WaitPayload | dict[str, Any] | None = None,
        *,
        due_at: float | None = None,
        node: str | None = None,
        mode: WaitMode = WaitMode.ALL,
    ) -> WaitRecord:
        """Make a dialog wait on something (`wait_kinds.WaitKind`; `payload` that kind's
        model): a dialog-level wait of a blocking kind parks it while open; a node's wait
        does not. Tools do this through their store effects, in the step's transaction.
        Returns the record (already resolved if an event kept earlier matched it)."""
        task_path = self.store.get_dialog(dialog_id).task_path
        with self.store.tx():
            rec = self.waits.open(
                dialog_id,
                kind,
                key,
                payload,
                due_at=due_at,
                node=node,
                mode=mode,
                task_path=task_path,
            )
        self.wake.set()
        return rec

    def resolve_wait(
        self,
        wait_id: str,
        resolution: Resolution | dict[str, Any] | None = None,
        *,
        status: WaitStatus = WaitStatus.RESOLVED,
    ) -> WaitRecord | None:
        """Resolve an open wait (once: None if it was not open); its dialog gets a note
        and is driven on. Prefer `deliver` with the kind's typed event."""
        if status is WaitStatus.RESOLVED and self.store.get_wait(wait_id).kind == WaitKind.APPROVAL:
            raise MindloopError("an approval is decided with approve / reject, not resolved")
        rec = self.waits.resolve(wait_id, resolution, status=status)
        if rec is not None:
            self.wake.set()
        return rec

    def deliver(self, event: WaitEvent, *, dialog_id: str | None = None) -> Ingested:
        """An event from outside (`wait_kinds`: a system event, an async tool's result, a
        tellask reply …): it resolves the open waits of its kind and key it matches, or is
        kept until such a wait is registered (kinds that keep early events)."""
        done = self.waits.ingest(event, dialog_id=dialog_id)
        if done.resolved:
            self.wake.set()
        return done

    # ------------------------------------------------------------------ approvals

    def approve(
        self,
        approval_id: str,
        *,
        by: str = "human",
        expected_digest: str | None = None,
        edited_args: str | None = None,
    ) -> WaitRecord:
        """Approve a waiting call (with `edited_args`: approve the human's arguments
        instead). The dialog's next drive runs exactly that call; a change a tool
        proposed is applied now, by the tool. Returns the record."""
        decision = Decision.APPROVE if edited_args is None else Decision.EDIT
        event = ApprovalDecision(
            approval_id=approval_id, decision=decision, by=by, edited_args=edited_args
        )
        rec = self.approvals.decide(event, expected_digest=expected_digest)
        self.wake.set()
        return rec

    def reject(
        self,
        approval_id: str,
        reason: str,
        *,
        by: str = "human",
        expected_digest: str | None = None,
    ) -> WaitRecord:
        """Reject a waiting call: it never runs; the dialog reads the reason and goes on
        (a change a tool proposed is recorded rejected by the tool; no dialog waits)."""
        event = ApprovalDecision(
            approval_id=approval_id, decision=Decision.REJECT, by=by, reason=reason
        )
        rec = self.approvals.decide(event, expected_digest=expected_digest)
        self.wake.set()
        return rec

    def pending_approvals(self, root_ids: list[str] | None = None) -> list[ApprovalView]:
        return self.approvals.pending(root_ids=root_ids)

    def start_detached(
        self,
        caller_id: str,
        member: str,
        message: str,
        *,
        sink: str,
        payload: dict[str, Any] | None = None,
    ) -> DialogRecord:
        """Open a detached side dialog of `caller_id` with `member`: the caller does not
        wait; the final reply goes to the registered sink `sink` (in the reply's
        transaction, exactly once) and leaves a note in the caller's history."""
        self.config.member(member)  # a clear error for an unknown member
        with self.store.tx():
            caller = self.store.get_dialog(caller_id)
            side = self.tree.start_detached(caller, member, message, sink=sink, payload=payload)
        self.wake.set()
        return side

    # ------------------------------------------------------------------ driving

    async def drive(
        self, dialog_id: str, *, max_steps: int | None = None, segue: Segue | None = None
    ) -> DriveResult:
        """Drive one dialog: one drive at a time per dialog in this process (the view's
        lock) and across processes (its claim: a dialog another live process drives is
        skipped, `DriveEnd.CLAIMED`). With `segue`, the drive is carried on while it says
        so (`drive.Segue`); each segment runs under the dialog's policy as it then is."""
        live = self.live.acquire(dialog_id)
        carry: Segue | None = None
        if segue is not None:

            async def carry(end: DriveEnd, result: DriveResult) -> int | None:
                more = await segue(end, result)
                if more is not None:  # e.g. the work loop's next phase: its policy
                    self.live.govern(live)
                return more

        try:
            async with live.lock:
                return await self._driver.drive(live, max_steps or self.max_steps, carry)
        finally:
            self.live.release(live)

    def pause(self, dialog_ids: Iterable[str]) -> None:
        """End the drives of these dialogs running in this process at their next step
        boundary: the step in flight finishes (its tool calls keep their results), the
        drive ends `paused` and the dialog is marked to drive again."""
        self._driver.pause(dialog_ids)

    def recover(self) -> list[str]:
        """Mark to drive again the dialogs left running by a process that is gone (its
        claim expired, or it was a process of this host that no longer exists); never one
        a live process drives. Returns their ids."""
        found = self.claims.recover()
        # The workspaces' files are projections written after each commit: a process that
        # died between a commit and its files left them behind; bring them in line.
        refresh_projections(self.store, self.rtws)
        if found:
            self.wake.set()
        return found

    def _tool_context(self, live: LiveDialog, key: str) -> ToolContext:
        """What one tool call sees: typed facts and the narrow services bound to this
        dialog (never the engine itself)."""
        if live.tool_context is not None:
            return live.tool_context.for_call(key)
        m = live.member
        did = live.id
        publish = self.bus.publish  # the hook reaches the bus, never the engine
        live.tool_context = ToolContext(
            rtws=self.rtws,
            member=m.id,
            dialog_id=did,
            call_key=key,
            acl=Acl(
                read_dirs=tuple(m.read_dirs),
                write_dirs=tuple(m.write_dirs),
                no_read_dirs=tuple(m.no_read_dirs),
                no_write_dirs=tuple(m.no_write_dirs),
            ),
            is_root=live.is_root,
            task_path=live.record.task_path,
            root_member=live.root_member,
            work_language=self.lang,
            secret_env_names=self._secret_env_names,
            reminders=StoreReminders(self.store, did),
            course=live.course,
            taskdoc_audit=StoreTaskdocAudit(self.store),
            on_taskdoc_changed=lambda section: publish(
                TaskdocChanged(dialog_id=did, section=section)
            ),
            workspace=self._workspace,
            phase=live.policy.phase,
            transient_backoff=self._transient_backoff,
        )
        return live.tool_context
