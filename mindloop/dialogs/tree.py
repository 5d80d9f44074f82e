"""Dialog-tree state changes: dispatching tellasks, delivering replies, Q4H, recovery.

Every method that changes more than one record expects to run inside the caller's
`store.tx()` (they also work standalone: each store call then commits by itself, which
the engine never relies on). That is what makes a crash at any instant safe: a reply is
recorded, its pending record removed and its caller marked drivable together, or not at
all.

Who waits on whom is derived from `pending_tellasks`: a row (caller → side) means the
caller waits for the side's answer. A side dialog's final answer goes to every caller
waiting on it; a tellask-back (side → its caller) is answered first and only to the asker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mindloop.dialogs import formats
from mindloop.dialogs.approvals import APPROVED
from mindloop.dialogs.fbr import fbr_request_message
from mindloop.dialogs.routing import Route, RouteKind
from mindloop.dialogs.tellask.grammar import parse_q4h_fields
from mindloop.dialogs.wait_kinds import (
    Q4hAnswered,
    Resolution,
    SubagentPayload,
    TellaskReply,
    UserInputPayload,
    WaitKind,
    WaitOutcome,
)
from mindloop.dialogs.waits import NOTE, Waits
from mindloop.errors import MindloopError
from mindloop.events.bus import EventBus
from mindloop.events.types import (
    DialogCreated,
    ErrorRaised,
    QuestionAnswered,
    QuestionAsked,
    TellaskCalled,
    TellaskResponded,
)
from mindloop.i18n import Lang
from mindloop.store import (
    DialogRecord,
    DialogStatus,
    MessageKind,
    MessageRecord,
    PendingTellask,
    QuestionRecord,
    ResponseRecord,
    Store,
    WaitRecord,
    WaitStatus,
    new_id,
)
from mindloop.store import waits as wait_rows

# The inbox item kind of a resumed session's new assignment (see `DialogTree._resume`).
ASSIGNMENT = "assignment"
# The inbox item kind of a user message posted while a drive holds the dialog.
POST = "post"
# Inbox items that are not replies, and the history record each becomes.
INBOX_KINDS: dict[str, MessageKind] = {ASSIGNMENT: "user", NOTE: "note", POST: "user"}
# Pending kinds whose side dialog can be given a further assignment while it works.
RESUMABLE = frozenset({"session", "fbr"})


@dataclass(frozen=True)
class DetachedReply:
    """What a detached side dialog's sink receives (in the reply's transaction)."""

    side_id: str
    caller_id: str
    member: str
    status: str  # completed | failed
    text: str
    payload: dict[str, Any]


# A reply sink: called with the store inside the reply's transaction (so what it writes
# commits with the delivery, exactly once).
Sink = Callable[[Store, DetachedReply], None]


@dataclass(frozen=True)
class WaitState:
    """What a dialog waits on: tellasks it made that are unanswered, tellask-backs its
    side dialogs ask it, its open questions for the human, and its open blocking wait
    records (`waits.py`). The drive rule is `statements._blocked` as a query."""

    pending: int = 0
    asked_back: int = 0
    questions: int = 0
    waits: int = 0
    inbox: bool = False  # news may be queued (a wait opened this step resolved at once)

    def with_inbox(self) -> WaitState:
        return replace(self, inbox=True)

    def taken(self) -> WaitState:
        return replace(self, inbox=False) if self.inbox else self

    @property
    def waiting(self) -> bool:
        return bool(self.pending or self.questions or self.waits)

    @property
    def drivable(self) -> bool:
        return not self.questions and not self.waits and (not self.pending or self.asked_back > 0)


@dataclass
class Dispatch:
    """What carrying out one message's tellasks produced."""

    notes: list[MessageRecord] = field(default_factory=list)  # appended to the caller
    created: list[DialogRecord] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    questions: list[QuestionRecord] = field(default_factory=list)
    failed: int = 0


