"""The store's side of waits and approvals, on every dialect: an older database gains the
new wait columns and the kept-events table and keeps its wait rows; kept events are
consumed once, where they are scoped; the statements compile for PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from mindloop.store import Store, WaitRecord, WaitStatus
from mindloop.store import schema as t
from mindloop.store.waits import all_kept_events, consume_event, keep_event, kept_events
from tests.store.stores import KINDS, downgrade, open_store


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(tmp_path: Path, kind: str) -> Iterator[Store]:
    s = open_store(tmp_path / ".mindloop" / "state.sqlite", kind)
    yield s
    s.close()


def test_an_older_database_gains_the_wait_columns_and_keeps_its_waits(
    tmp_path: Path, kind: str
) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    s = open_store(db, kind)
    s.add_wait(WaitRecord(id="w-old", dialog_id="d1", kind="timer", key="k", due_at=5.0))
    # as the mindloop before this migration left it (later migrations run again after it)
    before = t.MIGRATIONS.index(t._waits_and_approvals)
    downgrade(
        s,
        *(f"ALTER TABLE waits DROP COLUMN {c}" for c in ("node", "mode", "snapshot", "reminders")),
        "DROP TABLE wait_events",
        f"UPDATE schema_version SET version = {before}",
    )
    s = open_store(db, kind)
    assert s.schema_version() == t.SCHEMA_VERSION
    old = s.get_wait("w-old")
    assert (old.status, old.mode, old.reminders, old.node, old.snapshot) == (
        WaitStatus.OPEN,
        "all",
        0,
        None,
        None,
    )
    assert all_kept_events(s) == []
    s.close()


def test_a_kept_event_is_consumed_once_and_only_where_it_is_scoped(store: Store) -> None:
    anyone = keep_event(store, "tool", "k1", {"call_key": "k1"})
    mine = keep_event(store, "tool", "k1", {"call_key": "k1"}, dialog_id="d1")
    assert [e.id for e in kept_events(store, "tool", "k1", "d2")] == [anyone]
    assert [e.id for e in kept_events(store, "tool", "k1", "d1")] == [anyone, mine]
    assert consume_event(store, anyone, "w-1")
    assert not consume_event(store, anyone, "w-2")  # once
    assert [e.id for e in all_kept_events(store)] == [mine]


def test_the_wait_statements_compile_for_postgresql() -> None:
    """Nothing of the waits' store is SQLite-only SQL."""
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateTable

    from mindloop.store import waits as rows

    found = [v for v in vars(rows).values() if isinstance(v, sa.Executable)]
    assert len(found) >= 9
    for stmt in found:
        stmt.compile(dialect=postgresql.dialect())
    CreateTable(t.wait_events).compile(dialect=postgresql.dialect())
