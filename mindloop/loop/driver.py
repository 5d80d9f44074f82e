"""The loop driver: carries one task from its first PLAN to DONE (or FAILED, a cap, or a
wait on the human), through the engine.

One loop root per task (`binding.bind`). The driver alone drives that root: each phase
entry posts the phase's input (`phase_ops.enter_phase`) and drives the root with the
phase's turn policy (`LoopPolicies`, the runtime's `policies=` resolver) up to the
phase's step cap; when the phase ends (`phase_end`, a reply without tool calls, the cap)
the runtime records it and routes (`routing.route` over `facts.gather`). Meanwhile a
scheduler restricted to the task's tree drives every other dialog of it: members working
dispatched nodes, side dialogs the root asked, FBR samples. A waiting node blocks
nothing — a dispatched one, or DO's own when a call of DO's opened a wait for it
(`node_waits`: the DO entry ends, the node is taken up again when its waits close, or
fails to ADJUST when one ends badly); the task parks only on a wait of its own or when
every open node waits, and then the driver either waits for the work under way or stops,
when only the human can move it (a question, an approval, or nothing at all at work).

Durable by construction: where the loop stands is a row of the store (`loop_state`),
changed in the transactions that change what it describes, so a `mindloop run` killed
anywhere resumes exactly there — a phase entered is continued (its drive resumes like any
interrupted drive), a phase ended is routed, nothing is posted or moved twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from mindloop.dialogs.budgeted import BudgetedRequests
from mindloop.dialogs.caps import CapScope
from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.outcomes import DriveEnd, DriveResult
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.dialogs.staleness import StaleAction
from mindloop.events.types import (
    DriveEnded,
    Event,
    LoopRouted,
    NoteAdded,
    PhaseEnded,
    PhaseStarted,
    QuestionAnswered,
    QuestionAsked,
    TellaskResponded,
    WaitResolved,
)
from mindloop.i18n import Lang
from mindloop.loop import node_waits, phase_ops, plan_mode, review_pass, stale, step_budget
from mindloop.loop.binding import bind
from mindloop.loop.facts import Gathered, Park, gather, is_user_input, park_reason
from mindloop.loop.kb import KbDispatcher
from mindloop.loop.ladder import CapKind, DriveCap, drive_cap
from mindloop.loop.memory_tool import MEMORY_TOOLSET, MemoryTool
from mindloop.loop.phase_calls import store_entries
from mindloop.loop.phases import PHASE_END, Phase, step_cap
from mindloop.loop.policy import LoopPolicy, PolicyTable
from mindloop.loop.request_sections import LoopSections
from mindloop.loop.retry_tool import RETRY_TOOLSET, RetryTool
from mindloop.loop.routing import HINT_ILLEGAL, Decision, KeptTally, NodeTally, Target, route
from mindloop.loop.stuck import detect_stuck
from mindloop.memory import MemoryCompiler
from mindloop.memory.compaction import verdicts_by_tool
from mindloop.memory.summarizer import provider_summarizer
from mindloop.store import DialogRecord, MessageRecord, QuestionRecord, Store, new_id
from mindloop.store import loop_state as ls
from mindloop.workspace import projector, repo
from mindloop.workspace.models import NodeKind, NodeStatus
from mindloop.workspace.rules import RulesText

POLL = 0.5  # seconds between looks at the store while the task waits for work under way
# Tool calls whose results are verdicts a compaction keeps verbatim (DONE, FAILED …).
VERDICT_TOOLS = frozenset({"node_transition"})
KEEP_SEEN = 10_000  # root lookups a long-running process remembers


class LoopPolicies:
    """The runtime's policy resolver for loop roots: the policy of the phase each root is
    in. The phases of the roots this process drives are set by their loops; another root
    is looked up once (one indexed read when its dialog is first loaded; a long watch
    forgets old lookups), never per step, and dialogs that are not roots never are.

    Bound to a runtime (`bind`), it also holds the loop's memory: the budgeted requests
    every phase compiles (agent-loop §7), their compactions and the summaries they owe."""

    def __init__(self, lang: Lang) -> None:
        self.table = PolicyTable(
            lang, lambda: self.memory, store_entries(self._store), lambda: self.sections
        )
        self._driven: dict[str, Phase | None] = {}  # roots this process's loops drive
        self._seen: dict[str, Phase | None] = {}  # other roots, looked up once
        self.rt: DialogRuntime | None = None
        self.memory: BudgetedRequests | None = None
        self.sections: LoopSections | None = None  # the §7.1 sections of each request
        self.retry_tool: RetryTool | None = None  # the loop's `retry_propose`

    def _store(self) -> Store | None:
        return self.rt.store if self.rt is not None else None

    def bind(self, rt: DialogRuntime) -> None:
        """Serve `rt`'s loop roots (once per runtime); the loop's own tools join the
        runtime's registry (`retry_propose`: its rules are the loop's), and the waits of
        loop tasks photograph the workspace ref for the staleness check (`loop.stale`)."""
        if self.rt is rt:
            return
        self.rt = rt
        if not rt.tools.has_toolset(RETRY_TOOLSET):
            self.retry_tool = RetryTool(rt.config.team.loop.retries)
            rt.tools.add_toolset(RETRY_TOOLSET, self.retry_tool.tools(), loop_owned=True)
        if self.retry_tool is not None:
            self.retry_tool.store = rt.store
        memory_config = rt.config.team.loop.memory
        if not rt.tools.has_toolset(MEMORY_TOOLSET):  # SELF_IMPROVE's `memory_remember`
            tool = MemoryTool(memory_config.min_confidence)
            rt.tools.add_toolset(MEMORY_TOOLSET, tool.tools(), loop_owned=True)
        rules = rt.context.rules  # its stamp read serves the tree section too
        stamp = rules.last_stamp if isinstance(rules, RulesText) else None
        self.sections = LoopSections(rt.store, rt.rtws, memory_config, self.table.lang, stamp)
        if rt.waits.workspace_ref is None:  # waits of loop tasks photograph the workspace
            rt.waits.workspace_ref = stale.loop_workspace_ref(rt)
        if rt.waits.node_opened is None:  # a wait opened for DO's node: the node waits
            rt.waits.node_opened = node_waits.on_open(rt)
        compiler = MemoryCompiler(rt.config.team.loop.memory, lang=self.table.lang)
        self.memory = BudgetedRequests(
            compiler, rt.store, rt.bus, verdict_of=verdicts_by_tool(VERDICT_TOOLS)
        )
        self.memory.attach()

    async def run_summaries(self, rt: DialogRuntime, member_id: str) -> None:
        """The LLM summaries compactions left pending, off the request path (between
        phases), on the loop member's model."""
        if self.memory is None or not self.memory.pending:
            return
        member = rt.config.member(member_id)
        summarizer = provider_summarizer(
            rt.providers, member.provider, rt.parts.model_name(member), member=member.id
        )
        await self.memory.run_summaries(summarizer)

    def set(self, root_id: str, phase: Phase | None) -> None:
        self._driven[root_id] = phase

    def entered(self, state: ls.LoopState, text: str | None = None) -> None:
        """The loop of `state.root_id` is in a phase entry (`text`: the input it posted,
        when at hand): its requests' sections are built from it."""
        if self.sections is not None:
            self.sections.entered(state, text)

    def __call__(self, rec: DialogRecord) -> LoopPolicy | None:
        if rec.kind != "root":
            return None
        if rec.id in self._driven:
            phase = self._driven[rec.id]
        elif rec.id in self._seen:
            phase = self._seen[rec.id]
        else:
            found = ls.by_root(self.rt.store, rec.id) if self.rt is not None else None
            phase = found.phase if found is not None and found.in_phase else None
            if len(self._seen) >= KEEP_SEEN:
                self._seen.clear()
            self._seen[rec.id] = phase
        return self.table[phase] if phase is not None else None


