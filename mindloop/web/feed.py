"""The live feed behind the web UI's server-sent events: durable items from the store, live
chunks from the event bus, resumable with `Last-Event-ID`.

Two sources, because work shown in the browser may be driven in two places:

- **The store** (`store.feed`): every transcript entry (a message, a stored error), every
  Taskdoc change, and the fact that dialogs, questions or waits changed. These are what
  other processes (a `run --watch`, an `answer` in a terminal) write too, so one poller
  per server reads what is new — woken at once by this process's own events, otherwise
  every `poll_interval` — and hands it to every open stream. An item of a log carries the
  stream's position after it as its SSE `id` (`Cursor`: the last message, event and
  change id seen), so a browser that reconnects sends it back as `Last-Event-ID` and gets
  exactly what it missed from the store, nothing twice.
- **The bus** (`events.bus`) of this process: text and thinking chunks while a generation
  streams here, and generation starts and restarts. They are not stored and not resumed:
  the generation's messages, once committed, replace them (from the store, like any
  entry). Work driven by another process shows when it commits.

The poller runs on the event loop, like the engine, and uses the project's store; it
reads one small statement per tick when nothing changed (`store.feed.marks`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from mindloop.errors import NotFoundError
from mindloop.events.types import (
    DriveStarted,
    Event,
    EventType,
    GenerationRestarted,
    GenerationStarted,
    TextChunk,
    ThinkingChunk,
)
from mindloop.store import DialogRecord, MessageRecord, Store, TaskdocChange
from mindloop.store import feed as store_feed
from mindloop.store.feed import FeedMarks, StoredEvent

log = logging.getLogger(__name__)

# Events of this process after which the store has something new to read at once.
WAKING = frozenset(
    {
        EventType.GENERATION_END,
        EventType.TOOL_RESULT,
        EventType.ERROR,
        EventType.NOTE,
        EventType.DRIVE_START,
        EventType.DRIVE_END,
        EventType.DIALOG_CREATED,
        EventType.TELLASK_CALL,
        EventType.TELLASK_RESPONSE,
        EventType.QUESTION_ASKED,
        EventType.QUESTION_ANSWERED,
        EventType.TASKDOC_CHANGED,
        EventType.WAIT_OPENED,
        EventType.WAIT_RESOLVED,
    }
)
# Stored event types shown in a transcript (the others are bookkeeping).
SHOWN_EVENTS = frozenset({"error", "generation_failed", "generation_cancelled"})
# A stream that missed more than this many entries is told to reload the page instead.
REPLAY_LIMIT = 2000
BATCH = 500  # rows read per statement while catching up
QUEUE_SIZE = 5000

# ---------------------------------------------------------------------------- cursor

_CURSOR = re.compile(r"m(\d{1,18})\.e(\d{1,18})\.c(\d{1,18})")


class CursorError(ValueError):
    """A `Last-Event-ID` (or `since`) that is not a cursor this server wrote."""


@dataclass(frozen=True)
class Cursor:
    """A stream's position: the last message, stored event and Taskdoc change id seen."""

    messages: int = 0
    events: int = 0
    changes: int = 0

    def encode(self) -> str:
        return f"m{self.messages}.e{self.events}.c{self.changes}"

    @classmethod
    def decode(cls, raw: str) -> Cursor:
        found = _CURSOR.fullmatch(raw.strip())
        if found is None:
            raise CursorError(f"not a feed position: {raw[:80]!r} (expected m<n>.e<n>.c<n>)")
        return cls(*(int(g) for g in found.groups()))

    @classmethod
    def of(cls, marks: FeedMarks) -> Cursor:
        return cls(marks.messages, marks.events, marks.changes)

    def at_most(self, other: Cursor) -> Cursor:
        """Each position no further than `other`'s (a stream cannot be past the store)."""
        return Cursor(
            min(self.messages, other.messages),
            min(self.events, other.events),
            min(self.changes, other.changes),
        )


# ---------------------------------------------------------------------------- items

Log = Literal["messages", "events", "changes"]


class EntryItem(BaseModel):
    """One transcript entry (a stored message or a stored error) of one dialog."""

    kind: Literal["entry"] = "entry"
    log: Log
    log_id: int
    entry_id: str  # unique on a page: `m<id>` or `e<id>`
    dialog_id: str
    root_id: str | None
    task: str | None
    message_kind: str  # user, assistant, thinking, tool_call, …, or the event type
    html: str


class TaskdocItem(BaseModel):
    kind: Literal["taskdoc"] = "taskdoc"
    log: Log = "changes"
    log_id: int
    task: str
    section: str
    actor: str
    ts: float


class StateItem(BaseModel):
    """Dialogs, questions or waits changed: read them again."""

    kind: Literal["state"] = "state"


class ChunkItem(BaseModel):
    kind: Literal["chunk"] = "chunk"
    dialog_id: str
    root_id: str | None
    stream: Literal["text", "thinking"]
    text: str


