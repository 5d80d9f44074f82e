"""Waits as records, and the one drive rule that reads them.

A dialog is driven when it is marked to drive and nothing it waits on is open — except
a tellask-back one of its own side dialogs asks it, which it answers in-line. What a
dialog can wait on comes from three sources, each a store table read by the same rule
(`store.statements.WAIT_SOURCES`, the rule as a query; `tree.WaitState`, the same rule
for one dialog):

- its tellasks still unanswered (`pending_tellasks`),
- its open questions for the human (`questions`),
- its open blocking wait records (`waits`): the kinds of `wait_kinds.WAIT_KINDS`, a
  table (payload, resolving event, timeout policy, whether it parks). Adding a kind adds
  a row there; the rule does not change.

A wait is registered inside the transaction of the step that asks for it (a tool's store
effect, `OpenWait`); an event that came before it (kept by `ingest`) is matched there. It
is resolved exactly once (a conditional update), and its resolution is queued in the
dialog's inbox as a note in the same transaction, which also marks the dialog to drive.
A wait of a workspace node (`node`) does not park the dialog; `mode=any` waits of one
node are alternatives (the first resolved cancels the others). Due times fall due in the
scheduler (`fire_due`), which sleeps until the next one instead of polling: a timer
fires, others fail, assume their default or remind the human, as their kind says.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mindloop.config.duration import format_duration
from mindloop.config.loop import WaitsConfig
from mindloop.dialogs.staleness import (
    Staleness,
    WorkspaceRef,
    snapshot,
    staleness,
)
from mindloop.dialogs.wait_kinds import (
    WAIT_KINDS,
    ApprovalPayload,
    OnTimeout,
    Resolution,
    TimerFired,
    UserInputPayload,
    WaitEvent,
    WaitKind,
    WaitMode,
    WaitOutcome,
    WaitPayload,
)
from mindloop.errors import MindloopError, NotFoundError
from mindloop.events.bus import EventBus
from mindloop.events.types import WaitOpened, WaitReminded, WaitResolved
from mindloop.store import ResponseRecord, Store, WaitRecord, WaitStatus, new_id
from mindloop.store import waits as rows

__all__ = [
    "NOTE",
    "WAIT_KINDS",
    "ExpireHook",
    "Ingested",
    "WaitKind",
    "WaitMode",
    "Waits",
    "wait_note",
]

log = logging.getLogger(__name__)

# The inbox item kind of a runtime note (a resolved wait's outcome).
NOTE = "note"
# When a wait whose timeout failed (a damaged record) is tried again, in seconds: the
# scheduler sleeps until the next due time, so a due time left in the past would spin it.
RETRY_BROKEN = 60.0

# What ending a wait of one kind does beyond closing the record (the tree's part: fail a
# side dialog's sink, answer a question with its default). Returns the closed record, or
# None if it was not open.
ExpireHook = Callable[[WaitRecord, Resolution], WaitRecord | None]


class Ingested(BaseModel):
    """What an event did: the waits it resolved, or the id it was kept under."""

    resolved: list[WaitRecord] = []
    kept: int | None = None


def wait_note(rec: WaitRecord) -> str:
    """The note a resolved wait leaves in its dialog's history."""
    res = rec.resolution or {}
    found = res.get("event")
    event: dict[str, Any] = found if isinstance(found, dict) else {}
    what = f"{rec.kind} wait {rec.key!r}"
    if rec.status is WaitStatus.EXPIRED:
        why = event.get("why") if event else None
        return f"[mindloop] The {what} timed out" + (f": {why}." if why else ".")
    if rec.status is WaitStatus.CANCELLED:
        return f"[mindloop] The {what} was cancelled."
    if rec.kind == WaitKind.TIMER:
        return f"[mindloop] The {what} fired."
    if rec.kind == WaitKind.EXTERNAL and "event_type" in event:
        key = f" (key {event['key']!r})" if event.get("key") is not None else ""
        data = json.dumps(event.get("payload") or {}, ensure_ascii=False)
        return (
            f"[mindloop] The system event {event['event_type']!r}{key} you waited for came: {data}"
        )
    if rec.kind == WaitKind.TOOL and "ok" in event:
        tool = rec.payload.get("tool", "?")
        state = "finished" if event["ok"] else "failed"
        ref = f" (output: {event['output_ref']})" if event.get("output_ref") else ""
        return f"[mindloop] The async tool {tool} {state}: {event.get('summary', '')}{ref}"
    detail = ""
    if event:
        detail = ": " + ", ".join(f"{k}={v}" for k, v in event.items())
    outcome = f" ({res['outcome']})" if "outcome" in res else ""
    return f"[mindloop] The {what} is {rec.status}{outcome}{detail}."


