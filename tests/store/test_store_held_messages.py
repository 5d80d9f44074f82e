"""Messages held for the next append of a transaction (`Store.hold_messages`).

A step that commits its turn with its tools' results writes the turn's messages and the
results in one statement: the turn's are held, and go in ahead of the next messages the
transaction appends — or as soon as anything reads the messages table, writes a
statement naming it, or the transaction commits. Held messages rolled back are gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.store import DialogRecord, MessageRecord, Store
from tests.store.stores import KINDS, open_store, statements_run


def _msg(text: str, did: str = "d1") -> MessageRecord:
    return MessageRecord(dialog_id=did, kind="note", data={"text": text})


@pytest.fixture(params=KINDS)
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    s = open_store(tmp_path / ".mindloop" / "state.sqlite", request.param)
    yield s
    s.close()


def _texts(store: Store, did: str = "d1") -> list[str]:
    return [m.data["text"] for m in store.load_history(did)]


def test_held_messages_go_in_ahead_of_the_next_append(store: Store) -> None:
    store.append_messages([_msg("before")])
    with store.tx():
        receipt = store.hold_messages([_msg("turn"), _msg("call")])
        assert receipt == []
        own = store.append_messages([_msg("result")])
        assert [m.data["text"] for m in receipt] == ["turn", "call"]
        assert [m.data["text"] for m in own] == ["result"]  # the caller's only
    assert _texts(store) == ["before", "turn", "call", "result"]
    assert receipt[0].id < receipt[1].id < own[0].id


def test_reads_see_held_messages_and_a_commit_writes_them(store: Store) -> None:
    store.append_messages([_msg("before")])
    last = store.load_history("d1")[-1].id
    store.messages_after("d1", 1, last)  # the tail the store keeps
    with store.tx():
        receipt = store.hold_messages([_msg("turn")])
        assert [m.data["text"] for m in store.messages_after("d1", 1, last)] == ["turn"]
    assert len(receipt) == 1 and _texts(store) == ["before", "turn"]
    with store.tx():
        receipt = store.hold_messages([_msg("alone")])
    assert [m.data["text"] for m in receipt] == ["alone"] and _texts(store)[-1] == "alone"


def test_held_messages_rolled_back_are_gone(store: Store) -> None:
    with pytest.raises(RuntimeError), store.tx():
        receipt = store.hold_messages([_msg("turn")])
        raise RuntimeError("the step failed")
    assert receipt == [] and _texts(store) == []
    with store.tx():  # nothing is left held for the next transaction
        store.append_messages([_msg("next")])
    assert _texts(store) == ["next"]


def test_a_tree_deleted_meanwhile_takes_held_messages_with_it(store: Store) -> None:
    store.create_dialog(DialogRecord(id="d1", root_id="d1", member="dev", task_path="tasks/x.tsk"))
    with store.tx():
        store.hold_messages([_msg("turn")])
        assert store.delete_tree("d1") == ["d1"]
    assert _texts(store) == []


@pytest.mark.sqlite_only  # counts the statements SQLite runs
def test_held_messages_and_the_next_append_are_one_statement(tmp_path: Path) -> None:
    store = Store(tmp_path / ".mindloop" / "state.sqlite")
    try:

        def step() -> None:
            with store.tx():
                store.hold_messages([_msg("turn"), _msg("call")])
                store.append_messages([_msg("result")])

        inserts = [s for s in statements_run(store, step) if s.startswith("INSERT")]
        assert len(inserts) == 1 and inserts[0].count("'note'") == 3
    finally:
        store.close()
