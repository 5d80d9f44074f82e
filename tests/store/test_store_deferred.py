"""Writes held back to coalesce them (`Store.deferred`): run before anything reads, and at
the commit, once per key; dropped when the transaction rolls back."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.store import DialogRecord, Store
from tests.store.stores import KINDS, open_store


@pytest.fixture(params=KINDS)
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    s = open_store(tmp_path / ".mindloop" / "state.sqlite", request.param)
    yield s
    s.close()


_DIALOG = DialogRecord(id="d1", root_id="d1", member="dev", task_path="tasks/x.tsk")


class _Rename:
    """Held back: the dialog's member, as last set."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.member = ""
        self.runs = 0

    def __call__(self) -> None:
        self.runs += 1
        self.store.update_dialog("d1", member=self.member)


def _rename(store: Store, member: str) -> _Rename:
    held = store.deferred("rename", lambda: _Rename(store))
    held.member = member
    return held


def test_held_back_writes_run_once_at_the_commit(store: Store) -> None:
    store.create_dialog(_DIALOG)
    with store.tx():
        first = _rename(store, "a")
        again = _rename(store, "b")  # the same, while nothing read
        assert again is first and first.runs == 0
    assert first.runs == 1 and store.get_dialog("d1").member == "b"


def test_a_read_runs_them_first_and_the_next_write_holds_anew(store: Store) -> None:
    store.create_dialog(_DIALOG)
    with store.tx():
        first = _rename(store, "a")
        assert store.get_dialog("d1").member == "a" and first.runs == 1
        second = _rename(store, "b")
        assert second is not first
    assert second.runs == 1 and first.runs == 1 and store.get_dialog("d1").member == "b"


def test_held_back_writes_rolled_back_are_gone(store: Store) -> None:
    store.create_dialog(_DIALOG)
    with pytest.raises(RuntimeError), store.tx():
        held = _rename(store, "a")
        raise RuntimeError("the step failed")
    with store.tx():  # nothing is left held for the next transaction
        pass
    assert held.runs == 0 and store.get_dialog("d1").member == "dev"


def test_a_failing_flush_at_the_commit_rolls_everything_back(store: Store) -> None:
    store.create_dialog(_DIALOG)

    def broken() -> None:
        raise RuntimeError("conflict")

    with pytest.raises(RuntimeError), store.tx():
        store.update_dialog("d1", member="written")
        store.deferred("broken", lambda: broken)
    assert store.get_dialog("d1").member == "dev"