def _payload(kind: WaitKind, payload: WaitPayload | dict[str, Any] | None) -> dict[str, Any]:
    model = WAIT_KINDS[kind].payload
    if isinstance(payload, model):
        return payload.model_dump(mode="json")
    if isinstance(payload, BaseModel):
        raise MindloopError(f"a {kind} wait carries a {model.__name__}, not {type(payload)}")
    return model.model_validate(payload or {}).model_dump(mode="json")


class Waits:
    """Opening, resolving and timing out wait records (each inside the caller's
    transaction when there is one)."""

    def __init__(
        self,
        store: Store,
        bus: EventBus,
        config: WaitsConfig | None = None,
        *,
        rtws: Path | None = None,
        workspace_ref: WorkspaceRef | None = None,
    ) -> None:
        self.store = store
        self.bus = bus
        self.config = config or WaitsConfig()
        self.rtws = rtws  # snapshots (staleness) need it; without it none are taken
        self.workspace_ref = workspace_ref
        self.expire_hooks: dict[WaitKind, ExpireHook] = {}
        self.changed = False  # a wait was opened here since the scheduler last looked

    # ------------------------------------------------------------------ opening

    def open(
        self,
        dialog_id: str,
        kind: WaitKind,
        key: str | None = None,
        payload: WaitPayload | dict[str, Any] | None = None,
        *,
        due_at: float | None = None,
        wait_id: str | None = None,
        node: str | None = None,
        mode: WaitMode = WaitMode.ALL,
        blocks: bool | None = None,
        task_path: str | None = None,
    ) -> WaitRecord:
        """Register a wait (in the caller's transaction if any); returns the record, which
        is already resolved when a kept event matched it. A `wait_id` that names a wait
        already registered returns that record as it is (a replayed registration).

        `key` defaults to the wait's id; `due_at` to the kind's timeout (a timer's to its
        payload's `fire_at`); `blocks` to the kind's rule for a wait of the dialog itself
        (a node's wait never parks the dialog: the loop parks it when every node waits).
        With `task_path` the task is photographed for the staleness check."""
        spec = WAIT_KINDS[kind]
        now = time.time()
        if kind is WaitKind.TIMER:
            raw = payload.model_dump() if isinstance(payload, BaseModel) else dict(payload or {})
            if due_at is None and raw.get("fire_at") is None:
                raise MindloopError("a timer wait needs a due time (due_at or fire_at)")
            raw.setdefault("fire_at", due_at)
            payload = raw
            due_at = float(raw["fire_at"]) if due_at is None else due_at
        data = _payload(kind, payload)
        if due_at is None:
            after = spec.due_in(self.config)
            due_at = None if after is None else now + after
        wid = wait_id or new_id(spec.id_prefix)
        shot = None
        if task_path is not None and self.rtws is not None:
            shot = snapshot(self.rtws, task_path, self.workspace_ref).model_dump()
        rec = WaitRecord(
            id=wid,
            dialog_id=dialog_id,
            kind=kind,
            key=key or wid,
            payload=data,
            blocks=(spec.blocks and node is None) if blocks is None else blocks,
            due_at=due_at,
            created_at=now,
            node=node,
            mode=mode,
            snapshot=shot,
        )
        with self.store.tx():
            if wait_id is not None:
                with contextlib.suppress(NotFoundError):
                    return self.store.get_wait(wait_id)
            self.store.add_wait(rec)
            self.changed = True
            self.bus.publish(
                WaitOpened(dialog_id=dialog_id, wait_id=rec.id, kind=kind, key=rec.key)
            )
            early = self._match_kept(rec) if spec.keeps_early else None
        return early or rec

    def _match_kept(self, rec: WaitRecord) -> WaitRecord | None:
        """Inside the registration's transaction: the oldest kept event this wait waits
        for resolves it at once."""
        event_model = WAIT_KINDS[WaitKind(rec.kind)].event
        for kept in rows.kept_events(self.store, rec.kind, rec.key, rec.dialog_id):
            event = event_model.model_validate(kept.event)
            if not event.matches(rec.payload):
                continue
            if rows.consume_event(self.store, kept.id, rec.id):
                return self._resolve_by(rec.id, event)
        return None

    # ------------------------------------------------------------------ resolving

    def resolve(
        self,
        wait_id: str,
        resolution: Resolution | dict[str, Any] | None = None,
        *,
        status: WaitStatus = WaitStatus.RESOLVED,
        note: str | None = None,
        item: dict[str, Any] | None = None,
        wake: bool = True,
        detail: str | None = None,
    ) -> WaitRecord | None:
        """Resolve an open wait once: returns it closed, or None if it was not open
        (someone else closed it first: nothing happens twice).

        Its dialog gets a note (`note`, or the generic one; `item` replaces the inbox
        item) in its inbox — it enters the history at the next step boundary, never in
        the middle of a generation — and is marked to drive; with `wake=False` neither
        (the caller wrote what the dialog needs, e.g. the answer to a question). A free
        `resolution` mapping is kept as the event of an `ok` (or status-given) outcome."""
        res = _resolution(resolution, status)
        with self.store.tx():
            rec = self.store.resolve_wait(wait_id, status, res.model_dump(mode="json"))
            if rec is None:
                return None
            if rec.mode == WaitMode.ANY and rec.node is not None:
                cancelled = Resolution(
                    outcome=WaitOutcome.CANCELLED, event={"alternative": rec.id}, by="runtime"
                )
                rows.cancel_alternatives(self.store, rec, cancelled.model_dump(mode="json"))
            if wake:
                data = item or {"kind": NOTE, "text": note or wait_note(rec), "wait_id": rec.id}
                self.store.add_response(
                    ResponseRecord(
                        caller_id=rec.dialog_id, side_id=rec.dialog_id, call_id=rec.id, data=data
                    )
                )
                self.store.update_dialog(rec.dialog_id, needs_drive=True)
        self.bus.publish(
            WaitResolved(
                dialog_id=rec.dialog_id,
                wait_id=rec.id,
                kind=rec.kind,
                status=status,
                outcome=res.outcome,
                detail=detail,
            )
        )
        return rec

    def _resolve_by(
        self, wait_id: str, event: WaitEvent, by: str | None = None
    ) -> WaitRecord | None:
        res = Resolution(outcome=event.outcome(), event=event.model_dump(mode="json"), by=by)
        return self.resolve(wait_id, res)

    def ingest(self, event: WaitEvent, *, dialog_id: str | None = None) -> Ingested:
        """An event arrives (agent-loop §6.3 Race): in one transaction, every open wait of
        its kind and key that it matches is resolved; if none is, it is kept — for kinds
        that keep early events — and matched when its wait is registered (`dialog_id`
        keeps it for that dialog's waits only). An event of a kind that keeps none and
        finds no wait is an error (it would be lost)."""
        spec = WAIT_KINDS[event.kind]
        if event.kind is WaitKind.APPROVAL:
            raise MindloopError(
                "an approval is decided with approve / reject (`DialogRuntime.decide`), "
                "not delivered as an event"
            )
        key = event.wait_key()
        with self.store.tx():
            if event.kind is WaitKind.TIMER:  # a timer is named by its wait id
                found = [self.store.get_wait(key)]
                found = [r for r in found if r.status is WaitStatus.OPEN]
            else:
                found = rows.open_waits_by_key(self.store, event.kind, key)
            matched = [r for r in found if event.matches(r.payload)]
            done = [r for r in (self._resolve_by(r.id, event) for r in matched) if r]
            if done:
                return Ingested(resolved=done)
            if not spec.keeps_early:
                raise NotFoundError(f"no open {event.kind} wait for {key!r}")
            kept = rows.keep_event(
                self.store, event.kind, key, event.model_dump(mode="json"), dialog_id
            )
        return Ingested(kept=kept)

    # ------------------------------------------------------------------ falling due

    def next_due(self) -> float | None:
        return self.store.next_due()

    def fire_due(self, now: float | None = None) -> list[WaitRecord]:
        """Every open wait whose due time passed, as its kind's timeout policy says: a
        timer fires; a FAIL wait expires (a side dialog only past its active-time or
        wall-clock limit); ASSUME_DEFAULT takes the question's stated default (the user
        is told), or reminds without one; REMIND_ONLY reminds and stays open. Returns
        the waits closed."""
        now = time.time() if now is None else now
        closed = []
        for rec in self.store.due_waits(now):
            try:
                done = self._fall_due(rec, now)
            except Exception:  # one broken record must not stop the others, nor spin
                log.exception("wait %s (%s) could not be timed out", rec.id, rec.kind)
                rows.remind(self.store, rec.id, now + RETRY_BROKEN, reminded=False)
                continue
            if done is not None:
                closed.append(done)
        return closed

    def _fall_due(self, rec: WaitRecord, now: float) -> WaitRecord | None:
        kind = WaitKind(rec.kind)
        spec = WAIT_KINDS[kind]
        policy = spec.on_timeout
        if policy is OnTimeout.FIRE:
            return self._resolve_by(rec.id, TimerFired(wait_id=rec.id), by="timer")
        if policy is OnTimeout.FAIL:
            if kind is WaitKind.DETACHED:
                rest = self._subagent_time_left(rec, now)
                if rest > 0:
                    rows.remind(self.store, rec.id, now + rest, reminded=False)
                    return None
            return self.expire(rec, f"nothing came in {format_duration(now - rec.created_at)}")
        if policy is OnTimeout.ASSUME_DEFAULT:
            default = UserInputPayload.model_validate(rec.payload).default_assumption
            if default is not None:
                return self.expire(rec, f"unanswered: the stated default is assumed: {default}")
        self.remind(rec, now)
        return None

    def expire(self, rec: WaitRecord, why: str) -> WaitRecord | None:
        """End a wait on its timeout (outcome `timeout`); its kind's hook does what that
        means beyond the record."""
        res = Resolution(outcome=WaitOutcome.TIMEOUT, event={"why": why}, by="timeout")
        hook = self.expire_hooks.get(WaitKind(rec.kind))
        if hook is not None:
            return hook(rec, res)
        return self.resolve(rec.id, res, status=WaitStatus.EXPIRED, detail=why)

    def _subagent_time_left(self, rec: WaitRecord, now: float) -> float:
        """Seconds a node's side dialog may still run: its active time (wall-clock time
        less the time its own questions waited for the human) against the active limit,
        and the wall-clock limit."""
        wall = now - rec.created_at
        wall_left = self.config.subagent.wall_clock - wall
        asked = 0.0
        for start, end in rows.question_spans(self.store, rec.key):
            if start >= rec.created_at:
                asked += (end if end is not None else now) - start
        active_left = self.config.subagent.active - (wall - asked)
        return max(0.0, min(wall_left, active_left))

    def remind(self, rec: WaitRecord, now: float) -> None:
        """Tell the human an open wait on them is still open; due again in its interval."""
        every = WAIT_KINDS[WaitKind(rec.kind)].remind_in(self.config)
        if every is None:
            raise MindloopError(f"a {rec.kind} wait has no reminder interval")
        if not rows.remind(self.store, rec.id, now + every):
            return  # closed meanwhile
        text = reminder_text(rec, now)
        self.store.record_event(
            "wait_reminder", rec.dialog_id, {"wait_id": rec.id, "kind": rec.kind, "text": text}
        )
        self.bus.publish(
            WaitReminded(
                dialog_id=rec.dialog_id,
                wait_id=rec.id,
                kind=rec.kind,
                reminders=rec.reminders + 1,
                text=text,
            )
        )

    # ------------------------------------------------------------------ resuming

    def resolved_since(self, dialog_id: str, since: float) -> list[WaitRecord]:
        """The dialog's waits closed after `since` (what a resumed step's input lists)."""
        return rows.resolved_since(self.store, dialog_id, since)

    def staleness(
        self, waits: list[WaitRecord], task_path: str, *, now: float | None = None
    ) -> Staleness:
        """The staleness signals of resuming `task_path`'s dialog after `waits`."""
        if self.rtws is None:
            raise MindloopError("staleness needs the rtws (Waits(rtws=…))")
        current = snapshot(self.rtws, task_path, self.workspace_ref)
        return staleness(waits, current, stale_after=self.config.stale_after, now=now)