class LiveItem(BaseModel):
    """A generation started (who, which model) or restarted (what streamed is void)."""

    kind: Literal["live"] = "live"
    dialog_id: str
    root_id: str | None
    what: Literal["generation_start", "generation_restart"]
    member: str | None = None
    model: str | None = None


class MarkItem(BaseModel):
    """The feed read the store up to here: a stream's position moves on even when
    nothing read was for it, so a reconnect does not read it all again."""

    kind: Literal["mark"] = "mark"
    messages: int
    events: int
    changes: int

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.messages, self.events, self.changes)


class ResetItem(BaseModel):
    """Too much was missed to replay: the page should load again."""

    kind: Literal["reset"] = "reset"


LoggedItem = EntryItem | TaskdocItem
FeedItem = EntryItem | TaskdocItem | StateItem | ChunkItem | LiveItem | MarkItem | ResetItem


@dataclass(frozen=True)
class Scope:
    """What a page shows: one dialog tree's transcripts (`root`), one task (`task`), or
    neither (lists). State items go to every page."""

    root: str | None = None
    task: str | None = None

    def wants(self, item: FeedItem) -> bool:
        if isinstance(item, EntryItem | ChunkItem | LiveItem):
            return self.root is not None and item.root_id == self.root
        if isinstance(item, TaskdocItem):
            return self.task is None or item.task == self.task
        return True

    def wants_entry(self, root_id: str | None) -> bool:
        return self.root is not None and root_id == self.root


# ---------------------------------------------------------------------------- streams


@dataclass(eq=False)
class Subscription:
    """One open stream: what it shows, where it is, and what is queued for it."""

    scope: Scope
    cursor: Cursor
    queue: asyncio.Queue[FeedItem | None] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    overflowed: bool = False

    def offer(self, item: FeedItem | None) -> None:
        """Queue an item (None ends the stream). A stream too slow to keep up loses
        chunks, and on losing anything else is told to reload."""
        if self.queue.full():
            if isinstance(item, ChunkItem):
                return
            self.overflowed = True
            with contextlib.suppress(asyncio.QueueEmpty):
                self.queue.get_nowait()
        self.queue.put_nowait(item)

    def advance(self, item: LoggedItem | MarkItem) -> bool:
        """Move past a logged item or a mark; False if it was seen already."""
        c = self.cursor
        if isinstance(item, MarkItem):
            m = item.cursor
            moved = Cursor(
                max(c.messages, m.messages), max(c.events, m.events), max(c.changes, m.changes)
            )
            self.cursor = moved
            return moved != c
        if item.log == "messages":
            if item.log_id <= c.messages:
                return False
            self.cursor = Cursor(item.log_id, c.events, c.changes)
        elif item.log == "events":
            if item.log_id <= c.events:
                return False
            self.cursor = Cursor(c.messages, item.log_id, c.changes)
        else:
            if item.log_id <= c.changes:
                return False
            self.cursor = Cursor(c.messages, c.events, item.log_id)
        return True


RenderEntry = Callable[[MessageRecord | StoredEvent], str]