class LoopOutcome(StrEnum):
    """What a run of a task's loop came to (the values are `service.Outcome`'s)."""

    DONE = "done"  # every node terminal, SELF_IMPROVE ran: exit 0
    FAILED = "failed"  # the task FAILED (a node failed at its cap): exit 5
    WAITING = "waiting"  # only the human can move it now: exit 4
    CAP = "cap_reached"  # a spending cap: exit 3
    ERROR = "error"  # a drive failed: exit 1


@dataclass
class LoopReport:
    task_path: str
    root_id: str
    outcome: LoopOutcome
    reason: str = ""
    phase: Phase | None = None
    entries: int = 0  # phase entries during this run
    drives: list[DriveResult] = field(default_factory=list)  # the root's drives
    side_drives: list[DriveResult] = field(default_factory=list)  # the tree's other drives
    kb_delivered: int = 0  # KB requests posted to the KB dialog before the run returned


@dataclass(frozen=True)
class _Plan:
    """A routing decision not yet carried out (`TaskLoop._decide`)."""

    state: ls.LoopState
    target: Target
    decision: Decision
    notes: list[str]
    gathered: Gathered


class _TreeScheduler(Scheduler):
    """The task tree's dialogs except its loop root (the driver drives that one)."""

    def __init__(self, rt: DialogRuntime, root_id: str) -> None:
        super().__init__(rt, root_id=root_id)
        self._root = root_id

    def drivable(self, exclude: Collection[str]) -> list[str]:
        return super().drivable({*exclude, self._root})


