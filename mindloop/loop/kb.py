"""Delivery of KB requests: from the outbox to the one KB dialog of the rtws (DESIGN.md
§8.11, agent-loop §9.2).

`kb_request` only queues an outbox row, in the step's transaction. `KbDispatcher`, a
ticker of the run's scheduler (`dialogs.scheduler.Ticker`), delivers each pending row to
the KB dialog: the root dialog of the `kb` member (`loop.kb.member`) on the package
`tasks/kb.tsk/` (`loop.kb.task_slug`), both created on first use. One delivery is one
transaction: the receiver's idempotency key is registered (`received_keys`), the request
is posted to the KB dialog as a message, and the row moves to `sent`. A row whose key the
KB already received moves to `duplicate` instead (the automatic acknowledgement, naming
the first msg_id): the KB's model never sees the same request twice. So delivery is at
least once (a crash before the commit leaves the row pending, delivered by the next run)
and processing effectively once.

A failed delivery (the KB package cannot be written, the member is unusable) is retried
with backoff — 1 s, doubling, capped at `loop.kb.backoff_cap_seconds` — until
`loop.kb.retry_hours` after the request, when the row becomes `dead`. A sent row becomes
`acked` once the KB dialog has answered after it; one not answered within
`loop.kb.reply_timeout_seconds` is redelivered with the same backoff — the KB dialog holds
the request already (a second copy would be a duplicate), so it is woken to drive again —
and becomes `dead` at the end of the retry window. Nobody waits for any of this: the
requesting phase has moved on when its step committed.

Who delivers: every `mindloop run` (a ticker of its scheduler), and `mindloop run TASK`
before it returns (`deliver_due` once the task's loop stops: a request SELF_IMPROVE queued
is in the KB dialog when the command ends; the KB dialog itself is driven by a run of all
trees, `mindloop run`, as any other dialog).

Cost: the dispatcher reads the outbox once per poll interval of the run (one small
query; none per step), and delivers only when a row is due.
"""

from __future__ import annotations

import logging
import time

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.store import DialogRecord
from mindloop.store.outbox import Outbox, OutboxRecord, ReceivedKeys
from mindloop.taskdoc import TaskPackage
from mindloop.toolsets.self_improve import KB_REQUEST_KIND

log = logging.getLogger(__name__)

KB_GOALS = (
    "Keep the team's knowledge base under `kb/`: one Markdown file per topic, accurate, "
    "deduplicated and short.\n\n"
    "Requests arrive as messages headed `[kb_request from @member]`, with a Kind (ADD, "
    "UPDATE, DEPRECATE or GAP), a Topic and the content. Fold each into `kb/` (ADD and "
    "UPDATE write or edit the topic's file, DEPRECATE marks it, GAP records the question "
    "in `kb/gaps.md`), then reply in one line: what you did, or why you did not."
)
KB_CONSTRAINTS = (
    "MUST write only under kb/.",
    "MUST NOT store secrets or personal data, even when a request contains them.",
)
KB_TITLE = "Knowledge base"


def render_request(rec: OutboxRecord) -> str:
    """The message the KB dialog receives for one request."""
    p = rec.payload
    where = f" · task {rec.task_path}" if rec.task_path else ""
    lines = [
        f"[kb_request from @{rec.source_member}{where}]",
        f"Msg-Id: {rec.id}",
        f"Idempotency-Key: {rec.idempotency_key}",
        f"Kind: {p.get('kind', '')}",
        f"Topic: {p.get('topic', '')}",
        "",
        str(p.get("content", "")),
    ]
    refs = p.get("evidence_refs") or []
    if refs:
        lines += ["", "Evidence: " + ", ".join(str(r) for r in refs)]
    return "\n".join(lines)


