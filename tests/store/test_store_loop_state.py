"""The loop state of a task (`store.loop_state`): a row of `tasks` plus the loop's cursor,
read back from a cache while the row says it is current; the passing CHECKs a BENCH node
depends on, one cursor per node (the state written at every phase stays the same size
however many nodes pass)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindloop.store import DialogRecord, Store
from mindloop.store import loop_state as ls
from mindloop.store.cursors import Cursors
from mindloop.store.tasks import TaskRecord
from tests.store.stores import KINDS, open_store

TASK = "tasks/t.tsk"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _store(tmp_path: Path, kind: str) -> Store:
    store = open_store(tmp_path / ".mindloop" / "state.sqlite", kind, durable=False)
    store.create_dialog(DialogRecord(id="r", root_id="r", member="dev", task_path=TASK))
    store.insert_task(TaskRecord(id="t1", task_path=TASK, root_id="r", topic="t"))
    return store


def test_passing_checks_are_rows_of_their_own_and_the_state_does_not_grow(
    tmp_path: Path, kind: str
) -> None:
    store = _store(tmp_path, kind)
    state = ls.get(store, TASK)
    assert state is not None

    def size() -> int:
        found = Cursors(store).get("r", ls.CURSOR)
        assert found is not None
        return len(json.dumps(found.value))

    state = ls.save(store, state.model_copy(update={"entry": 10}))
    first = size()
    for i in range(40):
        with store.tx():
            ls.record_checks(store, "r", {f"n{i}": (1000.0 + i, f"git:{i}")})
            state = ls.save(store, state.model_copy(update={"entry": 11 + i}))
    assert ls.checks(store, "r")["n7"] == (1007.0, "git:7") and len(ls.checks(store, "r")) == 40
    assert size() == first  # the same fields, whatever passed
    fresh = open_store(tmp_path / ".mindloop" / "state.sqlite", kind)  # another process
    read = ls.get(fresh, TASK)
    assert read is not None and read.entry == 50 and read.version == state.version
    store.close()
    fresh.close()


def test_marks_an_older_loop_cursor_held_become_rows_when_it_is_read(
    tmp_path: Path, kind: str
) -> None:
    """A loop state written before the marks had rows kept them in its cursor: the first
    read records them (nothing lost to the next save, which no longer writes them)."""
    store = _store(tmp_path, kind)
    state = ls.get(store, TASK)
    assert state is not None
    value = state.model_dump(mode="json", exclude=ls._NOT_IN_CURSOR)
    value["checked"] = {"n1": [1001.0, "git:a"], "n2": [1002.0, "git:b"]}
    Cursors(store).set("r", ls.CURSOR, value)
    fresh = open_store(tmp_path / ".mindloop" / "state.sqlite", kind)
    again = ls.get(fresh, TASK)
    assert again is not None
    ls.save(fresh, again.model_copy(update={"entry": 3}))
    assert ls.checks(fresh, "r") == {"n1": (1001.0, "git:a"), "n2": (1002.0, "git:b")}
    assert "checked" not in Cursors(fresh).get("r", ls.CURSOR).value  # type: ignore[union-attr]
    store.close()
    fresh.close()
