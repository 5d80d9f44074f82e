"""The tool step of a drive: run the calls a generation requested, record their results.

Every call is first put to the dialog's turn policy (`check_call`): a refused call gets
the refusal's code and message as its result, distinct from an unknown tool. A call that
already failed twice the same way with the same arguments is refused too
(`dialogs.repeats`). Allowed
calls run through the registry (`ToolRegistry.execute`, where every failure becomes an
error result the model can read); independent calls run concurrently. The results commit
together in one lazy transaction: lost only with a power failure before the next durable
commit, which leaves the calls unanswered, as a crash during the tools does; recovery
answers them as interrupted. So a step costs one fsync. A tool may return store effects
(`tools.base.Effect`: rows to write, a wait to open, a detached side dialog to start):
they commit in that same transaction, which is then durable.

A turn policy may give the step a hook (`CommitHook`, its `before_commit`): run inside the
step's transaction just before its commit, with the results as stored, it may add the
synchronous store work the step's results call for (the work loop closes the phase a
`phase_end` ended, routes and enters the next one there: one transaction, one commit,
where a crash leaves the step and its consequences together or neither).

A generation whose calls all act only in the store was not committed before them
(`turn.defers`): it commits first in that same transaction, so a step is one
transaction, and a crash before it leaves nothing of the step. Should another process
have written a generation under the id reserved for it meanwhile (`IdTaken`: the call
keys name that id), nothing is written; the turn commits on its own and the calls run
again under keys naming the id it got — they changed nothing outside the store, and
their effects were never applied.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mindloop.dialogs import approvals
from mindloop.dialogs.claims import ClaimLost, Claims
from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.request import RequestBuilder
from mindloop.dialogs.tree import DialogTree
from mindloop.dialogs.turn import TurnDecision, commit_turn, record_turn
from mindloop.dialogs.wait_kinds import ApprovalPayload, WaitKind, WaitMode
from mindloop.durable.steps import Codec, JsonObject, Steps
from mindloop.events.bus import EventBus
from mindloop.events.types import ApprovalRequested, ToolCalled, ToolResulted
from mindloop.providers.base import ToolCall
from mindloop.store import (
    IdTaken,
    MessageRecord,
    ResponseRecord,
    Store,
    WaitStatus,
    crash_points,
)
from mindloop.tools.base import (
    Effect,
    EffectResult,
    OpenWait,
    StartDetached,
    StepLocal,
    StoreEffect,
    Tool,
    ToolContext,
    ToolOutput,
    call_key,
)
from mindloop.toolsets import REMINDER_TOOLS


class CommitHook(Protocol):
    """A turn policy's hook into its dialog's tool steps (optional: `before_commit`)."""

    def before_commit(
        self, live: LiveDialog, stored: Sequence[MessageRecord], opened: bool
    ) -> None:
        """Inside the step's transaction, its results stored (`stored`; `opened`: a call
        opened a wait), just before its commit: synchronous store work only (it must not
        suspend); what it raises rolls the step back."""


@dataclass(frozen=True)
class StepEffects:
    """What the step's tool effects changed that the drive must look at again."""

    waits: bool = False  # a wait was opened: the dialog may now be blocked