class KbDispatcher:
    """Delivers `kb_request` outbox rows to the KB dialog (see the module doc)."""

    def __init__(self, rt: DialogRuntime) -> None:
        self.rt = rt
        self.cfg = rt.config.team.loop.kb
        self.outbox = Outbox(rt.store)
        self.keys = ReceivedKeys(rt.store)

    # ---------------------------------------------------------------- the ticker

    def next_due(self) -> float | None:
        """When a pending row is next due; acknowledges sent rows on the way."""
        due, sent = self.outbox.work()
        if sent:
            self.ack_answered()
        return due

    def tick(self, now: float) -> bool:
        """Deliver every due row; True when a request was posted to the KB dialog."""
        return self.deliver_due(now) > 0

    def deliver_due(self, now: float) -> int:
        """Deliver every row due at `now`; how many were posted to the KB dialog (a
        duplicate is acknowledged, not posted; a failure is retried later)."""
        posted = 0
        for rec in self.outbox.due(now):
            if rec.kind == KB_REQUEST_KIND and self.deliver(rec):
                posted += 1
        return posted

    # ---------------------------------------------------------------- delivery

    def kb_dialog(self) -> DialogRecord:
        """The KB dialog: the oldest root dialog of the KB member on the KB package,
        created (with the package) when there is none. Call inside `store.tx()`."""
        task = self.cfg.task_path
        for rec in self.rt.store.list_dialogs(task_path=task):
            if rec.kind == "root" and rec.member == self.cfg.member:
                return rec
        pkg = TaskPackage(self.rt.rtws, task)
        if not pkg.exists():
            TaskPackage.create(
                self.rt.rtws,
                self.cfg.task_slug,
                goal=KB_GOALS,
                constraints=KB_CONSTRAINTS,
                exist_ok=True,
            )
        return self.rt.create_root_dialog(task, member=self.cfg.member, title=KB_TITLE)

    def deliver(self, rec: OutboxRecord) -> bool:
        """One delivery attempt (one transaction). True when the request was posted;
        False for a duplicate, a row someone else delivered, or a failure (retried)."""
        store = self.rt.store
        try:
            with store.tx():
                kb = self.kb_dialog()
                seen = self.keys.get(self.cfg.member, rec.idempotency_key)
                if seen is not None:  # the KB has it already: acknowledged, not re-posted
                    self.outbox.mark_delivered(rec.id, seen.dialog_id, duplicate_of=seen.msg_id)
                    log.info("kb request %s is a duplicate of %s", rec.id, seen.msg_id)
                    return False
                reply_by = time.time() + self.cfg.reply_timeout_seconds
                if not self.outbox.mark_delivered(rec.id, kb.id, reply_by=reply_by):
                    return False  # another dispatcher delivered it meanwhile
                self.keys.add(self.cfg.member, rec.idempotency_key, rec.id, kb.id)
                self.rt.post_user_message(kb.id, render_request(rec))
        except Exception as exc:  # a failed attempt is retried, never lost
            self._failed(rec, exc)
            return False
        log.info("kb request %s delivered to %s", rec.id, kb.id)
        return True

    def _retry_at(self, rec: OutboxRecord, now: float) -> float | None:
        """When to try `rec` again after its attempt number `attempts + 1` failed: 1 s,
        doubling, capped; None once that is past the retry window (the row dies)."""
        delay = min(2.0**rec.attempts, self.cfg.backoff_cap_seconds)
        deadline = rec.created_at + self.cfg.retry_hours * 3600
        return now + delay if now + delay <= deadline else None

    def _failed(self, rec: OutboxRecord, exc: Exception) -> None:
        now = time.time()
        attempts = rec.attempts + 1
        retry_at = self._retry_at(rec, now)
        error = f"{type(exc).__name__}: {exc}"
        self.outbox.mark_failed(rec.id, error, retry_at)
        if retry_at is None:
            log.warning("kb request %s is dead after %d attempts: %s", rec.id, attempts, error)
        else:
            log.info("kb request %s not delivered (%s); retry at %.0f", rec.id, error, retry_at)

    def ack_answered(self, now: float | None = None) -> int:
        """Sent rows the KB dialog has answered since become `acked`; how many. A row
        whose reply is overdue (`loop.kb.reply_timeout_seconds`, then the backoff) is
        redelivered: the KB dialog holds the request already (its key is registered, so
        a second copy would only be acknowledged as a duplicate), so it is marked to
        drive again; past the retry window the row is dead (§9.2)."""
        now = time.time() if now is None else now
        acked = 0
        for rec in self.outbox.sent():
            if rec.delivered_to is None or rec.sent_at is None:
                continue
            if self.outbox.answered(rec.delivered_to, rec.sent_at):
                acked += self.outbox.mark_acked(rec.id)
            elif rec.next_attempt_at is not None and now >= rec.next_attempt_at:
                self._overdue(rec, now)
        return acked

    def _overdue(self, rec: OutboxRecord, now: float) -> None:
        assert rec.delivered_to is not None and rec.sent_at is not None
        waited = int(now - rec.sent_at)
        error = f"no reply from @{self.cfg.member} {waited} s after delivery"
        retry_at = self._retry_at(rec, now)
        with self.rt.store.tx():
            if not self.outbox.mark_overdue(rec.id, error, retry_at):
                return  # answered or handled meanwhile
            kb = self.rt.store.get_dialog(rec.delivered_to)
            if retry_at is not None and kb.status != "running" and not kb.needs_drive:
                self.rt.store.update_dialog(kb.id, needs_drive=True)
        if retry_at is None:
            log.warning("kb request %s is dead: %s", rec.id, error)
        else:
            self.rt.wake.set()
            log.info("kb request %s: %s; the KB dialog is woken", rec.id, error)