class Feed:
    """One per server: polls the store, bridges the bus, serves every stream."""

    def __init__(self, store: Store, render: RenderEntry, *, poll_interval: float = 0.5) -> None:
        self.store = store
        self.render = render
        self.poll_interval = poll_interval
        self.marks = store_feed.marks(store)
        self.wake = asyncio.Event()
        self.subs: set[Subscription] = set()
        self._dialogs: dict[str, tuple[str, str]] = {}  # dialog id -> (root id, task)
        self._closed = False

    # -------------------------------------------------------------- the bus

    def on_event(self, ev: Event) -> None:
        """The bus listener: cheap, inline with the engine."""
        if isinstance(ev, TextChunk | ThinkingChunk):
            if self.subs and ev.dialog_id is not None:
                stream: Literal["text", "thinking"] = (
                    "text" if isinstance(ev, TextChunk) else "thinking"
                )
                root = self._root_known(ev.dialog_id)
                self._offer(
                    ChunkItem(dialog_id=ev.dialog_id, root_id=root, stream=stream, text=ev.text)
                )
            return
        if isinstance(ev, DriveStarted) and ev.dialog_id and ev.root_id and ev.task:
            self._dialogs[ev.dialog_id] = (ev.root_id, ev.task)
        if self.subs and ev.dialog_id is not None:
            root = self._root_known(ev.dialog_id)
            if isinstance(ev, GenerationStarted):
                self._offer(
                    LiveItem(
                        dialog_id=ev.dialog_id,
                        root_id=root,
                        what="generation_start",
                        member=ev.member,
                        model=ev.model,
                    )
                )
            elif isinstance(ev, GenerationRestarted):
                self._offer(
                    LiveItem(dialog_id=ev.dialog_id, root_id=root, what="generation_restart")
                )
        if ev.type in WAKING:
            self.wake.set()

    def _root_known(self, dialog_id: str) -> str | None:
        known = self._dialogs.get(dialog_id)
        return known[0] if known else None

    def _offer(self, item: FeedItem) -> None:
        for sub in self.subs:
            if sub.scope.wants(item):
                sub.offer(item)

    # -------------------------------------------------------------- the store

    def cursor(self) -> Cursor:
        """The store's position now (a page read after this misses nothing)."""
        return Cursor.of(store_feed.marks(self.store))

    async def run(self) -> None:
        """Poll until closed: at once when woken, else every `poll_interval`."""
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.poll_interval)
            self.wake.clear()
            try:
                self.tick()
            except Exception:  # a locked or damaged store: say so, try again next tick
                log.exception("web feed: reading the store failed")

    def tick(self) -> None:
        """Read what is new in the store and hand it to every stream that shows it."""
        new = store_feed.marks(self.store)
        old = self.marks
        if new == old:
            return
        subs = list(self.subs)
        for row in self._read(Cursor.of(old), Cursor.of(new)):
            wanting = [s for s in subs if self._wants(s.scope, row)]
            if wanting:
                item = self._item(row)
                for sub in wanting:
                    sub.offer(item)
        self.marks = new
        mark = MarkItem(messages=new.messages, events=new.events, changes=new.changes)
        for sub in subs:
            sub.offer(mark)
        if new.stamp != old.stamp:
            for sub in subs:
                sub.offer(StateItem())

    def _read(self, after: Cursor, upto: Cursor) -> Iterator[_Row]:
        """The rows of the three logs between two positions, each log in id order."""
        store = self.store
        pos = after.messages
        while pos < upto.messages:
            rows = store_feed.messages_between(store, pos, upto.messages, BATCH)
            if not rows:
                break
            for m in rows:
                yield _Row(m, *self._where(m.dialog_id))
            pos = rows[-1].id
        pos = after.events
        while pos < upto.events:
            evs = store_feed.events_between(store, pos, upto.events, BATCH)
            if not evs:
                break
            for e in evs:
                if e.type in SHOWN_EVENTS and e.dialog_id is not None:
                    yield _Row(e, *self._where(e.dialog_id))
            pos = evs[-1].id
        pos = after.changes
        while pos < upto.changes:
            changes = store_feed.changes_between(store, pos, upto.changes, BATCH)
            if not changes:
                break
            for c in changes:
                yield _Row(c, None, c.task_path)
            pos = changes[-1].id

    @staticmethod
    def _wants(scope: Scope, row: _Row) -> bool:
        if isinstance(row.record, TaskdocChange):
            return scope.task is None or row.task == scope.task
        return scope.wants_entry(row.root)

    def _item(self, row: _Row) -> LoggedItem:
        rec = row.record
        if isinstance(rec, TaskdocChange):
            return TaskdocItem(
                log_id=rec.id,
                task=rec.task_path,
                section=rec.section,
                actor=rec.actor_member,
                ts=rec.ts,
            )
        assert rec.dialog_id is not None
        is_msg = isinstance(rec, MessageRecord)
        return EntryItem(
            log="messages" if is_msg else "events",
            log_id=rec.id,
            entry_id=("m" if is_msg else "e") + str(rec.id),
            dialog_id=rec.dialog_id,
            root_id=row.root,
            task=row.task,
            message_kind=rec.kind if isinstance(rec, MessageRecord) else rec.type,
            html=self.render(rec),
        )

    def _where(self, dialog_id: str) -> tuple[str | None, str | None]:
        known = self._dialogs.get(dialog_id)
        if known is None:
            rec = _find_dialog(self.store, dialog_id)
            if rec is None:  # deleted since
                return None, None
            known = self._dialogs[dialog_id] = (rec.root_id, rec.task_path)
        return known

    # -------------------------------------------------------------- streams

    def subscribe(self, scope: Scope, since: Cursor) -> tuple[Subscription, list[FeedItem]]:
        """Open a stream at `since`: what it missed up to the feed's marks (or a reset
        if that is too much), then everything new through its queue."""
        known = Cursor.of(self.marks)
        sub = Subscription(scope, since.at_most(known))
        missed: list[FeedItem] = []
        for row in self._read(sub.cursor, known):
            if self._wants(scope, row):
                if len(missed) >= REPLAY_LIMIT:
                    missed = [ResetItem()]
                    break
                missed.append(self._item(row))
        missed.append(MarkItem(messages=known.messages, events=known.events, changes=known.changes))
        self.subs.add(sub)
        return sub, missed

    def unsubscribe(self, sub: Subscription) -> None:
        self.subs.discard(sub)

    def close(self) -> None:
        """End every stream (the server is stopping)."""
        self._closed = True
        self.wake.set()
        for sub in list(self.subs):
            sub.offer(None)
        self.subs.clear()


@dataclass(frozen=True, slots=True)
class _Row:
    """A row of one of the logs, with where its dialog belongs (read once per dialog)."""

    record: MessageRecord | StoredEvent | TaskdocChange
    root: str | None
    task: str | None


def _find_dialog(store: Store, dialog_id: str) -> DialogRecord | None:
    try:
        return store.get_dialog(dialog_id)
    except NotFoundError:
        return None