class TaskLoop:
    """Drives one task's loop (see the module doc). `run` may be called again later: it
    continues where the store says the loop stands."""

    def __init__(
        self,
        rt: DialogRuntime,
        policies: LoopPolicies,
        task_path: str,
        *,
        member: str | None = None,
        drive_tree: bool = True,
    ) -> None:
        self.rt = rt
        self.policies = policies
        # False on a scale-out worker: the tree's other dialogs are queued drives that any
        # worker runs (durable/worker.py); this loop drives its root and polls the store.
        self.drive_tree = drive_tree
        policies.bind(rt)
        self.state = bind(rt, task_path, member=member)
        self.task = self.state.task_path
        self.root = self.state.root_id
        self.limits = rt.config.team.loop.retries  # drive_steps, plan_reentries
        self._changed = asyncio.Event()
        self._unsubscribe = rt.bus.subscribe(self._hear)
        self._notes: list[str] = []  # the runtime's notes for the next phase's input
        self._resolved: list[str] = []  # waits of nodes taken up again, for that input
        # The loop state as this coroutine last committed it (and the closed entry's
        # messages): the next look takes it instead of reading it back.
        self._next: tuple[ls.LoopState, list[MessageRecord] | None] | None = None
        self._fresh_entry = 0  # the entry this run just posted (nothing replied to it yet)
        self._root_member: str | None = None
        # A drive of the root is carried from phase to phase (`_segue`): the state of the
        # phase it works in now; whether the run ends with the drive (True), or the
        # control loop routes next (False; None: the drive's end is the phase's to judge);
        # a decision to park, left to the control loop once the drive let go of the root.
        self._seg: ls.LoopState | None = None
        self._seg_stop: bool | None = None
        self._plan: _Plan | None = None
        # The closed state the segue's transaction staged (`loop_state.stage`).
        self._staged: ls.LoopState | None = None
        # The root's drive as its last segue saw it (its segments' steps and cost), and a
        # transition that committed with the step that ended the phase (`before_commit`):
        # the steps the next segment may take, and the events it held for the segue.
        self._drive: DriveResult | None = None
        self._pre: tuple[int | None, list[Event]] | None = None
        self._report = LoopReport(self.task, self.root, LoopOutcome.DONE)
        self._tally = KeptTally()  # the task's nodes as `_decide` last counted them

    # ------------------------------------------------------------------ public

    def post(self, text: str) -> None:
        """A message from the user to the task: posted to the loop root (it is in the
        phase's history from its next step), and routed as new scope (R0) when the phase
        ends."""
        self.rt.post_user_message(self.root, text)

    async def run(self, message: str | None = None) -> LoopReport:
        rt = self.rt
        if message is not None:
            self.post(message)
        self.rt.recover()
        report = LoopReport(self.task, self.root, LoopOutcome.DONE)
        if not self.drive_tree:
            try:
                await self._control(report)
            finally:
                self._unsubscribe()
            return report
        # a run of the task goes on where the step limit stopped dialogs of its tree
        rt.retry_stopped(self.root)
        tree = _TreeScheduler(rt, self.root)
        stop = False
        side = asyncio.create_task(
            tree.run(watch=True, poll_interval=POLL, stop=lambda: stop), name=f"tree:{self.root}"
        )
        try:
            with projector.coalescing(rt.store):  # a node's commits: its files written once
                await self._control(report)
        finally:
            stop = True
            rt.wake.set()
            with contextlib.suppress(asyncio.CancelledError):
                await side
            report.side_drives = list(tree.results)
            self._unsubscribe()
        # The KB requests a SELF_IMPROVE step queued leave before the run returns (at
        # least once; the KB dialog dedupes); the KB dialog is driven by `mindloop run`.
        report.kb_delivered = KbDispatcher(rt).deliver_due(time.time())
        return report

    # ------------------------------------------------------------------ control

    async def _control(self, report: LoopReport) -> None:
        self._report = report
        while True:
            if self._plan is not None:  # decided at the end of a drive's last phase
                plan, self._plan = self._plan, None
                if await self._act(plan, report) and not self._news(report):
                    return
                continue
            known, self._next = self._next, None
            state, messages = known if known is not None else (self._load(), None)
            state = self._check_stale(state)
            report.phase = state.phase
            if state.in_phase:
                if await self._drive_phase(state, report) and not self._news(report):
                    return
                continue
            if state.ended is not None and not state.closed:
                state, messages = phase_ops.close(self.rt, state, None)
                self._publish_end(state)
            await self.policies.run_summaries(self.rt, self._member())
            if messages is None:
                messages = phase_ops.phase_messages(self.rt, state)
            if _ended(state, messages):
                report.outcome = (
                    LoopOutcome.DONE if state.status is ls.LoopStatus.DONE else LoopOutcome.FAILED
                )
                report.reason = state.status_reason
                if not self._news(report):
                    return
                continue
            if await self._route(state, messages, report) and not self._news(report):
                return

    def _news(self, report: LoopReport) -> bool:
        """The run would end with the task DONE or FAILED: a message that reached the
        root while its last drive still held it waits in the root's inbox (another
        process posted it then). Taken into the history now, it is new scope (R0) and the
        run goes on with it; True then."""
        if report.outcome not in (LoopOutcome.DONE, LoopOutcome.FAILED):
            return False
        if not self.rt.take_queued(self.root):
            return False
        report.outcome, report.reason = LoopOutcome.DONE, ""
        return True

    async def _route(
        self, state: ls.LoopState, messages: list[MessageRecord], report: LoopReport
    ) -> bool:
        """Route after a phase or a wake; True when the run ends here."""
        return await self._act(self._decide(state, messages), report)

    def _decide(
        self,
        state: ls.LoopState,
        messages: list[MessageRecord],
        hand: phase_ops.InHand | None = None,
    ) -> _Plan:
        """Where to go after a phase or a wake (agent-loop §4), with what routing does on
        the way: abandoned dispatches stopped, nodes whose own waits closed moved on
        (`node_waits.settle`), ready member nodes dispatched, a dropped hint counted, the
        decision published. `hand`: what the caller's transaction read already (the
        workspace routed on is left in it)."""
        rt = self.rt
        ws = hand.workspace if hand is not None and hand.workspace is not None else None
        if ws is None:
            ws = repo.load(rt.store, self.task)
        # one count of the nodes (from the last one) serves settle, dispatch, routing
        nodes = self._tally.count(ws)
        # a note to the root says which side dialogs were stopped
        waits = phase_ops.cancel_abandoned(rt, ws, rt.store.open_waits(self.root))
        # nodes whose waits closed move on
        settled = node_waits.settle(rt, state, ws, waits, nodes)
        if settled.moved:
            ws = repo.load(rt.store, self.task)
            nodes = self._tally.count(ws)
            self._notes += settled.notes
            self._resolved += settled.resolved
        dispatched = phase_ops.dispatch_ready(rt, state, ws, nodes)
        # one load (and one read of the waits) serves both, unless nodes moved since
        ref = hand.ref if hand is not None else None
        if dispatched or settled.moved:
            gathered = gather(rt, state, messages, ref=ref)
        else:
            gathered = gather(rt, state, messages, ws, waits, nodes=nodes, ref=ref)
        if hand is not None:
            hand.workspace = gathered.facts.workspace
        decision = route(gathered.facts)
        notes = list(self._notes)
        ended = state.ended
        if ended is not None and ended.by in (ls.EndedBy.RUNTIME, ls.EndedBy.STEP_CAP):
            notes.append(f"the {state.phase} entry was ended by the runtime: {ended.reason}")
        if decision.hint_dropped:
            notes.append(f"{HINT_ILLEGAL}: hint {decision.hint} dropped: {decision.hint_dropped}")
        notes += [f"BENCH {n} waits: {why}" for n, why in gathered.bench_why.items()]
        if dispatched:
            notes.append(f"dispatched to their members: {', '.join(dispatched)}")
        target = decision.target
        if decision.hint_dropped:
            state = phase_ops.save(rt, state, hints_dropped=state.hints_dropped + 1)
        if target is Target.ROUTER:  # the task is known: a message is new scope (R6)
            target = Target.PLAN
            notes.append("a new message from the user: plan its scope")
        elif state.replan_stale and target is not Target.PARK:  # a stale resume (§6.3)
            target = Target.PLAN
        self._publish_route(decision, target, gathered.facts.tally())
        return _Plan(state, target, decision, notes, gathered)

    async def _act(self, plan: _Plan, report: LoopReport) -> bool:
        """Carry out a routing decision; True when the run ends here."""
        if plan.target is Target.PARK:
            return await self._park(plan.state, report)
        return self._proceed(plan, report)

    def _proceed(
        self,
        plan: _Plan,
        report: LoopReport,
        *,
        held: bool = False,
        hand: phase_ops.InHand | None = None,
    ) -> bool:
        """Carry out a decision other than parking (never suspends: it may run inside a
        transaction); True when the run ends here. `held`: this process's drive holds the
        root's claim and carries on in the phase entered; `hand`: what the caller's
        transaction read already."""
        state, target, decision, notes, gathered = (
            plan.state,
            plan.target,
            plan.decision,
            plan.notes,
            plan.gathered,
        )
        rt = self.rt
        if target is Target.END:
            cap = None if state.self_improved else self._drive_cap(state)
            if cap is not None:
                self._ask_to_continue(cap.question(self.rt.lang), self._continue_body(cap))
                return False
            # every node terminal: SELF_IMPROVE through the history, batch by batch, then
            # end (`loop.review_pass`; the drive cap stops a pass, it does not ask)
            if not state.self_improved or (
                review_pass.goes_on(rt.store, state) and self._drive_cap(state) is None
            ):
                return self._enter(
                    state, Phase.SELF_IMPROVE, decision, notes, gathered, report, held, hand
                )
            return self._finish(state, report)
        phase = target.phase
        assert phase is not None
        cap = self._drive_cap(state)
        if cap is not None:  # before more work: ask to go on
            self._ask_to_continue(cap.question(self.rt.lang), self._continue_body(cap))
            return False
        if phase is Phase.ADJUST:  # its node may have used its ADJUST cycles (§8.2 L3),
            failed = phase_ops.fail_exhausted_adjust(rt, state)
            if failed is None:  # or plan mode left nodes blocked (R5, `loop.plan_mode`)
                failed = plan_mode.cancel_left_blocked(rt, state)
            if failed is not None:
                self._notes.append(failed)
                return False  # route again: other work, or the end
            notes = [*notes, *plan_mode.entry_notes(gathered.facts.workspace)]
        replan = phase is Phase.PLAN and state.phase is Phase.ADJUST and decision.hint_used
        return self._enter(
            state, phase, decision, notes, gathered, report, held, hand, replan=replan
        )

    def _enter(
        self,
        state: ls.LoopState,
        phase: Phase,
        decision: Decision,
        notes: list[str],
        gathered: Gathered,
        report: LoopReport,
        held: bool = False,
        hand: phase_ops.InHand | None = None,
        *,
        replan: bool = False,
    ) -> bool:
        try:
            state, text = phase_ops.enter_phase(
                self.rt,
                state,
                phase,
                notes=notes,
                resolved=self._resolved,
                ready_benches=gathered.facts.bench_ready,
                replan=replan,
                held=held,
                hand=hand,
            )
        except ls.StaleLoopState:
            return False  # another process moved the loop first: look again
        self._notes.clear()  # said in this input
        self._resolved.clear()
        self._next, self._fresh_entry = (state, None), state.entry
        self.policies.set(self.root, phase)
        self.policies.entered(state, text)
        report.entries += 1
        self.rt.bus.publish(
            PhaseStarted(
                dialog_id=self.root,
                task=self.task,
                phase=phase.value,
                entry=state.entry,
                node=state.node_id,
                member=self._member(),
            )
        )
        return False

    async def _drive_phase(self, state: ls.LoopState, report: LoopReport) -> bool:
        """Drive the root in its phase until the phase ends (False: route next) or the run
        must end (True)."""
        rt = self.rt
        phase = state.phase
        assert phase is not None
        self.policies.set(self.root, phase)
        self.policies.entered(state)
        wait = rt.tree.wait_state(self.root)
        if (
            state.entry != self._fresh_entry  # posted just now: nothing replied to it yet
            and not wait.waiting
            and not rt.store.undelivered_responses(self.root)
            and _replied(phase_ops.phase_messages(rt, state))
        ):
            # the phase's reply is in but its end was not recorded (a kill between them)
            self._end(state, ls.EndedBy.REPLY, "a reply without tool calls or tellasks")
            return False
        if phase is Phase.DO and node_waits.waits_now(rt, state):  # killed before its end
            self._end(state, ls.EndedBy.RUNTIME, f"node {state.node_id} waits")
            return False
        cap = step_cap(self.rt.config.team.loop.phases, phase)
        # the step cap left, or in DO the node's step budget left when less (§5.1, §8.1)
        left, why = step_budget.entry_limit(
            rt, state, cap - state.entry_steps, self._cap_reason(phase, state.entry_steps, cap)
        )
        if left <= 0:
            self._end(state, ls.EndedBy.STEP_CAP, why)
            return False
        if not wait.drivable:
            return await self._wait_in_phase(state, report)
        self._fresh_entry = 0
        self._seg, self._seg_stop = state, None
        hooks = self.policies.table.hooks
        hooks[self.root] = self  # `before_commit`, in the root's tool steps
        try:
            result = await rt.drive(self.root, max_steps=left, segue=self._segue)
        finally:
            hooks.pop(self.root, None)
            self._drive = None
            ls.defer_ends(rt.store, self.task, False)
            ls.discard(rt.store, self.task)  # an end staged by a step that rolled back
            pre, self._pre = self._pre, None  # (a drive that raised: the run ends)
        report.drives.append(result)
        if pre is not None:  # the transition committed, the drive ended before its segue
            _, held = pre
            for ev in held:
                self.rt.bus.publish(ev)
            if self._seg_stop is None:  # a phase was entered: the control loop drives it
                self._next = None
                return False
        if self._seg_stop is not None:  # the segue closed the last phase and routed
            return self._seg_stop
        state = self._seg  # the phase the drive ended in
        assert state is not None and state.phase is not None
        cap = step_cap(self.rt.config.team.loop.phases, state.phase)
        reason = result.reason
        steps, cost = result.segment_steps, result.segment_cost
        end = self._end_of(state, reason, cap)
        if end is not None:  # ended, by phase_end or as the drive's end says: closed now
            self._close(state, end, steps, cost)
            return False
        if steps:
            state = phase_ops.save(
                rt,
                state,
                entry_steps=state.entry_steps + steps,
                drive_steps=state.drive_steps + steps,
                drive_cost=state.drive_cost + cost,
            )
        if reason is DriveEnd.CAP_REACHED:
            if result.cap_scope == CapScope.DRIVE:  # a drive's cap: ask whether to go on
                why = result.cap or "a cap of caps.drive was reached"
                self._ask_to_continue(
                    f"{why.removeprefix('[mindloop] ')} Continue?",
                    "Answer to let the work go on (`mindloop answer`), or stop here.",
                )
                return False
            # a task's cap is its budget: raised in team.yaml, not by an answer
            report.outcome, report.reason = LoopOutcome.CAP, result.cap or "a cap was reached"
            return True
        if reason is DriveEnd.ERROR:
            report.outcome, report.reason = LoopOutcome.ERROR, result.error or "a drive failed"
            return True
        if reason is DriveEnd.CLAIMED:  # another process drives the root: wait for it
            await self._settle(POLL)
            return False
        fresh = self._load()
        if fresh.ended is not None:  # phase_end recorded it (the drive then waited)
            return False
        if reason is DriveEnd.WAITING:
            return await self._wait_in_phase(fresh, report)
        return False

    async def _segue(self, reason: DriveEnd, result: DriveResult) -> int | None:
        """The root's drive would end (`phase_end`, a reply, the step cap): the phase is
        closed and routed here, under the drive's claim, and when the route enters a next
        phase the same drive carries on in it (its step cap returned): no claim is
        settled and taken again, no view re-read, between two phases. Parking is left to
        the control loop once the drive let go of the root (it may wait for others)."""
        self._drive = result  # the hook of its next steps may use it
        pre, self._pre = self._pre, None
        if pre is not None:  # closed, routed and entered with the step (`before_commit`)
            more, held = pre
            for ev in held:
                self.rt.bus.publish(ev)
            return more
        state = self._seg
        assert state is not None and state.phase is not None
        if reason not in _ENDED_BY:  # the phase goes on (`_end_of`)
            return None
        await self.policies.run_summaries(self.rt, self._member())
        # closed, routed and entered in one transaction (one commit between two phases);
        # nothing in it suspends, so no other coroutine's statement lands inside it
        with self.rt.store.tx(durable=False):
            try:
                more = self._transition(state, reason, result)
                self._flush()
            finally:  # written, or rolled back with the transaction
                self._staged = None
                ls.discard(self.rt.store, self.task)
        return more

    def before_commit(
        self, live: LiveDialog, stored: Sequence[MessageRecord], opened: bool
    ) -> None:
        """The root's tool step is about to commit (the tool step's `CommitHook`, given
        through the phase's policy): when its results end the phase (`phase_end`) and the
        drive will stop for it and segue, the segue's transition (`_transition`: the
        phase closed, routed, the next one entered) runs here, in the step's transaction
        — one commit, and one write of the loop state, where there were two — and the
        segue only publishes what it held. Anything that could make the drive end
        otherwise, or that the segue must do first, leaves the transition to the segue:
        a wait opened, a course to start, summaries owed, news in the inbox, the root
        waiting, the drive's first segment (its steps and cost are not at hand); the
        end the step recorded is then written here (`loop_state.defer_ends`: from the
        first step this hook saw, the end is staged, written once with the transition)."""
        store = self.rt.store
        ls.defer_ends(store, self.task, True)  # this hook runs: the next end may wait
        if not self._segues_here(live, stored, opened):
            ls.flush(store, self.task)  # an end the step staged: written with it
            return
        state, result = self._seg, self._drive
        assert state is not None and result is not None
        with self.rt.bus.holding() as held:
            try:  # the root's course is its step's (no course starts: `_segues_here`)
                more = self._transition(state, DriveEnd.STOPPED, result, live.record.course)
                self._flush()
            finally:  # written, or rolled back with the step's transaction
                self._staged = None
                ls.discard(store, self.task)
        self._pre = (more, held)

    def _segues_here(self, live: LiveDialog, stored: Sequence[MessageRecord], opened: bool) -> bool:
        """Whether the transition may run in the step's transaction (`before_commit`)."""
        rt, state = self.rt, self._seg
        if (
            self._drive is None
            or state is None
            or self._pre is not None
            or opened
            or live.course.pending is not None
            or not _ends_phase(stored)
        ):
            return False
        memory = self.policies.memory
        if memory is not None and memory.pending:
            return False
        now = ls.get(rt.store, self.task)
        return not (
            now is None
            or now.ended is None  # recorded by the `phase_end` just run
            or now.entry != state.entry
            or rt.store.undelivered_responses(self.root)
            or rt.tree.wait_state(self.root).waiting
        )

    def _transition(
        self, state: ls.LoopState, reason: DriveEnd, result: DriveResult, course: int | None = None
    ) -> int | None:
        """`_segue`'s transaction: the phase closed, routed and the next one entered. What
        it reads is read once and handed on (`phase_ops.InHand`; `course`: the root's,
        when the caller has it), and the loop state is written once: the closed state is
        staged, and written with the entry (`_flush` writes it when none follows)."""
        rt = self.rt
        hand = phase_ops.InHand(rt.rtws, root_course=course)
        steps, cost = result.segment_steps, result.segment_cost
        stored = ls.get(rt.store, self.task)  # with the end `phase_end` recorded, if it did
        assert stored is not None and state.phase is not None
        if stored.ended is None:
            end = self._end_of(state, reason, step_cap(rt.config.team.loop.phases, state.phase))
        else:  # recorded: the drive's end is not looked at (nor is a stop kept for it)
            self.policies.table[state.phase].take_stuck(self.root)
            end = None
        closed, messages = self._close(
            state, end, steps, cost, hand=hand, save=False, stored=stored
        )
        self._seg_stop, self._next = False, None  # closed: the control loop routes, unless
        if _ended(closed, messages):
            self._next = (closed, messages)
            return None
        plan = self._decide(closed, messages, hand)
        if plan.target is Target.PARK:
            self._plan = plan
            return None
        if self._proceed(plan, self._report, held=True, hand=hand):
            self._seg_stop = True
            return None
        entered = self._next[0] if self._next is not None else None
        if entered is None or not entered.in_phase or entered.entry <= closed.entry:
            return None  # no phase entered (a question asked, a node failed): route again
        assert entered.phase is not None
        self._next, self._seg, self._seg_stop = None, entered, None
        cap = step_cap(self.rt.config.team.loop.phases, entered.phase)
        # DO: the node's budget, on the workspace as entered
        return step_budget.entry_limit(self.rt, entered, cap, "", hand.workspace)[0]

    def _flush(self) -> None:
        """Write the closed state the segue's transaction staged, when nothing wrote it
        since (the run parks, ends, asks, or routes again); what refers to it is given
        the state as written."""
        staged, self._staged = self._staged, None
        saved = ls.flush(self.rt.store, self.task) if staged is not None else None
        if saved is None:
            return
        if self._next is not None and self._next[0] is staged:
            self._next = (saved, self._next[1])
        if self._plan is not None and self._plan.state is staged:
            self._plan = replace(self._plan, state=saved)

    def _end_of(self, state: ls.LoopState, reason: DriveEnd, cap: int) -> ls.PhaseEnd | None:
        """How the phase ended with a drive that ended for `reason`: `phase_end` records
        its own (the returned end is then only a fallback `close` ignores); a reply, the
        step cap and the turn policy end it as the runtime says; None: it goes on."""
        by = _ENDED_BY.get(reason)
        if by is None:
            return None
        if by is ls.EndedBy.REPLY:
            why = "a reply without tool calls or tellasks"
        elif by is ls.EndedBy.STEP_CAP:  # the step cap, or in DO the node's step budget
            cap_why = self._cap_reason(state.phase, cap, cap)
            _, why = step_budget.entry_limit(self.rt, state, cap - state.entry_steps, cap_why)
        else:
            assert state.phase is not None
            stuck = self.policies.table[state.phase].take_stuck(self.root)
            why = stuck.reason() if stuck is not None else "the turn policy stopped the drive"
        return ls.PhaseEnd(by=by, reason=why, at=time.time())

    async def _wait_in_phase(self, state: ls.LoopState, report: LoopReport) -> bool:
        """The root waits mid-phase (a question, an approval, a tellask it made)."""
        wait = self.rt.tree.wait_state(self.root)
        if wait.drivable:  # what it waited for came in meanwhile
            return False
        kind, why = park_reason(self.rt, state)
        if kind is Park.WORK or (kind is Park.STUCK and wait.pending):
            await self._settle(POLL)
            return False
        phase_ops.save(self.rt, state, status=ls.LoopStatus.WAITING, status_reason=why)
        report.outcome, report.reason = LoopOutcome.WAITING, why
        return True

    async def _park(self, state: ls.LoopState, report: LoopReport) -> bool:
        kind, why = park_reason(self.rt, state)
        if kind is Park.WORK:
            if state.status is not ls.LoopStatus.WAITING or state.status_reason != why:
                phase_ops.save(self.rt, state, status=ls.LoopStatus.WAITING, status_reason=why)
            await self._settle(POLL)
            return False
        phase_ops.save(self.rt, state, status=ls.LoopStatus.WAITING, status_reason=why)
        report.outcome, report.reason = LoopOutcome.WAITING, why
        return True

    def _finish(self, state: ls.LoopState, report: LoopReport) -> bool:
        ws = repo.load(self.rt.store, self.task)
        failed = [
            n.id
            for n in ws.nodes.values()
            if n.kind is NodeKind.EXECUTION and n.status is NodeStatus.FAILED
        ]
        status = ls.LoopStatus.FAILED if failed else ls.LoopStatus.DONE
        why = f"failed: {', '.join(failed)}" if failed else "every node is terminal"
        # the human's messages so far are accounted for: a later one starts new work
        phase_ops.save(self.rt, state, status=status, status_reason=why)
        report.outcome = LoopOutcome.FAILED if failed else LoopOutcome.DONE
        report.reason = why
        return True

    def _end(self, state: ls.LoopState, by: ls.EndedBy, reason: str) -> None:
        self._close(state, ls.PhaseEnd(by=by, reason=reason, at=time.time()))

    def _close(
        self,
        state: ls.LoopState,
        end: ls.PhaseEnd | None,
        steps: int = 0,
        cost: float = 0.0,
        *,
        hand: phase_ops.InHand | None = None,
        save: bool = True,
        stored: ls.LoopState | None = None,
    ) -> tuple[ls.LoopState, list[MessageRecord]]:
        """Close the current phase (`phase_ops.close`, with the drive's `steps` and
        `cost`; `end` None: the one recorded in `stored`, the state as just read); the
        next look routes from the closed state (returned, with the entry's messages).
        Without `save` (the segue's transaction) the closed state is staged
        (`loop_state.stage`) and written once, with what follows it (`_flush`)."""
        closed, messages = phase_ops.close(
            self.rt, state, end, steps=steps, cost=cost, save=save, hand=hand, stored=stored
        )
        if not save:
            self._staged = closed
        self._publish_end(closed)
        self._next = (closed, messages)
        return closed, messages

    def _drive_cap(self, state: ls.LoopState) -> DriveCap | None:
        """The drive cap the loop reached since the human last spoke (agent-loop §8.2):
        `loop.retries.drive_steps` model steps, or `caps.drive.max_cost` spent."""
        max_cost = self.rt.config.team.caps.drive.max_cost
        return drive_cap(state.drive_steps, state.drive_cost, self.limits, max_cost)

    def _continue_body(self, cap: DriveCap) -> str:
        if cap.kind is CapKind.STEPS:
            return (
                f"Answer to let it go on for another {self.limits.drive_steps} steps "
                "(`mindloop answer`), or stop here."
            )
        return "Answer to let it go on (`mindloop answer`), or stop here."

    def _ask_to_continue(self, headline: str, body: str) -> None:
        """A drive cap was reached: ask the human whether to go on (agent-loop §8.2); the
        question parks the task (R1) until it is answered, and the answer starts the
        loop's count since their last word again (`loop_state.human_spoke`)."""
        store = self.rt.store
        with store.tx():
            rec = store.get_dialog(self.root)
            q = store.add_question(
                QuestionRecord(
                    id=new_id("q4h-"),
                    dialog_id=self.root,
                    root_id=self.root,
                    headline=headline,
                    body=body,
                    call_id=new_id("loop-"),
                    course=rec.course,
                )
            )
        self.rt.bus.publish(
            QuestionAsked(dialog_id=self.root, question_id=q.id, headline=q.headline, body=q.body)
        )

    # ------------------------------------------------------------------ helpers

    def _check_stale(self, state: ls.LoopState) -> ls.LoopState:
        """The staleness check on resume (agent-loop §6.3 step 4, `loop.stale`): when the
        root's own waits closed since the last look, judge them; one signal is a note
        (in the phase's history if one runs, and in the next phase's input), two or more
        send the task back to PLAN once (a running phase other than PLAN ends for it)."""
        rt = self.rt
        found = stale.resumed(rt, state)
        if found is None:
            return state
        st = found.staleness
        changes: dict[str, object] = {"stale_checked_at": found.checked_at}
        if st.action is StaleAction.NONE:
            return phase_ops.save(rt, state, **changes)
        replan = (
            st.action is StaleAction.REPLAN
            and not state.stale_replanned
            and not (state.in_phase and state.phase is Phase.PLAN)
        )
        text = stale.note(rt, state, st, replan=replan)
        self._notes.append(text)
        if replan:
            changes |= {"replan_stale": True, "stale_replanned": True}
            if state.in_phase:  # ends now; closed (its node untouched) and routed next
                why = "a stale context after a wait: back to PLAN"
                changes["ended"] = ls.PhaseEnd(by=ls.EndedBy.STALE, reason=why, at=time.time())
        noted = state.in_phase and not replan
        with rt.store.tx():  # the verdict and its note together: judged once, said once
            phase_ops.save(rt, state, **changes)
            if noted:
                phase_ops.append_note(rt, self.root, text)
        if noted:
            rt.bus.publish(NoteAdded(dialog_id=self.root, text=text))
        return self._load()

    @staticmethod
    def _cap_reason(phase: Phase | None, steps: int, cap: int) -> str:
        """Why an entry ended at its step cap: for DO, the stuck detector's step budget
        (agent-loop §8.1: `steps_used >= step_budget` is STUCK)."""
        if phase is Phase.DO:
            stuck = detect_stuck([], steps_used=max(steps, cap), step_budget=cap)
            assert stuck is not None
            return stuck.reason()
        return f"the phase's step cap ({cap})"

    def _member(self) -> str:
        """The loop root's member (a dialog's member is set for life)."""
        if self._root_member is None:
            self._root_member = self.rt.store.get_dialog(self.root).member
        return self._root_member

    def _load(self) -> ls.LoopState:
        found = ls.get(self.rt.store, self.task)
        assert found is not None
        self.state = found
        return found

    def _hear(self, ev: Event) -> None:
        if isinstance(ev, DriveEnded | WaitResolved | TellaskResponded | QuestionAnswered):
            self._changed.set()

    async def _settle(self, timeout: float) -> None:
        """Wait until something in the rtws may have changed (or `timeout`)."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def _publish_end(self, state: ls.LoopState) -> None:
        end = state.ended
        assert end is not None and state.phase is not None
        self.rt.bus.publish(
            PhaseEnded(
                dialog_id=self.root,
                task=self.task,
                phase=state.phase.value,
                entry=state.entry,
                by=end.by.value,
                hint=end.hint.value if end.hint else None,
                summary=end.summary.progress,
            )
        )

    def _publish_route(self, d: Decision, target: Target, nodes: NodeTally) -> None:
        self.rt.bus.publish(
            LoopRouted(
                dialog_id=self.root,
                task=self.task,
                target=target.value,
                rule=d.rule,
                hint=d.hint.value if d.hint else None,
                hint_dropped=d.hint_dropped,
                done=nodes.terminal,
                total=nodes.total,
            )
        )


# How a drive's end ends the phase (when `phase_end` did not): other ends leave it open.
_ENDED_BY = {
    DriveEnd.DONE: ls.EndedBy.REPLY,
    DriveEnd.IDLE: ls.EndedBy.REPLY,
    DriveEnd.STEP_LIMIT: ls.EndedBy.STEP_CAP,
    DriveEnd.STOPPED: ls.EndedBy.RUNTIME,
}


def _ends_phase(stored: Sequence[MessageRecord]) -> bool:
    """The step's results (as stored) end the phase: a `phase_end` that succeeded (the
    policy's `goes_on` stops the drive for it, `phase_end_called`)."""
    return any(
        m.kind == "tool_result" and m.data.get("name") == PHASE_END and not m.data.get("is_error")
        for m in stored
    )


def _ended(state: ls.LoopState, messages: list[MessageRecord]) -> bool:
    """The task is DONE or FAILED and nothing the human said since asks for more."""
    return state.status in (ls.LoopStatus.DONE, ls.LoopStatus.FAILED) and not any(
        is_user_input(m) for m in messages
    )


def _replied(messages: list[MessageRecord]) -> bool:
    """The entry's last record is the model's text with nothing after it: no tool call
    (those are records of their own after it) and nothing new to answer."""
    last = next((m for m in reversed(messages) if m.kind != "thinking"), None)
    return last is not None and last.kind == "assistant"
