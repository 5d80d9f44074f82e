"""The drive loop: one dialog, step by step, until it answers, waits or stops.

A drive: take queued replies → compile the request (the dialog's turn policy) → stream a
generation → decide and commit its turn (`turn.py`: the generation, what its tellasks
start and, for a final answer, its delivery, in one transaction) → run the requested
tools (`tool_step.py`) → repeat, until the model answers without tool calls or tellasks,
the dialog waits on others, the policy ends the drive, or the per-drive step limit is
reached. Each step commits at most twice, once when its calls act only in the store
(the turn then commits with their results: `turn.defers`); nothing re-reads the dialog.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from mindloop.dialogs.caps import CapGuard
from mindloop.dialogs.claims import ClaimLost, Claims
from mindloop.dialogs.course import start_new_course
from mindloop.dialogs.formats import INTERRUPTED_TOOL_RESULT
from mindloop.dialogs.generation import (
    GENERATION_CODEC,
    GenerationOutcome,
    generation_key,
    run_generation,
)
from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.outcomes import (
    Continue,
    DriveEnd,
    DriveResult,
    Failed,
    Final,
    StepOutcome,
    Waiting,
)
from mindloop.dialogs.policy import PolicyError
from mindloop.dialogs.prompts import STEP_LIMIT_NOTE, text_for
from mindloop.dialogs.request import RequestBuilder
from mindloop.dialogs.tool_step import ToolStep
from mindloop.dialogs.tree import DialogTree, WaitState
from mindloop.dialogs.turn import (
    commit_turn,
    decide_turn,
    defers,
    generation_record,
    reserve_turn,
)
from mindloop.durable.steps import Steps
from mindloop.events.bus import EventBus
from mindloop.events.types import (
    DriveEnded,
    DriveStarted,
    ErrorRaised,
    GenerationEnded,
    GenerationStarted,
    NoteAdded,
)
from mindloop.providers.base import AssistantMessage, ChatMessage, ToolCall, ToolResultMessage
from mindloop.providers.pool import ProviderPool, generation_caller
from mindloop.store import (
    DialogRecord,
    DialogStatus,
    MessageRecord,
    ResponseRecord,
    Store,
    UsageTotals,
    crash_points,
)
from mindloop.tools.base import call_key

# A drive's segue (`Driver.drive`): when the drive would end because the model answered,
# its policy stopped it or its step limit was reached, the caller may carry it on under
# the same claim (the work loop enters its next phase and posts its input): the steps the
# next segment may take, or None to end the drive there.
Segue = Callable[[DriveEnd, DriveResult], Awaitable[int | None]]
SEGUE_ENDS = frozenset({DriveEnd.DONE, DriveEnd.STOPPED, DriveEnd.STEP_LIMIT})

# The status a dialog is left in when a drive ends, by how it ended.
SETTLED_STATUS: dict[DriveEnd, DialogStatus] = {
    DriveEnd.ERROR: DialogStatus.ERROR,
    DriveEnd.WAITING: DialogStatus.WAITING,
    DriveEnd.STEP_LIMIT: DialogStatus.STOPPED,
    DriveEnd.CAP_REACHED: DialogStatus.STOPPED,
    DriveEnd.CANCELLED: DialogStatus.INTERRUPTED,
    DriveEnd.PAUSED: DialogStatus.INTERRUPTED,
}
# Ends after which the dialog is marked to drive again (the next run goes on with it).
RESUMED_ENDS = frozenset({DriveEnd.CANCELLED, DriveEnd.PAUSED})


class Driver:
    def __init__(
        self,
        store: Store,
        tree: DialogTree,
        bus: EventBus,
        providers: ProviderPool,
        parts: RequestBuilder,
        tools: ToolStep,
        claims: Claims,
        wake: asyncio.Event,
        steps: Steps | None = None,
    ) -> None:
        self.store = store
        self.tree = tree
        self.bus = bus
        self.providers = providers
        self.parts = parts
        self.tools = tools
        self.claims = claims
        self.wake = wake
        # The durable step boundary around the model call (None: the call is made
        # directly; see `mindloop.durable`).
        self.steps = steps
        self.caps = CapGuard(store, parts.config.team.caps, parts.lang)
        # Dialogs whose drive ends at its next step boundary (`pause`): the run driving
        # them ends, and a step in flight is finished rather than cut off.
        self.pausing: set[str] = set()

    def pause(self, dialog_ids: Iterable[str]) -> None:
        """End these dialogs' drives in this process at their next step boundary
        (`DriveEnd.PAUSED`; the next run drives them on); a drive not running is not
        touched."""
        self.pausing.update(dialog_ids)

    async def drive(
        self, live: LiveDialog, max_steps: int, segue: Segue | None = None
    ) -> DriveResult:
        """Drive a dialog whose in-process lock the caller holds; with `segue`, carried on
        in segments while it says so (see `Segue`)."""
        try:
            return await self._drive(live, max_steps, segue)
        finally:
            self.pausing.discard(live.id)  # a pause asked of this drive ends with it

    async def _drive(self, live: LiveDialog, max_steps: int, segue: Segue | None) -> DriveResult:
        did = live.id
        result = DriveResult(dialog_id=did, reason=DriveEnd.DONE)
        # Lazy commits (no fsync of their own) hold only bookkeeping whose loss on a power
        # failure leaves an earlier state that recovery handles the same way; the next
        # durable commit makes them durable too (the WAL is replayed in order).
        with self.store.tx(durable=False):
            fresh = self.claims.take(did)
            if fresh is None:  # another live process drives it: skip it
                result.reason = DriveEnd.CLAIMED
                return result
            # Under the claim (and the write lock), the view is made current: nobody but
            # this drive appends turns now, and what others appended is seen.
            self._sync(live, fresh)
            state = self.tree.wait_state(did)
            if not state.drivable:
                self.claims.settle(did, DialogStatus.WAITING)
                result.reason = DriveEnd.WAITING
                return result
            approved = self._take_inbox(live)
        if _nothing_to_answer(live) and not approved:
            self._settle(live, result, DriveEnd.IDLE)
            return result
        live.reminders = self.store.reminders(did)
        self._started(live)
        said = False  # the end was published (a segment's, before its segue)
        try:
            with self.claims.heartbeat(did):
                end = await self._steps(live, state, max_steps, result, approved)
                approved = []  # they ran
                while segue is not None and end in SEGUE_ENDS:
                    # to observers each segment is a drive of its own (a loop phase's)
                    self._ended(live, result, end)
                    said = True
                    # a drive's boundary: what was queued meanwhile (a post from another
                    # process, replies) comes in before the segue looks, as a new drive
                    # would take it; approved calls stay queued for the next segment
                    if self.store.undelivered_responses(did):
                        with self.store.tx(durable=False):
                            approved = self._take_inbox(live)
                    more = await segue(end, result)
                    if more is None:
                        break
                    said = False
                    # the next segment: what the segue appended (its input) is read in
                    result.next_segment()
                    live.history.extend(
                        self.store.messages_after(did, live.record.course, live.history.last_id)
                    )
                    if approved or (
                        live.node is not None and self.store.undelivered_responses(did)
                    ):
                        # the approved calls this segment runs are those of the node it
                        # works (`LiveDialog.node`, as the segue left it); taken again
                        # (a held call stays queued until it ran), with the node's news
                        with self.store.tx(durable=False):
                            approved = self._take_inbox(live)
                    self._started(live)
                    end = await self._steps(live, state, more, result, approved)
                    approved = []
        except ClaimLost as exc:
            # Another process drives it now (this one stalled past the claim's expiry): the
            # turn in hand was rolled back; nothing more is written here.
            result.reason, result.error = DriveEnd.CLAIMED, str(exc)
            self.bus.publish(ErrorRaised(dialog_id=did, message=str(exc)))
            return result
        except asyncio.CancelledError:
            result.reason = DriveEnd.CANCELLED
            self._settle(live, result, DriveEnd.CANCELLED, said=said)
            raise
        except Exception as exc:  # a bug must not leave the dialog marked running
            result.error = f"{type(exc).__name__}: {exc}"
            self.bus.publish(ErrorRaised(dialog_id=did, message=result.error))
            self._settle(live, result, DriveEnd.ERROR, said=said)
            raise
        self._settle(live, result, end, said=said)
        return result

    def _started(self, live: LiveDialog) -> None:
        rec = live.record
        self.bus.publish(
            DriveStarted(
                dialog_id=live.id,
                member=live.member.id,
                task=rec.task_path,
                kind=rec.kind,
                root_id=rec.root_id,
            )
        )

    def _ended(self, live: LiveDialog, result: DriveResult, end: DriveEnd) -> None:
        self.bus.publish(
            DriveEnded(
                dialog_id=live.id,
                reason=str(end),
                steps=result.segment_steps,
                error=result.error,
            )
        )

    async def _steps(
        self,
        live: LiveDialog,
        state: WaitState,
        max_steps: int,
        result: DriveResult,
        approved: list[ResponseRecord],
    ) -> DriveEnd:
        """The step loop; how it ended. Calls the human approved run first."""
        base = result.steps  # the steps of the drive's earlier segments
        for step in range(1, max_steps + 1):
            if self.pausing and live.id in self.pausing:
                return DriveEnd.PAUSED
            if approved:
                effects = await self.tools.run_approved(live, approved)
                approved = []
                if effects.waits:
                    state = self.tree.wait_state(live.id)
                    if state.waiting and not state.asked_back:
                        return DriveEnd.WAITING
            cap = self.caps.reached(live, result.usage)
            if cap is not None:
                result.cap, result.cap_scope = cap.note, cap.scope
                self._note(live, cap.note)
                return DriveEnd.CAP_REACHED
            result.steps = base + step
            if step > 1 and (state.pending or state.inbox):  # replies, or a wait's news
                with self.store.tx(durable=False):
                    approved = self._take_inbox(live)
                state = state.taken()
                if approved:
                    continue  # run them before the next generation (a step of its own)
            outcome, state = await self._step(live, state, result.usage)
            if isinstance(outcome, Failed):
                result.error = outcome.error
                self._report_failure(live, outcome.error)
                return DriveEnd.ERROR
            if isinstance(outcome, Waiting):
                return DriveEnd.WAITING
            if isinstance(outcome, Final):
                result.final_text = outcome.text
                return DriveEnd.DONE
            if not live.policy.goes_on(live, self.parts, outcome):
                return DriveEnd.STOPPED
        self._note(live, text_for(STEP_LIMIT_NOTE, self.parts.lang).format(n=max_steps))
        return DriveEnd.STEP_LIMIT

    def _note(self, live: LiveDialog, note: str) -> None:
        """Why the drive stops, for the model and the user."""
        stored = self.store.append_message(
            live.id, "note", {"text": note}, course=live.record.course
        )
        live.history.add(stored)
        self.bus.publish(NoteAdded(dialog_id=live.id, text=note))

    async def _step(
        self, live: LiveDialog, state: WaitState, usage: UsageTotals
    ) -> tuple[StepOutcome, WaitState]:
        """One generation and its tools; `usage` (the drive's) counts the generation."""
        did = live.id
        policy = live.policy
        offered = policy.offered_tools(live, self.parts)
        try:
            req = policy.compile_request(live, self.parts, offered)
        except PolicyError as exc:
            self.bus.publish(ErrorRaised(dialog_id=did, code=exc.code, message=str(exc)))
            self.store.record_event("error", did, {"code": exc.code, "message": str(exc)})
            return Failed(str(exc)), state
        out = GenerationOutcome()
        # The pool's retry notices name the dialog whose generation is retried (this
        # drive's task context).
        generation_caller.set(did)
        self.bus.publish(
            GenerationStarted(
                dialog_id=did, member=live.member.id, model=req.model, provider=live.member.provider
            )
        )

        async def generate() -> GenerationOutcome:
            await run_generation(
                self.providers.stream(live.member.provider, req), self.bus, did, out
            )
            return out

        try:
            if self.steps is None:
                await generate()
            else:
                key = generation_key(
                    did, live.record.course, live.history.last_id, len(live.history)
                )
                out = await self.steps.run("generation", key, generate, GENERATION_CODEC)
        except asyncio.CancelledError:
            # Interrupted mid-stream: the partial output is not a turn. Persisted as one it
            # would end the dialog's turn (a side dialog would never reply) and could
            # dispatch a half-written tellask; kept as an event, and re-run on resume.
            out.finish_reason = "cancelled"
            gen = generation_record(live, out, req.model, self.parts.prices)
            usage.add(gen)
            with self.store.tx():
                self.store.record_generation(gen, [])
                self.store.record_event(
                    "generation_cancelled", did, {"text": out.text, "thinking": out.thinking}
                )
            raise
        if crash_points.CRASH is not None:  # tests only: the model answered, nothing committed
            crash_points.CRASH.reached("generation.after")
        decision = decide_turn(live, self.parts, out, req.model)
        deferred = defers(decision)
        if deferred:  # it commits with its tools' results
            reserve_turn(self.store, decision)
        else:
            commit_turn(self.store, self.tree, live, decision, self.claims)
        usage.add(decision.generation)
        if out.error is not None:
            self.bus.publish(ErrorRaised(dialog_id=did, message=str(out.error)))
        if decision.violation is not None:
            self.bus.publish(
                ErrorRaised(
                    dialog_id=did, code=decision.violation.code, message=decision.violation.message
                )
            )
        self.bus.publish(
            GenerationEnded(
                dialog_id=did,
                finish_reason=out.finish_reason,
                input_tokens=out.input_tokens,
                output_tokens=out.output_tokens,
                tool_calls=len(decision.calls),
                cost_usd=decision.generation.cost_usd,
            )
        )
        if decision.routes or decision.final:
            self.wake.set()
        if out.error is not None:
            return Failed(str(out.error)), state
        if decision.calls:
            effects = await self.tools.run(
                live,
                decision.calls,
                offered,
                decision.generation.id,
                turn=decision if deferred else None,
            )
            if effects.waits:  # a wait opened: parked, or resolved at once by a kept event
                state = self.tree.wait_state(did).with_inbox()
            if live.course.pending is not None:
                start_new_course(self.store, self.bus, live)
        # Only this dialog's own tellasks make it wait; others only resolve waits.
        if decision.routes or state.pending:
            state = self.tree.wait_state(did)
        if state.waiting and not state.asked_back:
            return Waiting(), state
        if decision.final:
            return Final(decision.text), state
        return Continue(), state

    def _report_failure(self, live: LiveDialog, error: str) -> None:
        """A side dialog that cannot go on tells whoever waits on it, so no caller waits
        forever; the others' answers are still delivered."""
        if live.is_root:
            return
        with self.store.tx():
            self.tree.deliver_final(live.record, error, status="failed")
        self.wake.set()

    def _settle(
        self,
        live: LiveDialog,
        result: DriveResult,
        end: DriveEnd,
        *,
        said: bool = False,
    ) -> None:
        """End a drive. Lazy: if this commit is lost, the dialog is still `running` (or
        marked to drive) and recovery drives it again, which finds nothing to answer."""
        result.reason = end
        status = SETTLED_STATUS.get(end, DialogStatus.IDLE)
        with self.store.tx(durable=False):
            if end in RESUMED_ENDS:
                self.claims.settle(live.id, status, needs_drive=True)
            else:
                self.claims.settle(live.id, status)
            self.store.record_event(
                "drive_end",
                live.id,
                {"reason": str(end), "steps": result.steps, "error": result.error},
            )
        live.record.status = status
        if not said:
            self._ended(live, result, end)

    def _sync(self, live: LiveDialog, fresh: DialogRecord) -> None:
        """Inside the claim's tx, given the record as the claim left it: the history
        loaded (a new view), reloaded (another drive changed the course) or caught up
        with what others appended since an earlier drive of this process (replies,
        answers, posts)."""
        if not live.loaded or fresh.course != live.record.course:
            live.record = fresh
            live.reload_history(self.store)
            return
        live.record = fresh
        live.history.extend(self.store.messages_after(live.id, fresh.course, live.history.last_id))

    def _take_inbox(self, live: LiveDialog) -> list[ResponseRecord]:
        """Inside a tx: queued replies into history; dangling tool calls (a crash between
        a generation and its tool results) get an explicit 'interrupted' result. Returns
        the approved calls to run now (they stay queued until they ran; a node's wait
        until the dialog works that node)."""
        dangling = _unanswered_calls(live.history.messages)
        if dangling:
            recs = [
                MessageRecord(
                    dialog_id=live.id,
                    course=live.record.course,
                    kind="tool_result",
                    data=self._recorded_result(live, i, c)
                    or {
                        "call_id": c.id,
                        "name": c.name,
                        "content": INTERRUPTED_TOOL_RESULT,
                        "is_error": True,
                    },
                )
                for i, c in enumerate(dangling)
            ]
            live.history.extend(self.store.append_messages(recs))
        held: list[ResponseRecord] = []
        live.history.extend(self.tree.take_responses(live.record, held))
        # an approved call of a workspace node runs when the dialog works that node
        return [r for r in held if r.data.get("node") in (None, live.node)]

    def _recorded_result(
        self, live: LiveDialog, index: int, call: ToolCall
    ) -> dict[str, object] | None:
        """A dangling call's result as a durable step recorded it before the crash (a
        recovered drive workflow), or None: then it is answered as interrupted."""
        gen = live.history.open_generation
        if self.steps is None or gen is None:
            return None
        value = self.steps.recorded("tool", call_key(live.id, gen, index))
        if value is None:
            return None
        text, is_error = value["text"], value["is_error"]
        return {"call_id": call.id, "name": call.name, "content": text, "is_error": is_error}


def _nothing_to_answer(live: LiveDialog) -> bool:
    msgs = live.history.messages
    if not msgs:
        return True
    last = msgs[-1]
    return isinstance(last, AssistantMessage) and not last.tool_calls


def _unanswered_calls(msgs: list[ChatMessage]) -> list[ToolCall]:
    """Tool calls of the latest assistant turn that have no result yet. Only a crash
    leaves such calls; runtime notes (e.g. a failed tellask of the same message) may
    follow them, so look back to the latest assistant message, not just the last one."""
    answered: set[str] = set()
    for msg in reversed(msgs):
        if isinstance(msg, AssistantMessage):
            return [c for c in msg.tool_calls if c.id not in answered]
        if isinstance(msg, ToolResultMessage):
            answered.add(msg.call_id)
    return []
