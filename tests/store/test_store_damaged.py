"""A damaged or foreign `.mindloop/state.sqlite`: `Store` raises one `StoreError` naming
the file (not SQLAlchemy's DatabaseError), and writes nothing to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.store import Store, StoreError


def _state(tmp_path: Path, content: bytes) -> Path:
    db = tmp_path / ".mindloop" / "state.sqlite"
    db.parent.mkdir()
    db.write_bytes(content)
    return db


def test_a_file_that_is_not_a_database_is_a_store_error_and_left_alone(tmp_path: Path) -> None:
    content = b"not a database at all\n" * 100
    db = _state(tmp_path, content)
    with pytest.raises(StoreError) as err:
        Store.for_rtws(tmp_path)
    assert str(err.value) == f"{db}: not a usable mindloop state database (file is not a database)"
    assert db.read_bytes() == content
    assert sorted(p.name for p in db.parent.iterdir()) == ["state.sqlite"]


def test_a_database_with_a_damaged_schema_page_is_left_alone(tmp_path: Path) -> None:
    """A valid SQLite header in rollback-journal mode: opening a store switches the
    journal to WAL, which rewrites a healthy file's header; a damaged one keeps its bytes."""
    scratch = tmp_path / "scratch.sqlite"
    con = sqlite3.connect(scratch)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    good = scratch.read_bytes()
    assert good[18:20] == b"\x01\x01"  # rollback journal, not WAL
    damaged = good[:100] + b"\xff" * 3996 + good[4096:]  # page 1 past the header
    db = _state(tmp_path, damaged)
    with pytest.raises(StoreError, match=r"not a usable mindloop state database \(.*malformed"):
        Store(db)
    assert db.read_bytes() == damaged


def test_the_runtime_passes_the_store_error_on(rtws: Path) -> None:
    db = _state(rtws, b"\x00garbage" * 64)
    with pytest.raises(StoreError, match=r"state\.sqlite: not a usable mindloop state database"):
        DialogRuntime(rtws)
    assert db.read_bytes() == b"\x00garbage" * 64
