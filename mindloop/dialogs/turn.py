"""One generation's turn: decide what it does (pure), then commit it (one transaction).

`decide_turn` reads the generation's output and the dialog's policy and returns a
`TurnDecision`: the records to persist, the tellask routes to carry out, whether it is a
final answer, and whether its commit must be durable. It touches nothing. `commit_turn`
then persists the generation, carries out its tellasks (side dialogs, questions, failure
notes) and — for a final answer — delivers it to whoever waits, all in one transaction:
a crash leaves either none of it or all of it (`dialogs/routing.py` separates deciding
from doing the same way).

A turn that only calls tools acting in the store (`Tool.store_only`) and does nothing
else (`defers`) is not committed before its tools run: it commits in the tool step's
transaction, with their results and store effects (`record_turn`) — a step is then one
transaction (agent-loop §2 S1). Nothing outside the store saw it before that commit, so
a crash before it leaves no trace of the step, and the next drive generates again from
the same history (S4). Its tools' call keys name the generation by the id reserved for
it (`Store.reserve_generation_id`), the id it is then stored under.

A failed generation (the provider gave up, possibly mid-stream) is never a turn: what it
streamed is kept as a `generation_failed` event, and the next drive runs the generation
again from the same history.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from mindloop.dialogs.claims import Claims
from mindloop.dialogs.generation import GenerationOutcome
from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.policy import Refusal
from mindloop.dialogs.request import RequestBuilder
from mindloop.dialogs.routing import Route, RouteKind, route_message
from mindloop.dialogs.tellask import TellaskCall, parse_message
from mindloop.dialogs.tree import DialogTree, Dispatch
from mindloop.providers.base import ToolCall
from mindloop.providers.pricing import PriceTable
from mindloop.store import GenerationRecord, MessageRecord, Store
from mindloop.tools.registry import ToolRegistry


@dataclass
class TurnDecision:
    text: str  # what the turn says (a policy's violation note replaces the output)
    calls: list[ToolCall]  # tool calls to run after the commit
    tellasks: list[TellaskCall]
    routes: list[Route]
    final: bool  # a final answer: delivered to whoever waits, in the same commit
    durable: bool  # the commit precedes an effect outside the store (see below)
    generation: GenerationRecord
    messages: list[MessageRecord]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # stored events
    violation: Refusal | None = None  # the policy refused the output


def decide_turn(
    live: LiveDialog, parts: RequestBuilder, out: GenerationOutcome, model: str
) -> TurnDecision:
    rec = live.record
    did, course = rec.id, rec.course
    gen = generation_record(live, out, model, parts.prices)
    if out.error is not None:
        partial = {"text": out.text, "thinking": out.thinking, "calls": len(out.calls)}
        return TurnDecision(
            text="",
            calls=[],
            tellasks=[],
            routes=[],
            final=False,
            durable=False,
            generation=gen,
            messages=[],
            events=[("generation_failed", {"error": str(out.error), "partial": partial})],
        )
    text, calls = out.text, list(out.calls)
    tellasks = parse_message(text).calls if text else []
    refusal = live.policy.check_output(live, parts, text, calls, tellasks)
    assistant_data: dict[str, Any] = {"text": text}
    events: list[tuple[str, dict[str, Any]]] = []
    violation = None
    if refusal is not None:  # the output is replaced by the policy's note; nothing runs
        violation = refusal.message
        assistant_data = {
            "text": violation,
            "rejected_output": text,
            "rejected_calls": [c.model_dump() for c in calls],
        }
        events.append(("error", {"code": refusal.code, "message": violation}))
        text, calls, tellasks = violation, [], []
    routes: list[Route] = []
    if tellasks:
        routes = route_message(
            tellasks,
            caller_member=rec.member,
            caller_is_root=rec.kind == "root",
            members=list(parts.config.team.members),
            fbr_effort=live.member.fbr_effort,
        )
        routes = live.policy.check_routes(live, parts, routes)
    final = not calls and not tellasks
    msgs: list[MessageRecord] = []
    if out.thinking:
        msgs.append(
            MessageRecord(
                dialog_id=did, course=course, kind="thinking", data={"text": out.thinking}
            )
        )
    msgs.append(MessageRecord(dialog_id=did, course=course, kind="assistant", data=assistant_data))
    for call in calls:
        msgs.append(
            MessageRecord(
                dialog_id=did,
                course=course,
                kind="tool_call",
                data={"id": call.id, "name": call.name, "arguments": call.arguments},
            )
        )
    return TurnDecision(
        text=text,
        calls=calls,
        tellasks=tellasks,
        routes=routes,
        final=final,
        durable=has_outside_effect(rec.kind == "root", calls, final, routes, parts.tools),
        generation=gen,
        messages=msgs,
        events=events,
        violation=refusal,
    )


def commit_turn(
    store: Store, tree: DialogTree, live: LiveDialog, d: TurnDecision, claims: Claims
) -> Dispatch:
    """Persist the decided turn and carry it out, in one transaction — which also renews
    the drive's claim, and rolls back if the claim was lost (`ClaimLost`)."""
    rec = live.record
    dispatched = Dispatch()
    with store.tx(durable=d.durable):
        claims.renew(rec.id)
        live.history.extend(record_turn(store, d))
        for type_, data in d.events:
            store.record_event(type_, rec.id, data)
        if d.routes:
            dispatched = tree.dispatch(rec, d.tellasks, d.routes, fbr_effort=live.member.fbr_effort)
            live.history.extend(dispatched.notes)
        if d.final:  # a root answers tellask-backs of its side dialogs too
            tree.deliver_final(rec, d.text)
    return dispatched


