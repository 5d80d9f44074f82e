"""The web UI's live feed over a real store: what a stream replays from a position, what
it is handed as the store grows, what it leaves out, and the position it reports.

These run the feed in-process on a store written the way the engine writes it (dialogs,
messages, stored events, Taskdoc changes, questions); the browser tests drive the same
feed through a server.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindloop.store import DialogRecord, QuestionRecord, Store, TaskdocChange
from mindloop.web import feed as feed_mod
from mindloop.web.feed import (
    ChunkItem,
    Cursor,
    CursorError,
    EntryItem,
    Feed,
    MarkItem,
    ResetItem,
    Scope,
    StateItem,
    TaskdocItem,
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.for_rtws(tmp_path)
    yield s
    s.close()


def _dialog(store: Store, did: str, root: str | None = None, task: str = "tasks/a.tsk") -> None:
    now = time.time()
    store.create_dialog(
        DialogRecord(
            id=did,
            root_id=root or did,
            parent_id=root,
            member="dev",
            task_path=task,
            kind="root" if root is None else "side",
            created_at=now,
            updated_at=now,
        )
    )


def _say(store: Store, did: str, text: str) -> int:
    return store.append_message(did, "user", {"text": text}).id


def _feed(store: Store) -> Feed:
    return Feed(store, lambda row: f"<li>{row.id}</li>", poll_interval=60)


def _drain(sub: feed_mod.Subscription) -> list[feed_mod.FeedItem]:
    out = []
    while not sub.queue.empty():
        item = sub.queue.get_nowait()
        assert item is not None
        out.append(item)
    return out


def _entries(items: list[feed_mod.FeedItem]) -> list[int]:
    return [i.log_id for i in items if isinstance(i, EntryItem)]


def test_a_stream_replays_exactly_what_followed_its_position_in_its_tree(store: Store) -> None:
    _dialog(store, "r1")
    _dialog(store, "s1", root="r1")
    _dialog(store, "r2", task="tasks/b.tsk")
    first = _say(store, "r1", "one")
    seen = Cursor(messages=first)
    mine = [_say(store, "s1", "two"), _say(store, "r1", "three")]
    _say(store, "r2", "another tree")
    store.record_event("error", "r1", {"message": "boom", "code": "X"})
    store.record_event("drive_bookkeeping", "r1", {})
    feed = _feed(store)

    sub, missed = feed.subscribe(Scope(root="r1"), seen)

    entries = [i for i in missed if isinstance(i, EntryItem)]
    assert [(i.log, i.log_id) for i in entries] == [
        ("messages", mine[0]),
        ("messages", mine[1]),
        ("events", 1),
    ]
    assert entries[0].dialog_id == "s1" and entries[0].root_id == "r1"
    assert entries[0].html == f"<li>{mine[0]}</li>"
    assert isinstance(missed[-1], MarkItem)
    assert missed[-1].cursor == Cursor(messages=4, events=2, changes=0)  # past the other tree
    for item in missed:
        if isinstance(item, EntryItem | MarkItem):
            sub.advance(item)
    assert sub.cursor == Cursor(4, 2, 0)


def test_new_rows_reach_the_streams_that_show_them_once_and_positions_move_for_all(
    store: Store,
) -> None:
    _dialog(store, "r1")
    _dialog(store, "r2")
    feed = _feed(store)
    watching, _ = feed.subscribe(Scope(root="r1"), feed.cursor())
    elsewhere, _ = feed.subscribe(Scope(root="r2"), feed.cursor())
    lists, _ = feed.subscribe(Scope(), feed.cursor())

    new = _say(store, "r1", "hello")
    feed.tick()
    feed.tick()  # nothing new: nothing handed out again

    got = _drain(watching)
    assert _entries(got) == [new]
    assert isinstance(got[-1], MarkItem)
    entry = got[0]
    assert isinstance(entry, EntryItem)
    assert watching.advance(entry) and not watching.advance(entry)  # a repeat is dropped
    for sub in (elsewhere, lists):
        got = _drain(sub)
        assert _entries(got) == []
        assert isinstance(got[-1], MarkItem) and got[-1].cursor.messages == new


def test_state_and_taskdoc_changes_are_announced(store: Store) -> None:
    _dialog(store, "r1")
    feed = _feed(store)
    task_page, _ = feed.subscribe(Scope(task="tasks/a.tsk"), feed.cursor())
    other_task, _ = feed.subscribe(Scope(task="tasks/b.tsk"), feed.cursor())

    store.add_question(
        QuestionRecord(
            id="q4h-1",
            dialog_id="r1",
            root_id="r1",
            headline="Which database?",
            body="",
            call_id="c1",
            course=1,
            asked_at=time.time(),
        )
    )
    store.record_taskdoc_change(
        TaskdocChange(
            task_path="tasks/a.tsk",
            section="goals.md",
            actor_member="human",
            ts=time.time(),
            hash_after="h",
            content_after="x",
        )
    )
    feed.tick()

    got = _drain(task_page)
    assert any(isinstance(i, StateItem) for i in got)
    (doc,) = [i for i in got if isinstance(i, TaskdocItem)]
    assert (doc.task, doc.section, doc.actor) == ("tasks/a.tsk", "goals.md", "human")
    assert not [i for i in _drain(other_task) if isinstance(i, TaskdocItem)]

    store.close_question("q4h-1", answer="SQLite", status="answered")
    feed.tick()
    assert any(isinstance(i, StateItem) for i in _drain(task_page))


def test_too_much_to_replay_is_a_reset(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feed_mod, "REPLAY_LIMIT", 3)
    _dialog(store, "r1")
    for n in range(5):
        _say(store, "r1", f"m{n}")
    feed = _feed(store)
    _, missed = feed.subscribe(Scope(root="r1"), Cursor())
    assert isinstance(missed[0], ResetItem) and isinstance(missed[-1], MarkItem)
    assert missed[-1].cursor.messages == 5


def test_chunks_of_this_process_go_to_the_stream_of_their_tree(store: Store) -> None:
    from mindloop.events.types import DriveStarted, TextChunk

    _dialog(store, "r1")
    feed = _feed(store)
    sub, _ = feed.subscribe(Scope(root="r1"), feed.cursor())
    other, _ = feed.subscribe(Scope(root="r2"), feed.cursor())
    feed.on_event(DriveStarted(dialog_id="r1", member="dev", task="tasks/a.tsk", root_id="r1"))
    feed.on_event(TextChunk(dialog_id="r1", text="Hel"))
    feed.on_event(TextChunk(dialog_id="r1", text="lo"))
    chunks = [i for i in _drain(sub) if isinstance(i, ChunkItem)]
    assert "".join(c.text for c in chunks) == "Hello"
    assert not _drain(other)
    assert feed.wake.is_set()  # a drive started: the store is read at once


def test_a_position_past_the_store_is_brought_back(store: Store) -> None:
    """A browser that kept a position from a store since replaced (or trimmed) still
    gets what is new, not nothing."""
    _dialog(store, "r1")
    feed = _feed(store)
    sub, _ = feed.subscribe(Scope(root="r1"), Cursor(10_000, 10_000, 10_000))
    new = _say(store, "r1", "after")
    feed.tick()
    assert _entries(_drain(sub)) == [new]


@given(st.integers(0, 10**17), st.integers(0, 10**17), st.integers(0, 10**17))
def test_positions_read_back_exactly(m: int, e: int, c: int) -> None:
    cursor = Cursor(m, e, c)
    assert Cursor.decode(cursor.encode()) == cursor


@given(st.text(max_size=40))
def test_anything_else_is_not_a_position(raw: str) -> None:
    try:
        cursor = Cursor.decode(raw)
    except CursorError:
        return
    assert cursor.encode() == raw.strip()
