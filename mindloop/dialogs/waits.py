"""Waits as records, and the one drive rule that reads them.

A dialog is driven when it is marked to drive and nothing it waits on is open — except
a tellask-back one of its own side dialogs asks it, which it answers in-line. What a
dialog can wait on comes from three sources, each a store table read by the same rule
(`store.statements.WAIT_SOURCES`, the rule as a query; `tree.WaitState`, the same rule
for one dialog):

- its tellasks still unanswered (`pending_tellasks`),
- its open questions for the human (`questions`),
- its open wait records (`waits`): the kinds below. A kind is data: whether it blocks
  the drive, and what happens when it falls due. Adding a kind adds a row here; the rule
  does not change.

A wait is registered inside the transaction of the step that asks for it (a tool's store
effect, `OpenWait`), resolved exactly once (a conditional update), and its resolution is
appended to the dialog's history as a note in the same transaction, which also marks the
dialog to drive when nothing else holds it. Timers fall due in the scheduler, which
sleeps until the next due time instead of polling for them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mindloop.events.bus import EventBus
from mindloop.events.types import WaitOpened, WaitResolved
from mindloop.store import ResponseRecord, Store, WaitRecord, WaitStatus, new_id

# The inbox item kind of a runtime note (a resolved wait's outcome).
NOTE = "note"


class WaitKind(StrEnum):
    TIMER = "timer"  # wakes the dialog at `due_at`
    APPROVAL = "approval"  # answered only by an explicit approve / reject
    EXTERNAL = "external"  # an event from outside (a webhook, another system) by key
    DETACHED = "detached"  # a detached side dialog's reply, delivered to a sink


@dataclass(frozen=True)
class WaitSpec:
    blocks: bool  # the dialog is not driven while this wait is open
    on_due: WaitStatus | None  # what falling due does (None: it has no due time)


WAIT_KINDS: dict[WaitKind, WaitSpec] = {
    WaitKind.TIMER: WaitSpec(blocks=True, on_due=WaitStatus.RESOLVED),
    WaitKind.APPROVAL: WaitSpec(blocks=True, on_due=WaitStatus.EXPIRED),
    WaitKind.EXTERNAL: WaitSpec(blocks=True, on_due=WaitStatus.EXPIRED),
    WaitKind.DETACHED: WaitSpec(blocks=False, on_due=None),
}


def wait_note(rec: WaitRecord) -> str:
    """The note a resolved wait leaves in its dialog's history."""
    what = f"{rec.kind} wait {rec.key!r}"
    if rec.status is WaitStatus.RESOLVED and rec.kind == WaitKind.TIMER:
        return f"[mindloop] The {what} fired."
    detail = ""
    if rec.resolution:
        detail = ": " + ", ".join(f"{k}={v}" for k, v in rec.resolution.items())
    return f"[mindloop] The {what} is {rec.status}{detail}."


class Waits:
    """Opening and resolving wait records (each inside the caller's transaction)."""

    def __init__(self, store: Store, bus: EventBus) -> None:
        self.store = store
        self.bus = bus
        self.changed = False  # a wait was opened here since the scheduler last looked

    def open(
        self,
        dialog_id: str,
        kind: WaitKind,
        key: str,
        payload: dict[str, Any] | None = None,
        *,
        due_at: float | None = None,
    ) -> WaitRecord:
        spec = WAIT_KINDS[kind]
        if due_at is not None and spec.on_due is None:
            raise ValueError(f"a {kind} wait has no due time")
        rec = WaitRecord(
            id=new_id("w-"),
            dialog_id=dialog_id,
            kind=kind,
            key=key,
            payload=payload or {},
            blocks=spec.blocks,
            due_at=due_at,
            created_at=time.time(),
        )
        self.store.add_wait(rec)
        self.changed = True
        self.bus.publish(WaitOpened(dialog_id=dialog_id, wait_id=rec.id, kind=kind, key=key))
        return rec

    def resolve(
        self,
        wait_id: str,
        resolution: dict[str, Any] | None = None,
        *,
        status: WaitStatus = WaitStatus.RESOLVED,
        note: str | None = None,
    ) -> WaitRecord | None:
        """Resolve an open wait once: returns it closed, or None if it was not open
        (someone else closed it first: nothing happens twice). Its dialog gets a note (in
        its inbox: it enters the history at the next step boundary, never in the middle
        of a generation) and is marked to drive."""
        with self.store.tx():
            rec = self.store.resolve_wait(wait_id, status, resolution or {})
            if rec is None:
                return None
            self.store.add_response(
                ResponseRecord(
                    caller_id=rec.dialog_id,
                    side_id=rec.dialog_id,
                    call_id=rec.id,
                    data={"kind": NOTE, "text": note or wait_note(rec), "wait_id": rec.id},
                )
            )
            self.store.update_dialog(rec.dialog_id, needs_drive=True)
        self.bus.publish(
            WaitResolved(dialog_id=rec.dialog_id, wait_id=rec.id, kind=rec.kind, status=status)
        )
        return rec

    def next_due(self) -> float | None:
        return self.store.next_due()

    def fire_due(self, now: float | None = None) -> list[WaitRecord]:
        """Every open wait whose due time passed: timers fire, others expire."""
        now = time.time() if now is None else now
        fired = []
        for rec in self.store.due_waits(now):
            spec = WAIT_KINDS.get(WaitKind(rec.kind))
            if spec is None or spec.on_due is None:
                continue
            done = self.resolve(rec.id, {"at": round(now, 3)}, status=spec.on_due)
            if done is not None:
                fired.append(done)
        return fired
