"""The loop state of a task (`store.loop_state`): a row of `tasks` (columns and its
`loop_state`), read back from a cache while the row says it is current; the passing CHECKs
a BENCH node depends on, one cursor per node (the state written at every phase stays the
same size however many nodes pass); a state an older mindloop kept in a cursor moves into
the row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindloop.store import DialogRecord, Store
from mindloop.store import loop_state as ls
from mindloop.store import schema as t
from mindloop.store.cursors import Cursors
from mindloop.store.tasks import TaskRecord
from tests.store.stores import KINDS, downgrade, open_store

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
        found = open_store(tmp_path / ".mindloop" / "state.sqlite", kind).task_by_root("r")
        assert found is not None and found.loop_state is not None
        return len(json.dumps(found.loop_state))

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


def test_marks_an_older_loop_state_held_become_rows_when_it_is_read(
    tmp_path: Path, kind: str
) -> None:
    """A loop state written before the marks had rows kept them in it: the first read
    records them (nothing lost to the next save, which no longer writes them)."""
    store = _store(tmp_path, kind)
    state = ls.get(store, TASK)
    assert state is not None
    value = state.model_dump(mode="json", exclude=ls._IN_COLUMNS)
    value["checked"] = {"n1": [1001.0, "git:a"], "n2": [1002.0, "git:b"]}
    downgrade(store, _set_loop_state(kind, value))
    fresh = open_store(tmp_path / ".mindloop" / "state.sqlite", kind)
    again = ls.get(fresh, TASK)
    assert again is not None
    ls.save(fresh, again.model_copy(update={"entry": 3}))
    assert ls.checks(fresh, "r") == {"n1": (1001.0, "git:a"), "n2": (1002.0, "git:b")}
    row = open_store(tmp_path / ".mindloop" / "state.sqlite", kind).task_by_root("r")
    assert row is not None and row.loop_state is not None and "checked" not in row.loop_state
    fresh.close()


def _set_loop_state(kind: str, value: dict[str, object]) -> str:
    text = json.dumps(value).replace("'", "''")
    cast = "::json" if kind == "postgres" else ""
    return f"UPDATE tasks SET loop_state = '{text}'{cast} WHERE root_id = 'r'"


def test_a_loop_state_kept_in_a_cursor_moves_into_its_row(tmp_path: Path, kind: str) -> None:
    """A database from before the state had its column: the migration moves each task's
    loop cursor into the row, and the state reads back as it was written."""
    db = tmp_path / ".mindloop" / "state.sqlite"
    store = _store(tmp_path, kind)
    state = ls.get(store, TASK)
    assert state is not None
    state = ls.save(store, state.model_copy(update={"entry": 7, "node_id": "n3"}))
    value = state.model_dump(mode="json", exclude=ls._IN_COLUMNS)
    Cursors(store).set("r", "loop", value)  # where the mindloop before the column kept it
    Cursors(store).set("free", "loop", {"entry": 1})  # no task's root: left alone
    before = t.MIGRATIONS.index(t._loop_state_in_row)
    downgrade(
        store,
        "ALTER TABLE tasks DROP COLUMN loop_state",
        f"UPDATE schema_version SET version = {before}",
    )
    migrated = open_store(db, kind)
    assert migrated.schema_version() == t.SCHEMA_VERSION
    back = ls.get(migrated, TASK)
    assert back is not None and (back.entry, back.node_id) == (7, "n3")
    assert Cursors(migrated).get("r", "loop") is None
    assert Cursors(migrated).get("free", "loop") is not None
    migrated.close()


def test_a_staged_state_is_read_in_its_transaction_and_written_once_with_what_follows(
    tmp_path: Path, kind: str
) -> None:
    """`stage`: a change held for the rest of the transaction — reads see it, the next
    save (of a state read through them) writes it with its own changes, `flush` writes it
    when nothing did; another process sees nothing until it is written."""
    store = _store(tmp_path, kind)
    first = ls.get(store, TASK)
    assert first is not None
    with store.tx():
        staged = ls.stage(store, first.model_copy(update={"entry": 3, "closed": True}))
        read = ls.get(store, TASK)
        assert read is staged and ls.by_root(store, "r") is staged
        # a writer in the same transaction (the human spoke) writes it with its change
        written = ls.save(store, read.model_copy(update={"drive_steps": 7}))
        assert ls.flush(store, TASK) is None  # nothing left to write
    assert written.version == first.version + 1
    other = open_store(tmp_path / ".mindloop" / "state.sqlite", kind)  # another process
    back = ls.get(other, TASK)
    assert back is not None and (back.entry, back.closed, back.drive_steps) == (3, True, 7)
    with store.tx():
        ls.stage(store, written.model_copy(update={"entry": 4}))
        flushed = ls.flush(store, TASK)
    assert flushed is not None and flushed.version == written.version + 1
    back = ls.get(other, TASK)
    assert back is not None and back.entry == 4
    with store.tx():  # a staged state forgotten: reads see the row again
        ls.stage(store, flushed.model_copy(update={"entry": 99}))
        ls.discard(store, TASK)
        again = ls.get(store, TASK)
        assert again is not None and again.entry == 4
    store.close()
    other.close()


def test_a_state_reads_back_as_written_with_its_empty_fields_left_out(
    tmp_path: Path, kind: str
) -> None:
    import typing

    # What is None is not written (a field that may be None defaults to None): a state
    # that had them set and cleared them reads back equal, from another connection too.
    for model in (ls.LoopState, ls.PhaseEnd, ls.Summary):
        for name, f in model.model_fields.items():
            if type(None) in typing.get_args(f.annotation):
                assert f.default is None, f"{model.__name__}.{name}"
    store = _store(tmp_path, kind)
    state = ls.get(store, TASK)
    assert state is not None
    end = ls.PhaseEnd(by=ls.EndedBy.TOOL, hint=ls.Hint.DO, summary=ls.Summary(progress="p"))
    full = state.model_copy(
        update={"phase": ls.Phase.DO, "node_id": "n1", "ended": end, "batch_end": {"a": 1}}
    )
    state = ls.save(store, full)
    cleared = state.model_copy(
        update={"node_id": None, "ended": end.model_copy(update={"hint": None}), "batch_end": None}
    )
    state = ls.save(store, cleared)
    fresh = open_store(tmp_path / ".mindloop" / "state.sqlite", kind)  # another process
    row = fresh.task_by_root("r")
    assert (
        row is not None and row.loop_state is not None and "null" not in json.dumps(row.loop_state)
    )
    assert ls.get(fresh, TASK) == state
    store.close()
    fresh.close()
