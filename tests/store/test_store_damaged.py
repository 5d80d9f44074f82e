"""A damaged or foreign `.mindloop/state.sqlite`: `Store` raises one `StoreError` naming
the file (not SQLAlchemy's DatabaseError), and writes nothing to it."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.store import Store, StoreError
from mindloop.store.schema import SCHEMA_VERSION
from tests.store import claim_race

# The SQLite state file itself (damaged, foreign, read-only): not a PostgreSQL matter.
pytestmark = pytest.mark.sqlite_only


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


# ---------------------------------------------------------------------- judged before use
#
# Only a mindloop database, or a file mindloop itself is making, is ever used. Anything
# else is refused with one line naming it, and left exactly as it was: same bytes, same
# modification time, nothing created beside it.


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.name: (p.read_bytes() if p.is_file() else b"<dir>", p.stat().st_mtime_ns)
        for p in sorted(directory.iterdir())
    }


def _foreign(db: Path, *statements: str, wal: bool = False) -> None:
    db.parent.mkdir(exist_ok=True)
    con = sqlite3.connect(db)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    for sql in statements:
        con.execute(sql)
    con.commit()
    con.close()


def _refused(tmp_path: Path, match: str) -> str:
    db = tmp_path / ".mindloop" / "state.sqlite"
    before = _snapshot(db.parent)
    with pytest.raises(StoreError, match=match) as err:
        Store.for_rtws(tmp_path)
    assert _snapshot(db.parent) == before
    assert "\n" not in str(err.value) and str(err.value).startswith(str(db))
    return str(err.value)


def test_a_zero_length_file_mindloop_did_not_create_is_refused(tmp_path: Path) -> None:
    _state(tmp_path, b"")
    msg = _refused(tmp_path, "an empty file that mindloop did not create")
    assert "delete it" in msg


def test_a_foreign_database_is_refused_and_gets_no_tables(tmp_path: Path) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    _foreign(db, "CREATE TABLE notes (body TEXT)", "INSERT INTO notes VALUES ('mine')")
    _refused(tmp_path, r"not a mindloop state database \(its tables are notes")
    con = sqlite3.connect(db)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    con.close()
    assert tables == ["notes"]


def test_a_foreign_wal_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    _foreign(tmp_path / ".mindloop" / "state.sqlite", "CREATE TABLE t (x)", wal=True)
    _refused(tmp_path, "not a mindloop state database")


def test_a_foreign_database_with_its_own_dialogs_table_is_refused_unaltered(
    tmp_path: Path,
) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    _foreign(db, "CREATE TABLE dialogs (id INTEGER PRIMARY KEY, speaker TEXT, line TEXT)")
    _refused(tmp_path, r"its tables are dialogs")
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(dialogs)")]
    con.close()
    assert cols == ["id", "speaker", "line"]


def test_a_schema_version_table_alone_does_not_make_a_mindloop_database(tmp_path: Path) -> None:
    _foreign(
        tmp_path / ".mindloop" / "state.sqlite",
        "CREATE TABLE schema_version (version INTEGER)",
        "INSERT INTO schema_version VALUES (1)",
    )
    _refused(tmp_path, "has a schema_version table but no dialogs")


def test_someone_elses_empty_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    _foreign(db, "PRAGMA user_version = 7")  # a valid SQLite file without any table
    assert db.stat().st_size > 0
    _refused(tmp_path, "an empty database that mindloop did not create")


def test_a_directory_at_the_state_path_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / ".mindloop" / "state.sqlite").mkdir(parents=True)
    assert _refused(tmp_path, "is a directory").endswith("nothing was changed")


def test_a_new_state_file_appears_complete_and_marked_as_mindloops(tmp_path: Path) -> None:
    """Made under a temporary name and linked into place: no zero-length state file ever
    exists, and the file says it is mindloop's (so an interrupted start is recognised)."""
    Store.for_rtws(tmp_path).close()
    db = tmp_path / ".mindloop" / "state.sqlite"
    assert sorted(p.name for p in db.parent.iterdir()) == ["state.sqlite"]
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA application_id").fetchone()[0] == int.from_bytes(b"mlop", "big")
    con.close()


def test_an_interrupted_start_of_mindloop_is_taken_up(tmp_path: Path) -> None:
    """A file mindloop made whose schema was not written yet (killed in between) is
    used: it has mindloop's mark and no table."""
    db = tmp_path / ".mindloop" / "state.sqlite"
    db.parent.mkdir()
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA application_id = {int.from_bytes(b'mlop', 'big')}")
    con.close()
    s = Store.for_rtws(tmp_path)
    assert s.schema_version() > 0
    s.close()


def test_processes_starting_together_share_one_new_state_file(tmp_path: Path) -> None:
    """Each makes its own complete file and links it into place; all but one find the
    name taken and use that file: nobody meets a half-made (empty) state file."""
    ctx = multiprocessing.get_context("spawn")
    owners = [f"p{i}" for i in range(4)]
    start, results = ctx.Barrier(len(owners)), ctx.Queue()
    procs = [
        ctx.Process(target=claim_race.first_start, args=(str(tmp_path), o, start, results))
        for o in owners
    ]
    for p in procs:
        p.start()
    versions = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert versions == [SCHEMA_VERSION] * len(owners)
    db = tmp_path / ".mindloop" / "state.sqlite"
    assert sorted(p.name for p in db.parent.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "state.sqlite"
    ]
    s = Store(db)
    assert sorted(d.id for d in s.list_dialogs()) == owners
    s.close()