def _resolution(given: Resolution | dict[str, Any] | None, status: WaitStatus) -> Resolution:
    if isinstance(given, Resolution):
        return given
    outcome = {
        WaitStatus.EXPIRED: WaitOutcome.TIMEOUT,
        WaitStatus.CANCELLED: WaitOutcome.CANCELLED,
    }.get(status, WaitOutcome.OK)
    return Resolution(outcome=outcome, event=dict(given or {}))


def reminder_text(rec: WaitRecord, now: float) -> str:
    """What the human is told when a wait on them is still open."""
    waited = format_duration(now - rec.created_at)
    if rec.kind == WaitKind.APPROVAL:
        p = ApprovalPayload.model_validate(rec.payload)
        return (
            f"approval {rec.id} has waited {waited}: @{p.member} asks to run {p.summary}; "
            f"decide with `mindloop approve {rec.id}` or `mindloop reject {rec.id} --reason …`"
        )
    if rec.kind == WaitKind.USER_INPUT:
        q = UserInputPayload.model_validate(rec.payload)
        return (
            f"question {q.q4h_id} has waited {waited} for your answer: "
            f"{q.question.splitlines()[0] if q.question else ''} "
            f"(answer with `mindloop answer {q.q4h_id} …`)"
        )
    return f"{rec.kind} wait {rec.id} has waited {waited}"
