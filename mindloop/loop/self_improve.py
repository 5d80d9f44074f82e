"""What the SELF_IMPROVE phase uses beside its two tools (agent-loop §9.3): the progress
cursor that makes a pass resumable and the dead KB requests it is shown. The phase itself
(its turn policy, which offers the loop-owned `self_improve` toolset) is the work loop's
`SELF_IMPROVE` (`loop.policy`).

The cursor says how far a pass has read its root dialog: `(course, message_id)`, read in
batches of at most `loop.self_improve.batch_messages` (40) messages. The phase advances it
in the transaction that holds the batch's effects (use `cursor_effect` as a store effect
of the step's last tool result, or `save_cursor` inside a `store.tx()`), after every
`self_md_patch` of the batch has returned: a crash re-processes the batch, harmlessly,
because both tools dedupe.

After `loop.self_improve.max_consecutive_errors` (4) tool calls in a row that failed
(`errors_in_a_row`: the phase's turn policy asks after each step) the run stops until the
next trigger: the entry ends (the task still ends DONE) and its batch counts as not
processed — the cursor stays where the run began, one failed run counted
(`close_batch`), so the next SELF_IMPROVE run reads the same messages again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from mindloop.loop.stuck import INTERRUPTED_PREFIX
from mindloop.providers.base import AssistantMessage, ChatMessage, ToolResultMessage
from mindloop.store import MessageRecord, Store
from mindloop.store import loop_state as ls
from mindloop.store.cursors import Cursors, message_batch
from mindloop.store.outbox import Outbox, OutboxRecord, OutboxStatus
from mindloop.tools.base import StoreEffect
from mindloop.toolsets.self_improve import KB_REQUEST_KIND

CURSOR_NAME = "self_improve"


class SelfImproveCursor(BaseModel):
    """Where a SELF_IMPROVE pass over one root dialog stands."""

    course: int = 1
    message_id: int = 0  # the last message processed (0: none)
    errors: int = 0  # runs in a row that stopped on errors before processing the batch


def load_cursor(store: Store, root_id: str) -> SelfImproveCursor:
    found = Cursors(store).get(root_id, CURSOR_NAME)
    return SelfImproveCursor() if found is None else SelfImproveCursor.model_validate(found.value)


def save_cursor(store: Store, root_id: str, cursor: SelfImproveCursor) -> None:
    """Move the cursor (joins the caller's transaction)."""
    Cursors(store).set(root_id, CURSOR_NAME, cursor.model_dump())


def cursor_effect(root_id: str, cursor: SelfImproveCursor) -> StoreEffect:
    """The cursor's move as a store effect: it commits with the tool result carrying it."""

    def apply(store: Any) -> None:
        save_cursor(store, root_id, cursor)

    return StoreEffect(apply=apply, what=f"cursor {CURSOR_NAME}")


def next_batch(
    store: Store,
    root_id: str,
    cursor: SelfImproveCursor,
    limit: int,
    until: SelfImproveCursor | None = None,
) -> tuple[list[MessageRecord], SelfImproveCursor]:
    """The next messages after `cursor` (at most `limit`, `loop.self_improve.batch_messages`
    in the loop, an assistant message with its tool calls counted once; one course at a time, moving to
    the dialog's next course when one is read to its end) and the cursor after them.
    `until`: where the pass ends (`loop.review_pass`): that message and all after it are
    not read. An empty batch means the pass is done."""
    last_course = store.get_dialog(root_id).course
    if until is not None:
        last_course = min(last_course, until.course)
    course, after = cursor.course, cursor.message_id
    while True:
        if course > last_course:
            msgs = []
            break
        msgs = _messages(store, root_id, course, after, limit)
        if until is not None and course == until.course:
            msgs = [m for m in msgs if m.id < until.message_id]
        if msgs or course >= last_course:
            break
        course, after = course + 1, 0
    last = msgs[-1].id if msgs else after
    return msgs, SelfImproveCursor(course=course, message_id=last, errors=0)


# A batch counts the dialog's messages (§9.3): a tool call is stored as a row of its own
# but belongs to the assistant message that made it, so it is read with that message and
# not counted on its own.
_PART_OF_PREVIOUS = frozenset({"tool_call"})


def _messages(
    store: Store, root_id: str, course: int, after: int, limit: int
) -> list[MessageRecord]:
    """At most `limit` messages of one course after row `after`, each with its rows."""
    out: list[MessageRecord] = []
    counted = 0
    while True:
        rows = message_batch(store, root_id, course, after, limit)
        for m in rows:
            if m.kind not in _PART_OF_PREVIOUS:
                if counted == limit:
                    return out
                counted += 1
            out.append(m)
        if len(rows) < limit:
            return out
        after = rows[-1].id


def failed_batch(cursor: SelfImproveCursor) -> SelfImproveCursor:
    """The cursor after a batch that failed: not moved, one more error counted."""
    return cursor.model_copy(update={"errors": cursor.errors + 1})


# How a SELF_IMPROVE entry may end and still count its batch as processed: `phase_end`,
# a reply, its step cap. The runtime stopping it (errors in a row, format failures) or a
# stale resume sending the task back to PLAN leaves the batch to the next run.
PROCESSED_BY = frozenset({ls.EndedBy.TOOL, ls.EndedBy.REPLY, ls.EndedBy.STEP_CAP})


def close_batch(store: Store, state: ls.LoopState) -> None:
    """When a SELF_IMPROVE entry is closed (in that transaction): the cursor moves past
    its batch if the entry processed it (every `self_md_patch` of it returned), else it
    stays, with the failed run counted."""
    if state.batch_end is None:
        return
    if state.ended is not None and state.ended.by in PROCESSED_BY:
        save_cursor(store, state.root_id, SelfImproveCursor(**state.batch_end))
    else:
        save_cursor(store, state.root_id, failed_batch(load_cursor(store, state.root_id)))


class ErrorsInARow(BaseModel):
    """The SELF_IMPROVE run stops: `count` tool calls in a row failed (agent-loop §9.3)."""

    model_config = ConfigDict(frozen=True)

    count: int

    def reason(self) -> str:
        return (
            f"{self.count} tool calls in a row failed (loop.self_improve."
            "max_consecutive_errors): SELF_IMPROVE stops until its next run, which reads "
            "the same messages again"
        )


def errors_in_a_row(messages: Sequence[ChatMessage], limit: int) -> ErrorsInARow | None:
    """Whether the latest tool results, since the latest input, are `limit` failures in a
    row. A call a restart interrupted is the runtime's doing, not a failure of the model's:
    it neither counts nor breaks the row."""
    count = 0
    for msg in reversed(messages):
        if isinstance(msg, ToolResultMessage):
            if not msg.is_error:
                break
            if not msg.content.startswith(INTERRUPTED_PREFIX):
                count += 1
                if count >= limit:
                    return ErrorsInARow(count=count)
        elif not isinstance(msg, AssistantMessage):
            break  # an input: a new situation
    return None


def dead_line(r: OutboxRecord) -> str:
    """A dead KB request as SELF_IMPROVE's input lists it."""
    topic = str(r.payload.get("topic", "")) or "(no topic)"
    why = f"; last error: {r.last_error}" if r.last_error else ""
    return f"{r.id} ({r.payload.get('kind', '?')}) {topic!r}: attempts {r.attempts}{why}"


def dead_kb_requests(store: Store, member: str | None = None) -> list[OutboxRecord]:
    """KB requests that were never delivered (shown in the next SELF_IMPROVE input)."""
    return [
        r
        for r in Outbox(store).all()
        if r.kind == KB_REQUEST_KIND
        and r.status is OutboxStatus.DEAD
        and (member is None or r.source_member == member)
    ]
