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
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from mindloop.loop.stuck import INTERRUPTED_PREFIX
from mindloop.providers.base import AssistantMessage, ChatMessage, ToolResultMessage
from mindloop.store import MessageRecord, Store
from mindloop.store import loop_state as ls
from mindloop.store.cursors import Cursors, message_batch
from mindloop.store.memo import MISS
from mindloop.store.outbox import Outbox, OutboxRecord, OutboxStatus
from mindloop.store.per_store import PerStore
from mindloop.store.schema import cursors as _cursors_table
from mindloop.store.schema import outbox as _outbox_table
from mindloop.tools.base import StoreEffect
from mindloop.toolsets.self_improve import KB_REQUEST_KIND

CURSOR_NAME = "self_improve"


class SelfImproveCursor(BaseModel):
    """Where a SELF_IMPROVE pass over one root dialog stands (a value: kept and shared)."""

    model_config = ConfigDict(frozen=True)

    course: int = 1
    message_id: int = 0  # the last message processed (0: none)
    errors: int = 0  # runs in a row that stopped on errors before processing the batch


def _cursor_key(root_id: str) -> tuple[str, str, str]:
    return (_cursors_table.name, CURSOR_NAME, root_id)


def load_cursor(store: Store, root_id: str) -> SelfImproveCursor:
    """The cursor as stored: kept while nothing wrote a cursor (`Store.memo_get`), so a
    transition between two SELF_IMPROVE entries — the close moving it, the route and the
    next entry reading it — reads it once at most."""
    key = _cursor_key(root_id)
    held = store.memo_get(key)
    if held is MISS:
        found = Cursors(store).get(root_id, CURSOR_NAME)
        held = SelfImproveCursor.model_validate(found.value) if found else SelfImproveCursor()
        store.memo_put(key, held)
    return held  # type: ignore[no-any-return]


def save_cursor(store: Store, root_id: str, cursor: SelfImproveCursor) -> None:
    """Move the cursor (joins the caller's transaction)."""
    Cursors(store).set(root_id, CURSOR_NAME, cursor.model_dump())
    store.memo_put(_cursor_key(root_id), cursor)  # as written


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
        msgs = _messages(store, root_id, course, after, limit, until)
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
    store: Store,
    root_id: str,
    course: int,
    after: int,
    limit: int,
    until: SelfImproveCursor | None = None,
) -> list[MessageRecord]:
    """At most `limit` messages of one course after row `after`, each with its rows.
    A pass ending at `until` reads no row after its end. The rows read are kept for the
    next read (`_Read`), so they are read twice a batch at a time."""
    chunk = 2 * limit
    end = until.message_id if until is not None and course == until.course else None
    out: list[MessageRecord] = []
    counted = 0
    rows, fresh = _kept(store, root_id, course, after), False
    seen: list[MessageRecord] = []  # every row gone through: kept, then read
    asked = 0  # the rows the last read asked for
    at = after
    while True:
        seen += rows
        full = False
        for m in rows:
            if m.kind not in _PART_OF_PREVIOUS:
                if counted == limit:
                    full = True
                    break
                counted += 1
            out.append(m)
        if full or (fresh and len(rows) < asked):  # or the course's end, as it stands
            break
        at = rows[-1].id if rows else at
        asked = chunk if end is None else min(chunk, end - at - 1)
        if asked <= 0:  # no row of the course lies between `at` and the pass's end
            break
        rows, fresh = message_batch(store, root_id, course, at, asked), True
    if fresh:
        _keep(store, root_id, _Read(course, after, tuple(seen)))
    return out


@dataclass(frozen=True)
class _Read:
    """The rows of a root's course read last: every row after message `after`, up to the
    last one's id, in id order. Once committed, rows are never changed, nor is one added
    among them (every write holds the store's write lock, so a row committed later has a
    higher id; a tree is deleted whole), so they stay what they are: the next entry's
    batch, and the route's look for one more (`review_pass.goes_on`), start with the rows
    read past the batch before, instead of reading them again."""

    course: int
    after: int
    rows: tuple[MessageRecord, ...]


# per store: root dialog -> the rows its pass read last (of the latest 16 roots read)
_reads: PerStore[_Read] = PerStore(16)


def _kept(store: Store, root_id: str, course: int, after: int) -> list[MessageRecord]:
    """The kept rows of `course` after message `after` (none if those kept do not reach
    back to it)."""
    held = _reads.get(store, root_id)
    if held is None or held.course != course or not held.after <= after <= held.rows[-1].id:
        return []
    return [m for m in held.rows if m.id > after]


def _keep(store: Store, root_id: str, read: _Read) -> None:
    """Keep `read` for the root's next read once what it saw is committed: the caller's
    transaction may have written some of its rows (the first entry of a pass reads the
    history up to now), which are gone, their ids given again, if it rolls back."""

    if read.rows:
        store.after_commit(f"self_improve.read:{root_id}", lambda: _reads.put(store, root_id, read))


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
    """KB requests that were never delivered (shown in the next SELF_IMPROVE input). Kept
    while nothing wrote the outbox (`Store.memo_get`): every entry of a pass shows them,
    and each would read the whole outbox again."""
    key = (_outbox_table.name, "dead_kb", member)
    held = store.memo_get(key)
    if held is MISS:
        held = tuple(
            r
            for r in Outbox(store).all()
            if r.kind == KB_REQUEST_KIND
            and r.status is OutboxStatus.DEAD
            and (member is None or r.source_member == member)
        )
        store.memo_put(key, held)
    return list(held)
