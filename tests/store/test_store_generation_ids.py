"""Generation ids reserved ahead of the write (`Store.reserve_generation_id`).

A generation whose tool calls run before it is written (its step commits once, with
their results) needs its id first: the calls' keys name it. On PostgreSQL it is drawn
from the table's sequence. On SQLite a reserved id is beyond every row and every id the
store handed out, so no write of this store takes it; a write of another connection
may, and then writing under it fails with `IdTaken`, writing nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.store import GenerationRecord, IdTaken, MessageRecord, Store
from tests.store.stores import KINDS, open_store


def _gen(did: str = "d1", gid: int = 0) -> GenerationRecord:
    return GenerationRecord(id=gid, dialog_id=did, provider="p", model="m", started_at=1.0)


def _msg(did: str = "d1") -> MessageRecord:
    return MessageRecord(dialog_id=did, kind="assistant", data={"text": "hi"})


@pytest.fixture(params=KINDS)
def path_kind(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, str]:
    return tmp_path / ".mindloop" / "state.sqlite", request.param


def test_reserved_ids_are_beyond_every_row_and_every_id_handed_out(
    path_kind: tuple[Path, str],
) -> None:
    store = open_store(*path_kind)
    try:
        first, _ = store.record_generation(_gen(), [])
        a = store.reserve_generation_id()
        b = store.reserve_generation_id()
        assert first.id < a < b
        later, _ = store.record_generation(_gen(), [])  # not under a reserved id
        assert later.id > b
        g, msgs = store.record_generation(_gen(gid=a), [_msg()])  # written after `later`
        assert g.id == a and msgs[0].generation_id == a
        assert [x.id for x in store.generations("d1")] == [first.id, a, later.id]
    finally:
        store.close()


def test_an_id_another_connection_took_is_refused_and_nothing_is_written(
    path_kind: tuple[Path, str],
) -> None:
    path, kind = path_kind
    store = open_store(path, kind)
    other = open_store(path, kind)
    try:
        store.record_generation(_gen(), [])
        gid = store.reserve_generation_id()
        taken, _ = other.record_generation(_gen("d2"), [])  # it does not know of it
        if kind == "postgresql":  # drawn from the table's sequence: nobody else gets it
            assert taken.id != gid
            assert store.record_generation(_gen(gid=gid), [])[0].id == gid
            return
        assert taken.id == gid  # SQLite: the next id is the largest + 1
        with pytest.raises(IdTaken), store.tx():
            store.append_messages([_msg("d3")])
            store.record_generation(_gen(gid=gid), [_msg()])
        assert store.generations("d1")[1:] == [] and store.load_history("d1") == []
        assert store.load_history("d3") == []  # the caller's transaction rolled back
        # a reservation now sees what the other connection wrote
        assert store.reserve_generation_id() > taken.id
    finally:
        other.close()
        store.close()


@pytest.mark.sqlite_only  # SQLite's data_version tells what other connections committed
def test_ids_cost_no_statement_while_nobody_else_wrote(tmp_path: Path) -> None:
    store = Store(tmp_path / ".mindloop" / "state.sqlite")
    try:
        before = store.stats.statements
        store.record_generation(_gen(), [])  # nothing reserved: the database's next id
        assert store.stats.statements - before == 1  # the insert
        before = store.stats.statements
        gid = store.reserve_generation_id()
        # one check that no other connection committed (SQLite's data_version), no read
        assert store.stats.statements - before == 1
        with store.tx():
            before = store.stats.statements
            store.record_generation(_gen(gid=gid), [])
        assert store.stats.statements - before == 2  # data_version in the tx, the insert
        before = store.stats.statements
        store.record_generation(_gen(), [])  # the reserved id is written: the next one
        assert store.stats.statements - before == 1
    finally:
        store.close()