def defers(d: TurnDecision) -> bool:
    """Whether the turn may commit with its tools' results (see the module doc): it
    calls tools, none of which acts outside the store (`has_outside_effect`), and
    starts, answers and records nothing else."""
    return bool(d.calls) and not d.durable and not d.tellasks and not d.events


def reserve_turn(store: Store, d: TurnDecision) -> None:
    """Give a deferred turn's generation the id it will be stored under, which its tool
    calls' keys name (`call_key`)."""
    d.generation.id = store.reserve_generation_id()


def record_turn(store: Store, d: TurnDecision, *, hold: bool = False) -> list[MessageRecord]:
    """Inside a transaction: write the turn's generation (under its reserved id, if it
    has one: `IdTaken` if another process took it) and messages; the stored messages
    (with `hold`, the list they go to when they are written with the next messages the
    transaction appends: `Store.hold_messages`)."""
    d.generation, stored = store.record_generation(d.generation, d.messages, hold=hold)
    return stored


def generation_record(
    live: LiveDialog, out: GenerationOutcome, model: str, prices: PriceTable
) -> GenerationRecord:
    provider = live.member.provider
    return GenerationRecord(
        dialog_id=live.record.id,
        provider=provider,
        model=model,
        started_at=out.started_at,
        ended_at=out.ended_at or time.time(),
        input_tokens=out.input_tokens,
        output_tokens=out.output_tokens,
        finish_reason=out.finish_reason,
        error=str(out.error) if out.error else None,
        cost_usd=prices.cost(provider, model, out.input_tokens, out.output_tokens),
    )


def has_outside_effect(
    is_root: bool,
    calls: list[ToolCall],
    final: bool,
    routes: list[Route],
    tools: ToolRegistry,
) -> bool:
    """Whether a generation's commit precedes an effect outside the store: tools about to
    run that act outside it (not `Tool.store_only`: their store effects commit with their
    results, durably), a question put to the human, or a root's final answer reported to
    the user. Only those commits fsync; every other commit is lazy and becomes durable with
    the next fsync (the WAL is replayed as an ordered prefix). A power failure can so only
    lose a suffix that nothing outside saw: generations that recovery runs again, as if
    they had been in flight. (A call naming no tool runs nothing.)"""
    if final and is_root:
        return True
    for call in calls:
        tool = tools.get(call.name)
        if tool is not None and not tool.store_only:
            return True
    return any(r.kind is RouteKind.HUMAN for r in routes)
