"""The messages a store keeps of a dialog's course (`store/tails.py`): `messages_after`
(and a cursor's `message_batch`) answers from what this store read or appended since, and only while that provably is
what the database holds — checked against a second store reading the file, through any
mix of appends, reads, other connections' writes and rolled-back transactions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.store import DialogRecord, MessageRecord, Store, tails
from mindloop.store.cursors import message_batch
from tests.store.stores import open_store, statements_run

pytestmark = pytest.mark.sqlite_only  # PostgreSQL keeps nothing past a transaction

DIALOGS = ("d1", "d2")


def _open(path: Path, *, create: bool = False) -> Store:
    s = open_store(path, "sqlite")
    for d in DIALOGS if create else ():
        s.create_dialog(DialogRecord(id=d, root_id=d, member="dev", task_path="tasks/x.tsk"))
    return s


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    ours = _open(tmp_path / "state.sqlite", create=True)
    theirs = _open(tmp_path / "state.sqlite")
    yield ours, theirs
    ours.close()
    theirs.close()


def _msg(dialog: str, text: str, course: int = 1) -> MessageRecord:
    return MessageRecord(dialog_id=dialog, course=course, kind="user", data={"text": text})


def _shown(recs: list[MessageRecord]) -> list[tuple[int, str, str]]:
    return [(r.id, r.dialog_id, r.data["text"]) for r in recs]


def _reads(store: Store, fn: Callable[[], object]) -> list[str]:
    return [s for s in statements_run(store, fn) if s.lstrip().upper().startswith("SELECT")]


def test_what_this_store_appended_is_not_read_back(two: tuple[Store, Store]) -> None:
    ours, theirs = two
    ours.append_message("d1", "user", {"text": "a"})
    first = ours.messages_after("d1", 1, 0)  # read once: the tail starts here
    last = first[-1].id
    ours.append_messages([_msg("d1", "b"), _msg("d1", "c")])
    assert _reads(ours, lambda: ours.messages_after("d1", 1, last)) == []
    got = ours.messages_after("d1", 1, last)
    assert _shown(got) == _shown(theirs.messages_after("d1", 1, last))
    assert [r.data["text"] for r in got] == ["b", "c"]


def test_another_connections_append_is_seen(two: tuple[Store, Store]) -> None:
    ours, theirs = two
    ours.messages_after("d1", 1, 0)
    theirs.append_message("d1", "user", {"text": "theirs"})
    ours.append_message("d1", "user", {"text": "ours"})
    assert [r.data["text"] for r in ours.messages_after("d1", 1, 0)] == ["theirs", "ours"]


def test_a_rolled_back_append_is_not_kept(two: tuple[Store, Store]) -> None:
    ours, _ = two
    ours.messages_after("d1", 1, 0)
    with pytest.raises(RuntimeError), ours.tx():
        ours.append_message("d1", "user", {"text": "lost"})
        raise RuntimeError("rolled back")
    assert ours.messages_after("d1", 1, 0) == []


def test_a_record_handed_out_is_a_copy(two: tuple[Store, Store]) -> None:
    ours, _ = two
    ours.messages_after("d1", 1, 0)
    ours.append_message("d1", "user", {"text": "a"})
    got = ours.messages_after("d1", 1, 0)[0]
    got.generation_id = 99
    assert ours.messages_after("d1", 1, 0)[0].generation_id is None


def test_what_callers_change_of_their_records_is_not_kept(two: tuple[Store, Store]) -> None:
    """The record given to `append_messages`, the one it returns and the one a read
    returns are the caller's: changing their fields or their data changes nothing the
    store keeps."""
    ours, theirs = two
    ours.messages_after("d1", 1, 0)
    given = _msg("d1", "a")
    (stored,) = ours.append_messages([given])
    given.data["text"] = "changed after the append"
    stored.data["text"] = "changed by the appender"
    stored.course = 7
    read = ours.messages_after("d1", 1, 0)[0]
    read.data["text"] = "changed by a reader"
    read.kind = "assistant"
    again = ours.messages_after("d1", 1, 0)
    assert _shown(again) == _shown(theirs.messages_after("d1", 1, 0))
    assert again[0].data == {"text": "a"} and again[0].kind == "user" and again[0].course == 1


def test_the_tail_keeps_the_newest_and_reads_older_ones_again(two: tuple[Store, Store]) -> None:
    ours, theirs = two
    ours.messages_after("d1", 1, 0)
    ours.append_messages([_msg("d1", str(i)) for i in range(tails.KEPT + 10)])
    everything = ours.messages_after("d1", 1, 0)  # older than the tail: from the database
    assert len(everything) == tails.KEPT + 10
    assert _shown(everything) == _shown(theirs.messages_after("d1", 1, 0))


def test_a_batch_the_tail_holds_is_not_read(two: tuple[Store, Store]) -> None:
    """A cursor's batch (`message_batch`) of messages the tail holds comes from it: the
    first `limit` of them, as the database has them; another connection's append is
    seen."""
    ours, theirs = two
    ours.messages_after("d1", 1, 0)
    ours.append_messages([_msg("d1", str(i)) for i in range(5)])
    first = ours.messages_after("d1", 1, 0)[0].id
    assert _reads(ours, lambda: message_batch(ours, "d1", 1, first, 2)) == []
    got = message_batch(ours, "d1", 1, first, 2)
    assert [r.data["text"] for r in got] == ["1", "2"]
    assert _shown(got) == _shown(message_batch(theirs, "d1", 1, first, 2))
    theirs.append_message("d1", "user", {"text": "theirs"})
    got = message_batch(ours, "d1", 1, first, 10)
    assert [r.data["text"] for r in got] == ["1", "2", "3", "4", "theirs"]


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from(DIALOGS), st.integers(1, 3), st.booleans()),
        st.tuples(st.just("theirs"), st.sampled_from(DIALOGS), st.integers(1, 2), st.booleans()),
        st.tuples(st.just("read"), st.sampled_from(DIALOGS), st.integers(0, 12), st.booleans()),
        st.tuples(st.just("rollback"), st.sampled_from(DIALOGS), st.integers(1, 2), st.booleans()),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(ops=_OPS)
def test_reads_always_match_the_database(tmp_path_factory: pytest.TempPathFactory, ops) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("tails") / "state.sqlite"
    ours = _open(path, create=True)
    theirs = _open(path)
    try:
        n = 0
        for op, dialog, k, course2 in ops:
            course = 2 if course2 else 1
            if op == "append":
                ours.append_messages([_msg(dialog, f"o{n + i}", course) for i in range(k)])
            elif op == "theirs":
                theirs.append_messages([_msg(dialog, f"t{n + i}", course) for i in range(k)])
            elif op == "rollback":
                with pytest.raises(RuntimeError), ours.tx():
                    ours.append_messages([_msg(dialog, f"r{n + i}", course) for i in range(k)])
                    raise RuntimeError("rolled back")
            else:
                assert _shown(ours.messages_after(dialog, course, k)) == _shown(
                    theirs.messages_after(dialog, course, k)
                )
                assert _shown(message_batch(ours, dialog, course, k, 3)) == _shown(
                    message_batch(theirs, dialog, course, k, 3)
                )
            n += k
        for dialog in DIALOGS:
            for course in (1, 2):
                assert _shown(ours.messages_after(dialog, course, 0)) == _shown(
                    theirs.messages_after(dialog, course, 0)
                )
    finally:
        ours.close()
        theirs.close()
