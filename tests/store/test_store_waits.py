"""The store's side of waits and approvals: a v4 database gains the new wait columns and
the kept-events table and keeps its wait rows; kept events are consumed once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa

from mindloop.store import Store, WaitRecord, WaitStatus
from mindloop.store import schema as t
from mindloop.store.waits import all_kept_events, consume_event, keep_event, kept_events


def _wait(store: Store, wid: str) -> None:
    store.add_wait(WaitRecord(id=wid, dialog_id="d1", kind="timer", key="k", due_at=5.0))


def test_a_v4_database_gains_the_wait_columns_and_keeps_its_waits(tmp_path: Path) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    s = Store(db)
    _wait(s, "w-old")
    s.close()
    con = sqlite3.connect(db)  # back to v4, as the previous mindloop left it
    for col in ("node", "mode", "snapshot", "reminders"):
        con.execute(f"ALTER TABLE waits DROP COLUMN {col}")
    con.execute("DROP TABLE wait_events")
    con.execute("UPDATE schema_version SET version = 4")
    con.commit()
    con.close()
    s = Store(db)
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


def test_a_kept_event_is_consumed_once_and_only_where_it_is_scoped(tmp_path: Path) -> None:
    s = Store(tmp_path / "state.sqlite")
    anyone = keep_event(s, "tool", "k1", {"call_key": "k1"})
    mine = keep_event(s, "tool", "k1", {"call_key": "k1"}, dialog_id="d1")
    assert [e.id for e in kept_events(s, "tool", "k1", "d2")] == [anyone]
    assert [e.id for e in kept_events(s, "tool", "k1", "d1")] == [anyone, mine]
    assert consume_event(s, anyone, "w-1")
    assert not consume_event(s, anyone, "w-2")  # once
    assert [e.id for e in all_kept_events(s)] == [mine]
    s.close()


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