class DialogTree:
    def __init__(
        self,
        store: Store,
        bus: EventBus,
        lang: Lang = "en",
        sinks: Mapping[str, Sink] | None = None,
        waits: Waits | None = None,
    ) -> None:
        self.store = store
        self.bus = bus
        self.waits = waits or Waits(store, bus)
        # What timing out means for the kinds whose wait stands for a tree object.
        self.waits.expire_hooks[WaitKind.DETACHED] = self._detached_timed_out
        self.waits.expire_hooks[WaitKind.USER_INPUT] = self._assume_default
        self.sinks: dict[str, Sink] = dict(sinks or {})
        # The work language of the texts the tree writes into a new dialog (the FBR
        # request header); what it writes is persisted, so it stays as dispatched.
        self.lang: Lang = lang

    # ------------------------------------------------------------------ queries

    def wait_state(self, dialog_id: str) -> WaitState:
        return WaitState(*self.store.wait_state(dialog_id))

    def can_drive(self, dialog_id: str) -> bool:
        """A dialog with anything pending is not driven, except to answer a tellask-back
        from one of its own side dialogs (that is answered in-line)."""
        return self.wait_state(dialog_id).drivable

    # ------------------------------------------------------------------ dispatch

    def dispatch(
        self,
        caller: DialogRecord,
        calls: list[Any],
        routes: list[Route],
        *,
        fbr_effort: int,
    ) -> Dispatch:
        out = Dispatch()
        by_index = {c.index: c for c in calls}
        for route in routes:
            call = by_index[route.call_index]
            if route.kind is RouteKind.FAIL:
                out.failed += 1
                out.notes.append(
                    self._note(
                        caller,
                        "tellask_result",
                        formats.failed_tellask_message(
                            headline=call.headline, message=route.message, code=route.code
                        ),
                        status="failed",
                        code=route.code,
                        call_id=call.call_id,
                    )
                )
                self.bus.publish(
                    ErrorRaised(dialog_id=caller.id, code=route.code, message=route.message)
                )
                continue
            if route.message:
                out.notes.append(self._note(caller, "note", route.message, call_id=call.call_id))
            if route.kind is RouteKind.HUMAN:
                out.questions.append(self._ask_human(caller, call))
            elif route.kind is RouteKind.TELLASK_BACK:
                self._tellask_back(caller, call)
            elif route.kind is RouteKind.FBR:
                self._fbr(caller, call, route, fbr_effort, out)
            else:
                for target in route.targets:
                    self._teammate(caller, call, route, target, out)
        return out

    def _note(
        self, caller: DialogRecord, kind: MessageKind, text: str, **data: Any
    ) -> MessageRecord:
        rec = MessageRecord(
            dialog_id=caller.id, course=caller.course, kind=kind, data={"text": text, **data}
        )
        return self.store.append_messages([rec])[0]

    def _ask_human(self, caller: DialogRecord, call: Any) -> QuestionRecord:
        """A `!?@human` question; its body's `Options:` and `Default:` lines (the tellask
        grammar's `Q4H_FIELD_LABELS`) set its wait's options and default assumption."""
        options, default = parse_q4h_fields(call.body)
        return self.ask(
            caller,
            call.headline.strip(),
            call.body.strip(),
            call_id=call.call_id,
            options=options,
            default_assumption=default,
        )

    def ask(
        self,
        caller: DialogRecord,
        headline: str,
        body: str = "",
        *,
        call_id: str | None = None,
        options: Sequence[str] = (),
        default_assumption: str | None = None,
    ) -> QuestionRecord:
        """Put a question to the human for `caller` (inside the caller's transaction): the
        question parks the dialog until answered; its WAIT_USER_INPUT record carries the
        timeout policy — after `loop.waits.user_input.timeout` the stated default is
        assumed (the dialog reads so, the user is told), or without one the human is
        reminded — and closes with the answer."""
        q = QuestionRecord(
            id=new_id("q4h-"),
            dialog_id=caller.id,
            root_id=caller.root_id,
            headline=headline,
            body=body,
            call_id=call_id or new_id(),
            course=caller.course,
        )
        q = self.store.add_question(q)
        question = q.headline + (f"\n{q.body}" if q.body else "")
        payload = UserInputPayload(
            q4h_id=q.id,
            question=question,
            options=list(options),
            default_assumption=default_assumption,
        )
        self.waits.open(caller.id, WaitKind.USER_INPUT, q.id, payload, task_path=caller.task_path)
        self.bus.publish(
            QuestionAsked(dialog_id=caller.id, question_id=q.id, headline=q.headline, body=q.body)
        )
        return q

    def _create_side(
        self,
        caller: DialogRecord,
        member: str,
        kind: str,
        first_message: str,
        assignment: dict[str, Any],
        session_key: str | None = None,
        *,
        side_id: str | None = None,
    ) -> DialogRecord:
        sid = side_id or new_id("s" if kind == "side" else "f")
        rec = DialogRecord(
            id=sid,
            root_id=caller.root_id,
            parent_id=caller.id,
            member=member,
            task_path=caller.task_path,
            kind=kind,  # type: ignore[arg-type]
            session_key=session_key,
            assignment=assignment,
            needs_drive=True,
        )
        rec = self.store.create_dialog(rec)
        self.store.append_message(sid, "user", {"text": first_message}, course=1)
        if session_key:
            self.store.register_session(caller.root_id, session_key, sid)
        self.bus.publish(
            DialogCreated(
                dialog_id=sid, member=member, kind=kind, parent_id=caller.id, session=session_key
            )
        )
        return rec

    def start_detached(
        self,
        caller: DialogRecord,
        member: str,
        message: str,
        *,
        sink: str,
        payload: dict[str, Any] | None = None,
        headline: str = "",
        side_id: str | None = None,
    ) -> DialogRecord:
        """Open a detached side dialog (inside the caller's transaction): the caller does
        not wait for it; its final reply goes to the sink `sink` (called in the reply's
        transaction) and leaves a note in the caller's history. A non-blocking wait record
        on the caller binds them, so the reply is delivered exactly once."""
        if sink not in self.sinks:
            known = ", ".join(sorted(self.sinks)) or "(none)"
            raise MindloopError(f"no reply sink {sink!r} is registered (sinks: {known})")
        side_id = side_id or new_id("s")
        binding = payload or {}
        wait = self.waits.open(
            caller.id,
            WaitKind.DETACHED,
            side_id,
            SubagentPayload(
                member=member,
                sink=sink,
                node_id=binding.get("node_id"),
                session_slug=binding.get("session_slug"),
            ),
            node=binding.get("node_id"),
            task_path=caller.task_path,
        )
        assignment = {
            "headline": headline or message.strip().splitlines()[0][:200],
            "body": "",
            "caller_id": caller.id,
            "call_id": wait.id,
            "from_member": caller.member,
            "collective": None,
            "detached": {"sink": sink, "payload": payload or {}, "wait_id": wait.id},
        }
        return self._create_side(caller, member, "side", message, assignment, side_id=side_id)

    def _deliver_detached(
        self,
        dialog: DialogRecord,
        binding: dict[str, Any],
        text: str,
        status: str,
        timeout: Resolution | None = None,
    ) -> WaitRecord | None:
        sink_reply = DetachedReply(
            side_id=dialog.id,
            caller_id=(dialog.assignment or {}).get("caller_id", ""),
            member=dialog.member,
            status=status,
            text=text,
            payload=binding.get("payload", {}),
        )
        note = formats.detached_reply_message(
            responder=dialog.member, side_id=dialog.id, status=status, text=text
        )
        reply = TellaskReply(
            side_id=dialog.id, status="failed" if status == "failed" else "completed", response=text
        )
        res = timeout or Resolution(
            outcome=reply.outcome(), event=reply.model_dump(mode="json"), by=dialog.member
        )
        wait_status = WaitStatus.RESOLVED if timeout is None else WaitStatus.EXPIRED
        with self.store.tx():
            done = self.waits.resolve(binding["wait_id"], res, status=wait_status, note=note)
            if done is None:  # delivered before (a later answer of the same dialog)
                return None
            sink = self.sinks.get(binding["sink"])
            if sink is None:
                raise MindloopError(
                    f"dialog {dialog.id}: its reply sink {binding['sink']!r} is not registered "
                    "in this process"
                )
            sink(self.store, sink_reply)
        return done

    def _detached_timed_out(self, rec: WaitRecord, res: Resolution) -> WaitRecord | None:
        """A node's side dialog passed its active-time or wall-clock limit: its sink is
        told it failed (in the wait's transaction) and the side dialog is cancelled —
        not driven again, its questions withdrawn; an answer it still gives is dropped
        (its wait is closed)."""
        side = self.store.get_dialog(rec.key)
        binding = (side.assignment or {}).get("detached") or {}
        why = str(res.event.get("why", "timed out"))
        text = f"[mindloop] cancelled: {why} (the side dialog's time limit)"
        with self.store.tx():
            done = self._deliver_detached(side, binding, text, "failed", timeout=res)
            if done is None:
                return None
            self._stop_side(side, res, text)
        return done

    def cancel_detached(self, rec: WaitRecord, why: str) -> WaitRecord | None:
        """A node's side dialog whose work is no longer wanted (its node was cancelled or
        failed meanwhile): its wait closes as cancelled, with a note to the dialog that
        dispatched it, and the side dialog stops — not driven again, its questions
        withdrawn; an answer it still gives is dropped. The node is not moved (it moved
        already). None if the wait was closed meanwhile."""
        side = self.store.get_dialog(rec.key)
        res = Resolution(outcome=WaitOutcome.CANCELLED, event={"why": why}, by="runtime")
        note = (
            f"[mindloop] the side dialog {side.id} (@{side.member}) of node {rec.node} was "
            f"cancelled: {why}; a reply it still gives is dropped"
        )
        with self.store.tx():
            done = self.waits.resolve(rec.id, res, status=WaitStatus.CANCELLED, note=note)
            if done is None:
                return None
            self._stop_side(side, res, f"[mindloop] cancelled: {why}")
        return done

    def cancel_node_dispatches(self, task_path: str, node_id: str, why: str) -> list[str]:
        """`cancel_detached` for every open dispatch of one node; the side dialogs stopped."""
        stopped = []
        for rec in wait_rows.open_waits_of_node(self.store, WaitKind.DETACHED, task_path, node_id):
            if self.cancel_detached(rec, why) is not None:
                stopped.append(rec.key)
        return stopped

    def _stop_side(self, side: DialogRecord, res: Resolution, text: str) -> None:
        """Inside the caller's transaction: the side dialog is driven no more (its
        questions and their waits withdrawn), and says why."""
        self.store.discard_questions(side.id)
        wait_rows.cancel_waits_of(
            self.store, side.id, WaitKind.USER_INPUT, res.model_dump(mode="json")
        )
        self.store.update_dialog(side.id, needs_drive=False, status=DialogStatus.ERROR)
        self.store.append_message(side.id, "note", {"text": text}, course=side.course)

    def _assume_default(self, rec: WaitRecord, res: Resolution) -> WaitRecord | None:
        """A question unanswered past its timeout, with a stated default: the default is
        the answer (the dialog reads that it was assumed; the user is told by the event)."""
        p = UserInputPayload.model_validate(rec.payload)
        why = str(res.event.get("why", ""))
        with self.store.tx():
            done = self.waits.resolve(
                rec.id, res, status=WaitStatus.EXPIRED, wake=False, detail=f"{p.q4h_id}: {why}"
            )
            if done is None:
                return None
            q = self.store.get_question(p.q4h_id)
            if q.status == "open":
                answer = (
                    "[mindloop] No answer came in time; the default stated with the question "
                    f"is assumed: {p.default_assumption}"
                )
                self._answer(q, answer)
        return done

    def _wait_for(self, caller: DialogRecord, side_id: str, call: Any, call_type: str) -> None:
        self.store.add_pending(
            PendingTellask(
                caller_id=caller.id,
                side_id=side_id,
                call_id=call.call_id,
                call_type=call_type,
                headline=call.headline.strip(),
            )
        )
        self.bus.publish(
            TellaskCalled(
                dialog_id=caller.id,
                side_id=side_id,
                call_type=call_type,
                headline=call.headline.strip(),
            )
        )

    def _assignment(self, caller: DialogRecord, call: Any, targets: list[str]) -> dict[str, Any]:
        return {
            "headline": call.headline,
            "body": call.body,
            "caller_id": caller.id,
            "call_id": call.call_id,
            "from_member": caller.member,
            "collective": targets if len(targets) > 1 else None,
        }

    def _teammate(
        self, caller: DialogRecord, call: Any, route: Route, target: str, out: Dispatch
    ) -> None:
        message = formats.assignment_message(
            to=target,
            sender=caller.member,
            headline=call.headline,
            body=call.body,
            collective=route.targets if route.collective else None,
        )
        assignment = self._assignment(caller, call, route.targets)
        if route.kind is RouteKind.SESSION:
            key = f"{target}!{route.session}"
            existing = self.store.lookup_session(caller.root_id, key)
            if existing is not None:
                self._resume(caller, existing, message, assignment, call, "session", out)
                return
            side = self._create_side(caller, target, "side", message, assignment, session_key=key)
            self._wait_for(caller, side.id, call, "session")
        else:
            side = self._create_side(caller, target, "side", message, assignment)
            self._wait_for(caller, side.id, call, "fresh")
        out.created.append(side)

    def _resume(
        self,
        caller: DialogRecord,
        side_id: str,
        message: str,
        assignment: dict[str, Any],
        call: Any,
        call_type: str,
        out: Dispatch,
    ) -> None:
        """A session hit: queue the new assignment in the side dialog's inbox and re-point
        the reply to this caller. Two calls to the same session in one message create one
        side dialog (the second finds the first's registration) and one pending record.

        The assignment is queued, not appended: the side dialog may be generating right
        now (in this or another process), and what arrives from others enters a history
        only at a drive's step boundary (`take_responses`). The answer being generated
        then goes only to the callers whose assignment it saw (`deliver_final`); this one
        gets the further generation its queued assignment asks for."""
        self.store.add_response(
            ResponseRecord(
                caller_id=side_id,
                side_id=caller.id,
                call_id=call.call_id,
                data={"kind": ASSIGNMENT, "text": message},
            )
        )
        self.store.update_dialog(side_id, assignment=assignment, needs_drive=True)
        already = any(p.side_id == side_id for p in self.store.pending_for(caller.id))
        if not already:
            self._wait_for(caller, side_id, call, call_type)
        out.resumed.append(side_id)

    def _fbr(
        self, caller: DialogRecord, call: Any, route: Route, effort: int, out: Dispatch
    ) -> None:
        message = fbr_request_message(call.body, call.headline, self.lang)
        assignment = self._assignment(caller, call, [caller.member]) | {"fbr": True}
        if route.session:
            keys = (
                [f"{caller.member}!{route.session}"]
                if effort == 1
                else [f"{caller.member}!{route.session}.fbr{i}" for i in range(1, effort + 1)]
            )
            for key in keys:
                existing = self.store.lookup_session(caller.root_id, key)
                if existing is not None:
                    self._resume(caller, existing, message, assignment, call, "fbr", out)
                else:
                    side = self._create_side(caller, caller.member, "fbr", message, assignment, key)
                    self._wait_for(caller, side.id, call, "fbr")
                    out.created.append(side)
            return
        for _ in range(effort):
            side = self._create_side(caller, caller.member, "fbr", message, assignment)
            self._wait_for(caller, side.id, call, "fbr")
            out.created.append(side)

    def _tellask_back(self, asker: DialogRecord, call: Any) -> None:
        assignment = asker.assignment or {}
        sup_id = assignment["caller_id"]
        sup = self.store.get_dialog(sup_id)
        text = formats.tellask_back_message(
            sup=sup.member,
            sub=asker.member,
            assignment_headline=assignment.get("headline", ""),
            request=(call.body or call.headline).strip(),
        )
        self.store.append_message(sup_id, "user", {"text": text}, course=sup.course)
        self.store.update_dialog(sup_id, needs_drive=True)
        self._wait_for(asker, sup_id, call, "tellask_back")

    # ------------------------------------------------------------------ replies

    def deliver_final(
        self, dialog: DialogRecord, text: str, *, status: str = "completed"
    ) -> list[str]:
        """Deliver a final answer (or, with status="failed", the reason it failed) to
        whoever waits on this dialog; returns the callers revived (those with nothing
        else pending)."""
        inbound = self.store.pending_by_side(dialog.id)
        backs = [p for p in inbound if p.call_type == "tellask_back"]
        detached = (dialog.assignment or {}).get("detached")
        if detached and not backs:
            self._deliver_detached(dialog, detached, text, status)
            return []
        targets = backs or inbound
        if not backs and any(p.call_type in RESUMABLE for p in targets):
            # An assignment still in the inbox was not seen by the answer being delivered.
            unseen = {
                r.call_id
                for r in self.store.undelivered_responses(dialog.id)
                if r.data.get("kind") == ASSIGNMENT
            }
            targets = [p for p in targets if p.call_id not in unseen]
        revived: list[str] = []
        for p in targets:
            self.store.remove_pending(p.id)
            self.store.add_response(
                ResponseRecord(
                    caller_id=p.caller_id,
                    side_id=dialog.id,
                    call_id=p.call_id,
                    data={
                        "kind": p.call_type,
                        "status": status,
                        "text": text,
                        "responder": dialog.member,
                        "headline": p.headline,
                    },
                )
            )
            self.bus.publish(
                TellaskResponded(dialog_id=p.caller_id, side_id=dialog.id, call_type=p.call_type)
            )
            caller = self.wait_state(p.caller_id)
            if not caller.waiting or caller.asked_back:
                self.store.update_dialog(p.caller_id, needs_drive=True)
                revived.append(p.caller_id)
        return revived

    def queue_post(self, dialog: DialogRecord, text: str) -> MessageRecord:
        """Inside a tx: a user message for a dialog a drive holds (here or in another
        process) waits in its inbox. The generation in flight never saw it: stored now, it
        would come before that generation's turn and look answered. The drive takes it at
        a step boundary (`take_responses`), after the turn. Returns the message as it will
        be stored (id 0 until then)."""
        self.store.add_response(
            ResponseRecord(
                caller_id=dialog.id,
                side_id=dialog.id,
                call_id=new_id(),
                data={"kind": POST, "text": text},
            )
        )
        return MessageRecord(
            dialog_id=dialog.id, course=dialog.course, kind="user", data={"text": text}
        )

    def take_responses(
        self, dialog: DialogRecord, held: list[ResponseRecord] | None = None
    ) -> list[MessageRecord]:
        """Turn queued replies into history records (in completion order), once. Approved
        calls waiting to run are not taken: they stay queued until the drive that runs
        them records their results (`held` receives them)."""
        queued = self.store.undelivered_responses(dialog.id)
        if not queued:
            return []
        msgs = []
        taken = []
        for r in queued:
            d = r.data
            if d.get("kind") == APPROVED:
                if held is not None:
                    held.append(r)
                continue
            taken.append(r.id)
            if d.get("kind") in INBOX_KINDS:  # an assignment, a post, or a runtime note
                msgs.append(
                    MessageRecord(
                        dialog_id=dialog.id,
                        course=dialog.course,
                        kind=INBOX_KINDS[d["kind"]],
                        data={"text": d["text"], "call_id": r.call_id, "response_id": r.id},
                    )
                )
                continue
            if d.get("status") == "failed":
                text = formats.failed_response_message(
                    responder=d["responder"], error=d["text"], headline=d.get("headline", "")
                )
            elif d.get("kind") == "fbr":
                text = formats.fbr_response_message(d["text"])
            elif d.get("kind") == "tellask_back":
                text = formats.tellask_back_answer(responder=d["responder"], answer=d["text"])
            else:
                text = formats.response_message(
                    requester=dialog.member,
                    responder=d["responder"],
                    response=d["text"],
                    headline=d.get("headline", ""),
                )
            msgs.append(
                MessageRecord(
                    dialog_id=dialog.id,
                    course=dialog.course,
                    kind="tellask_result",
                    data={
                        "text": text,
                        "status": d.get("status", "completed"),
                        "side_id": r.side_id,
                        "call_id": r.call_id,
                        "response_id": r.id,
                    },
                )
            )
        stored = self.store.append_messages(msgs)
        self.store.mark_delivered(taken)
        return stored

    # ------------------------------------------------------------------ Q4H

    def answer_question(self, question_id: str, answer: str) -> QuestionRecord:
        q = self.store.get_question(question_id)
        if q.status != "open":
            from mindloop.errors import NotFoundError

            raise NotFoundError(f"question {question_id} is {q.status}, not open")
        self._answer(q, answer)
        # Its timeout record closes with it (Q4H_ANSWERED); the answer is the dialog's
        # news, so the record adds none.
        event = Q4hAnswered(q4h_id=q.id, text=answer)
        res = Resolution(outcome=event.outcome(), event=event.model_dump(mode="json"), by="human")
        for rec in wait_rows.open_waits_by_key(self.store, WaitKind.USER_INPUT, q.id):
            self.waits.resolve(rec.id, res, wake=False)
        return q

    def _answer(self, q: QuestionRecord, answer: str) -> None:
        """Close an open question with `answer`, appended to the asking dialog, which is
        marked to drive when nothing else holds it."""
        dialog = self.store.get_dialog(q.dialog_id)
        self.store.close_question(q.id, answer=answer, status="answered")
        self.store.append_message(
            dialog.id,
            "user",
            {
                "text": formats.question_answer_message(
                    question_id=q.id, headline=q.headline, answer=answer
                ),
                "question_id": q.id,
            },
            course=dialog.course,
        )
        if self.can_drive(dialog.id):
            self.store.update_dialog(dialog.id, needs_drive=True)
        self.bus.publish(QuestionAnswered(dialog_id=dialog.id, question_id=q.id))