class ToolStep:
    def __init__(
        self,
        store: Store,
        bus: EventBus,
        parts: RequestBuilder,
        claims: Claims,
        tree: DialogTree,
        context_for: Callable[[LiveDialog, str], ToolContext],
        steps: Steps | None = None,
    ) -> None:
        self.tree = tree
        self.store = store
        self.bus = bus
        self.parts = parts
        self.claims = claims
        self.context_for = context_for
        # L1 of the retry ladder (agent-loop §8.2), for every dialog (`dialogs.repeats`).
        self.repeat_limit = parts.config.team.loop.retries.identical_tool_errors
        self.steps = steps  # the durable step boundary (None: tools run directly)

    async def run(
        self,
        live: LiveDialog,
        calls: Sequence[ToolCall],
        offered: Sequence[Tool],
        generation_id: int,
        turn: TurnDecision | None = None,
    ) -> StepEffects:
        """Run one generation's calls; each sees its own call key (a hash of the dialog,
        this generation's stored id and the call's index: stable across a re-run). With
        `turn` (deferred, `turn.defers`), the generation `generation_id` names commits
        with their results."""
        did = live.id
        registry = self.parts.tools
        offered_names = [t.name for t in offered]
        repeats = live.repeats
        failing = dict(repeats.failing) if turn is not None else {}  # as the step began
        # what a call leaves for the later calls of this step (one call: nothing)
        step = StepLocal() if len(calls) > 1 else None

        async def one(index: int, call: ToolCall) -> ToolOutput:
            key = call_key(did, generation_id, index)
            ctx = self.context_for(live, key)
            if step is not None:
                ctx = ctx.in_step(step)
            self.bus.publish(
                ToolCalled(dialog_id=did, call_id=call.id, name=call.name, arguments=call.arguments)
            )
            refusal = None
            tool = registry.get(call.name)
            if tool is not None:
                refusal = live.policy.check_call(live, self.parts, call.name, offered)
                if refusal is None:  # the tool is allowed: with these arguments?
                    refusal = live.policy.check_arguments(live, self.parts, call)
            if refusal is None and repeats.failing:  # a third identical failing call
                refusal = repeats.refusal(call.name, call.arguments, self.repeat_limit)
            if refusal is not None:
                out = ToolOutput(refusal.text(), is_error=True)
            elif tool is not None and (
                (live.member.approval_required and approvals.needs_approval(live.member, tool))
                or (tool.asks_approval is not None and tool.asks_approval(call.arguments))
            ):  # not run: it waits for the human's decision
                out = approvals.request(live.member.id, call, tool, ctx.call_key)
            else:  # an unknown name is answered by the registry, listing what is offered
                if crash_points.CRASH is not None:  # tests only
                    crash_points.CRASH.reached("tool.before", call.name)
                allowed = None if registry.get(call.name) else offered_names

                def execute() -> Awaitable[ToolOutput]:
                    return registry.execute(call.name, call.arguments, ctx, allowed=allowed)

                if self.steps is None:
                    out = await execute()
                else:
                    out = await self.steps.run("tool", key, execute, TOOL_CODEC)
                if crash_points.CRASH is not None:
                    crash_points.CRASH.reached("tool.after", call.name)
                if out.is_error or repeats.failing:
                    repeats.record(call.name, call.arguments, out.text, out.is_error)
            self.bus.publish(
                ToolResulted(
                    dialog_id=did,
                    call_id=call.id,
                    name=call.name,
                    text=out.text,
                    is_error=out.is_error,
                )
            )
            return out

        try:
            if len(calls) == 1:  # the common case: no task to schedule
                results = [await one(0, calls[0])]
            else:  # independent calls run concurrently
                results = list(await asyncio.gather(*(one(i, c) for i, c in enumerate(calls))))
        except (asyncio.CancelledError, Exception):
            if turn is not None:  # its usage is kept; the next drive generates again
                self._cut_off(live, turn)
            raise
        any_effects = any(r.effects for r in results)
        opened = False
        # Durable only when the tools asked for store effects: those commit with their
        # results (a crash leaves both or neither), and what they start (a wait, a side
        # dialog) must not be lost once the tool reported it.
        try:
            with self.store.tx(durable=any_effects):
                # A drive that lost its claim while the tools ran records nothing: the new
                # driver answers these calls as interrupted (tools are at-least-once), or
                # generates again if the generation was deferred with them.
                self.claims.renew(did)
                # the turn's messages go in with the results (one statement)
                turned = record_turn(self.store, turn, hold=True) if turn is not None else []
                if any_effects:  # each call's effects, in call order; they may recast it
                    for i, r in enumerate(results):
                        if r.effects:
                            results[i], started = self._apply_all(live, r)
                            opened = opened or started
                msgs = [
                    MessageRecord(
                        dialog_id=did,
                        course=live.record.course,
                        kind="tool_result",
                        data={
                            "call_id": c.id,
                            "name": c.name,
                            "content": r.text,
                            "is_error": r.is_error,
                        },
                    )
                    for c, r in zip(calls, results, strict=True)
                ]
                stored = self.store.append_messages(msgs)
                # the policy's hook, if it has one (`CommitHook`)
                hook = getattr(live.policy, "before_commit", None)
                if hook is not None:
                    hook(live, stored, opened)
        except IdTaken:  # see the module doc: nothing was written
            assert turn is not None
            repeats.failing = failing
            turn.generation.id = 0
            commit_turn(self.store, self.tree, live, turn, self.claims)
            return await self.run(live, calls, offered, turn.generation.id)
        except ClaimLost:  # another process drives the dialog: nothing more is written
            raise
        except Exception:  # a bug in an effect: rolled back; the usage is kept
            if turn is not None:
                self._cut_off(live, turn)
            raise
        # the view takes what committed (a rolled-back step leaves it as it was)
        if turned:
            live.history.extend(turned)
        live.history.extend(stored)
        if any(c.name in REMINDER_TOOLS for c in calls):
            live.reminders = self.store.reminders(did)
        return StepEffects(waits=opened)

    def _cut_off(self, live: LiveDialog, turn: TurnDecision) -> None:
        """A deferred turn whose tools did not all finish (the drive was cancelled, or a
        tool raised): its generation is kept as one cut off mid-stream is, without the
        turn (its usage counts; the step is generated again), and nothing of the calls."""
        gen = turn.generation.model_copy(update={"id": 0, "finish_reason": "cancelled"})
        calls = [c.model_dump() for c in turn.calls]
        with self.store.tx():
            self.store.record_generation(gen, [])
            self.store.record_event(
                "generation_cancelled", live.id, {"text": turn.text, "calls": calls}
            )

    def _apply_all(self, live: LiveDialog, out: ToolOutput) -> tuple[ToolOutput, bool]:
        """Inside the results' transaction: carry out one call's effects in order. A store
        effect may recast the result (`EffectResult`); after an error one, the call's
        later effects are skipped (it wrote nothing, and what follows depended on it).
        Returns the result and whether a wait was opened."""
        opened = False
        for effect in out.effects:
            recast = self._apply(live, effect)
            if recast is not None:
                out = ToolOutput(recast.text, is_error=recast.is_error, effects=out.effects)
                if recast.is_error:
                    break
            opened = opened or isinstance(effect, OpenWait)
        return out, opened

    def _apply(self, live: LiveDialog, effect: Effect) -> EffectResult | None:
        """Inside the results' transaction: carry out one effect."""
        match effect:
            case StoreEffect(apply=apply):
                return apply(self.store)
            case OpenWait(
                kind=kind,
                key=key,
                payload=payload,
                due_at=due_at,
                wait_id=wid,
                mode=mode,
                blocks=blocks,
            ):
                rec = self.tree.waits.open(
                    live.id,
                    WaitKind(kind),
                    key,
                    payload,
                    due_at=due_at,
                    wait_id=wid,
                    node=live.node,
                    mode=WaitMode(mode),
                    blocks=blocks,
                    task_path=live.record.task_path,
                )
                if rec.node is not None and rec.status is WaitStatus.OPEN:
                    live.node_waited = rec.id  # the node waits now (its policy may stop)
                if rec.kind == WaitKind.APPROVAL:
                    p = ApprovalPayload.model_validate(rec.payload)
                    self.bus.publish(
                        ApprovalRequested(
                            dialog_id=live.id,
                            approval_id=rec.id,
                            member=p.member,
                            tool=p.tool,
                            arguments=p.arguments,
                            args_digest=p.args_digest,
                        )
                    )
            case StartDetached(
                member=member, message=message, sink=sink, payload=payload, side_id=side_id
            ):
                self.tree.start_detached(
                    live.record, member, message, sink=sink, payload=payload, side_id=side_id
                )
        return None

    async def run_approved(self, live: LiveDialog, items: Sequence[ResponseRecord]) -> StepEffects:
        """Run the calls the human approved (queued in the dialog's inbox by
        `Approvals.decide`), each exactly as approved — the call its approval record
        allows, checked by digest — with its original call key. Their results reach the
        model as notes, committed with the inbox items marked done and the tools' effects
        (durably): a crash before that commit runs them again (at-least-once, keyed),
        never twice after."""
        did = live.id
        ran: list[tuple[dict[str, Any], ToolOutput | None]] = []  # None: refused (digest)
        for item in items:
            d = item.data
            allowed = approvals.approved_digest(self.store.get_wait(d["wait_id"]))
            if approvals.args_digest(d["tool"], d["arguments"]) != allowed:
                ran.append((d, None))
                continue
            ctx = dataclasses.replace(
                self.context_for(live, d["call_key"]), approval_id=d["wait_id"]
            )
            self.bus.publish(
                ToolCalled(
                    dialog_id=did, call_id=d["call_id"], name=d["tool"], arguments=d["arguments"]
                )
            )
            if crash_points.CRASH is not None:  # tests only
                crash_points.CRASH.reached("tool.before", d["tool"])
            out = await self._execute_approved(d, ctx)
            if crash_points.CRASH is not None:
                crash_points.CRASH.reached("tool.after", d["tool"])
            self.bus.publish(
                ToolResulted(
                    dialog_id=did,
                    call_id=d["call_id"],
                    name=d["tool"],
                    text=out.text,
                    is_error=out.is_error,
                )
            )
            ran.append((d, out))
        opened = False
        with self.store.tx():
            self.claims.renew(did)
            notes = []
            for d, result in ran:
                if result is None:
                    text = approvals.tampered_note(d)
                else:
                    if result.effects:  # they commit with the note; they may recast it
                        result, started = self._apply_all(live, result)
                        opened = opened or started
                    text = approvals.approved_note(d, result.text, result.is_error)
                notes.append(
                    MessageRecord(
                        dialog_id=did,
                        course=live.record.course,
                        kind="note",
                        data={"text": text, "call_id": d["call_id"], "wait_id": d["wait_id"]},
                    )
                )
            stored = self.store.append_messages(notes)
            self.store.mark_delivered([i.id for i in items])
            hook = getattr(live.policy, "before_commit", None)  # as in `run`
            if hook is not None:
                hook(live, stored, opened)
        live.history.extend(stored)
        return StepEffects(waits=opened)

    async def _execute_approved(self, d: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """An approved call through the registry — as a durable step under its call key
        when the drive runs as a workflow, like every other call."""

        def execute() -> Awaitable[ToolOutput]:
            return self.parts.tools.execute(d["tool"], d["arguments"], ctx)

        if self.steps is None:
            return await execute()
        return await self.steps.run("tool", d["call_key"], execute, TOOL_CODEC)


def _encode_output(out: ToolOutput) -> JsonObject:
    # Store effects are code, not data: a result that has them runs again on replay
    # (its effects are keyed by the call key and commit with the result).
    return {"text": out.text, "is_error": out.is_error, "rerun": bool(out.effects)}


def _decode_output(data: JsonObject) -> ToolOutput:
    return ToolOutput(data["text"], is_error=data["is_error"])


# A tool call's result as a durable step records it (see `mindloop.durable`).
TOOL_CODEC = Codec(_encode_output, _decode_output)
