"""Claims: one driver per dialog across processes (an owner id and an expiry, taken in one
conditional update that also marks the dialog running, renewed per step, released when
the drive settles), and the queries that respect them (drivable, recovery)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from mindloop.store import DialogRecord, QuestionRecord, Store
from mindloop.store import schema as t
from mindloop.store import statements as q
from tests.store import claim_race
from tests.store.stores import KINDS, downgrade, open_store, url_for

T0 = 1_000_000.0  # a fixed "now" for the single-process tests
TTL = 30.0


def _dialog(store: Store, did: str) -> None:
    store.create_dialog(DialogRecord(id=did, root_id=did, member="dev", task_path="t"))


@pytest.fixture(params=KINDS)
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    s = open_store(tmp_path / ".mindloop" / "state.sqlite", request.param)
    for did in ("a", "b"):
        _dialog(s, did)
    yield s
    s.close()


def test_a_claim_marks_the_dialog_running_and_is_exclusive_until_it_expires(
    store: Store,
) -> None:
    store.update_dialog("a", needs_drive=True)
    assert store.claim_dialog("a", "p1", TTL, now=T0)
    rec = store.get_dialog("a")
    assert (rec.status, rec.needs_drive) == ("running", False)
    assert (rec.claim_owner, rec.claim_expires) == ("p1", T0 + TTL)
    assert not store.claim_dialog("a", "p2", TTL, now=T0 + TTL - 1)  # still held
    assert store.claim_dialog("a", "p1", TTL, now=T0 + 1)  # the holder may take it again
    assert store.claim_dialog("a", "p2", TTL, now=T0 + 1 + TTL + 0.5)  # expired: taken over
    assert store.get_dialog("a").claim_owner == "p2"
    assert not store.claim_dialog("nope", "p1", TTL, now=T0)


def test_renew_extends_the_holders_claim_and_fails_once_it_was_taken_over(store: Store) -> None:
    assert store.claim_dialog("a", "p1", TTL, now=T0)
    assert store.renew_claim("a", "p1", TTL, now=T0 + 20)
    assert store.get_dialog("a").claim_expires == T0 + 20 + TTL
    assert not store.claim_dialog("a", "p2", TTL, now=T0 + TTL + 1)  # renewed: still held
    assert store.claim_dialog("a", "p2", TTL, now=T0 + 20 + TTL + 1)
    assert not store.renew_claim("a", "p1", TTL)
    assert store.get_dialog("a").claim_owner == "p2"


def test_only_the_owner_releases_a_claim(store: Store) -> None:
    assert store.claim_dialog("a", "p1", TTL, now=T0)
    assert not store.release_claim("a", "p2")
    assert store.get_dialog("a").claim_owner == "p1"
    assert store.release_claim("a", "p1")
    rec = store.get_dialog("a")
    assert (rec.claim_owner, rec.claim_expires) == (None, None)
    assert not store.release_claim("a", "p1")
    assert store.claim_dialog("a", "p2", TTL, now=T0)  # free again at once


def test_release_commits_with_the_callers_final_status_or_not_at_all(store: Store) -> None:
    assert store.claim_dialog("a", "p1", TTL, now=T0)
    with pytest.raises(RuntimeError), store.tx(durable=False):
        store.update_dialog("a", status="idle")
        assert store.release_claim("a", "p1")
        raise RuntimeError("the process dies before the commit")
    rec = store.get_dialog("a")
    assert (rec.status, rec.claim_owner) == ("running", "p1")
    with store.tx(durable=False):
        store.update_dialog("a", status="idle")
        store.release_claim("a", "p1")
    rec = store.get_dialog("a")
    assert (rec.status, rec.claim_owner) == ("idle", None)


def test_a_claim_is_one_statement_and_renewing_adds_no_flush(store: Store) -> None:
    stats = store.stats
    before = (stats.statements, stats.durable_commits, stats.lazy_commits)
    assert store.claim_dialog("a", "p1", TTL)
    assert (stats.statements, stats.durable_commits, stats.lazy_commits) == (
        before[0] + 1,
        before[1],
        before[2] + 1,
    )
    # the engine renews at every step inside the step's lazy commit: no fsync of its own
    durable = stats.durable_commits
    for _ in range(5):
        with store.tx(durable=False):
            store.append_message("a", "note", {"text": "step"})
            assert store.renew_claim("a", "p1", TTL)
    assert stats.durable_commits == durable
    assert store.renew_claim("a", "p1", TTL)  # on its own: lazy too
    assert stats.durable_commits == durable


def test_drivable_leaves_out_and_alone_what_another_live_process_holds(store: Store) -> None:
    assert store.claim_dialog("a", "p1", TTL, now=T0)
    store.update_dialog("a", needs_drive=True)  # e.g. a reply arrived while p1 drives it
    store.update_dialog("b", needs_drive=True)
    assert store.drivable_dialogs("p2", now=T0 + 1) == ["b"]
    assert store.drivable_dialogs(now=T0 + 1) == ["b"]  # no owner: every claim is another's
    assert sorted(store.drivable_dialogs("p1", now=T0 + 1)) == ["a", "b"]
    assert sorted(store.drivable_dialogs("p2", now=T0 + TTL + 1)) == ["a", "b"]  # p1 died

    # a held dialog that waits (an open question) is not parked by another process either
    store.add_question(
        QuestionRecord(
            id="q4h-1", dialog_id="a", root_id="a", headline="h", body="b", call_id="c", course=1
        )
    )
    assert store.drivable_dialogs("p2", now=T0 + 1) == ["b"]
    rec = store.get_dialog("a")
    assert (rec.status, rec.needs_drive) == ("running", True)
    assert store.drivable_dialogs("p1", now=T0 + 1) == ["b"]
    rec = store.get_dialog("a")
    assert (rec.status, rec.needs_drive) == ("waiting", False)


def test_a_reservation_keeps_others_off_a_dialog_until_its_owner_drives_or_it_expires(
    store: Store,
) -> None:
    """The process that posts a message and drives it next reserves the claim with the
    post: the dialog stays marked to drive (and not running), others leave it alone, its
    owner's drive takes the claim; a reservation of someone else's live drive fails."""
    with store.tx():
        store.update_dialog("a", needs_drive=True)
        assert store.reserve_dialog("a", "p1", TTL, now=T0)
    rec = store.get_dialog("a")
    assert (rec.status, rec.needs_drive) == ("idle", True)
    assert (rec.claim_owner, rec.claim_expires) == ("p1", T0 + TTL)
    assert store.drivable_dialogs("p2", now=T0 + 1) == []
    assert not store.claim_dialog("a", "p2", TTL, now=T0 + 1)
    assert store.drivable_dialogs("p1", now=T0 + 1) == ["a"]
    assert store.drivable_dialogs("p2", now=T0 + TTL + 1) == ["a"]  # p1 never came: expired
    assert store.held_claims() == [("a", "p1")]  # recovery sees it (a dead owner's ends)
    assert store.claim_dialog("a", "p1", TTL, now=T0 + 2)
    assert not store.reserve_dialog("a", "p2", TTL, now=T0 + 3)  # p1 drives it
    assert store.get_dialog("a").claim_owner == "p1"


def test_parking_drops_a_reservation_but_not_the_claim_of_a_drive(store: Store) -> None:
    """A reserved dialog found waiting on others is parked without its reservation: the
    process that resolves the wait may drive it. A running drive keeps its claim."""
    for did in ("a", "b"):
        store.update_dialog(did, needs_drive=True)
        store.add_question(
            QuestionRecord(
                id=f"q4h-{did}",
                dialog_id=did,
                root_id=did,
                headline="h",
                body="b",
                call_id="c",
                course=1,
            )
        )
    assert store.reserve_dialog("a", "p1", TTL, now=T0)
    assert store.claim_dialog("b", "p1", TTL, now=T0)
    store.update_dialog("b", needs_drive=True)
    assert store.drivable_dialogs("p1", now=T0 + 1) == []
    a, b = store.get_dialog("a"), store.get_dialog("b")
    assert (a.status, a.needs_drive, a.claim_owner, a.claim_expires) == (
        "waiting",
        False,
        None,
        None,
    )
    assert (b.status, b.claim_owner) == ("waiting", "p1")


def test_recovery_takes_running_dialogs_without_a_live_claim_only(store: Store) -> None:
    s = store
    for did in ("unclaimed", "held", "expired", "idle"):
        _dialog(s, did)
    s.update_dialog("unclaimed", status="running")  # left by a mindloop without claims
    assert s.claim_dialog("held", "p1", TTL, now=T0 + 100)
    assert s.claim_dialog("expired", "p2", TTL, now=T0)
    assert sorted(s.expired_running_dialogs(now=T0 + TTL + 1)) == ["expired", "unclaimed"]
    late = T0 + 100 + TTL + 1
    assert sorted(s.expired_running_dialogs(now=late)) == ["expired", "held", "unclaimed"]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_each_dialog_is_claimed_exactly_once_by_processes_racing_for_it(
    tmp_path: Path, kind: str
) -> None:
    """Real processes on one database, started together, each trying every dialog
    twice in its own order: every dialog has exactly one owner, and nobody takes another's
    unexpired claim. Then the claims expire: a late process takes them all over, and the
    former owners can no longer renew them."""
    path = tmp_path / "state.sqlite"
    s = open_store(path, kind)
    db = str(path) if kind == "sqlite" else url_for(path)
    ids = [f"d{i:02d}" for i in range(40)]
    for did in ids:
        _dialog(s, did)
    ctx = multiprocessing.get_context("spawn")
    owners = [f"p{i}" for i in range(4)]
    start, results = ctx.Barrier(len(owners)), ctx.Queue()
    procs = [
        ctx.Process(target=claim_race.race, args=(str(db), o, ids, i, start, results))
        for i, o in enumerate(owners)
    ]
    for p in procs:
        p.start()
    outcome = {
        owner: (first, second) for owner, first, second in (results.get(timeout=120) for _ in procs)
    }
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    taken = [d for first, _ in outcome.values() for d in first]
    assert sorted(taken) == ids  # each exactly once
    for owner, (first, second) in outcome.items():
        assert sorted(second) == sorted(first), owner  # own claims again, nobody else's
        assert all(s.get_dialog(d).claim_owner == owner for d in first)

    later = max(s.get_dialog(d).claim_expires or 0 for d in ids) + 1
    assert all(s.claim_dialog(d, "late", TTL, now=later) for d in ids)
    renewer = ctx.Process(target=claim_race.renew, args=(str(db), owners[0], ids, results))
    renewer.start()
    assert results.get(timeout=120) == []
    renewer.join(timeout=60)
    s.close()


@pytest.mark.parametrize("kind", KINDS)
def test_an_older_database_gets_the_claim_columns_and_keeps_its_rows(
    tmp_path: Path, kind: str
) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    s = open_store(db, kind)
    _dialog(s, "old")
    downgrade(  # back to schema v1, as the previous mindloop left it
        s,
        "ALTER TABLE dialogs DROP COLUMN claim_owner",
        "ALTER TABLE dialogs DROP COLUMN claim_expires",
        "DROP TABLE waits",  # v3
        "ALTER TABLE generations DROP COLUMN cost_usd",  # v4
        "UPDATE schema_version SET version = 1",
    )
    s = open_store(db, kind)
    assert s.schema_version() == t.SCHEMA_VERSION
    assert s.open_waits("old") == []  # v3's table is there too
    assert s.get_dialog("old").claim_owner is None
    assert s.claim_dialog("old", "p1", TTL)
    s.close()


def test_every_statement_and_migration_compiles_for_postgresql() -> None:
    """Nothing the store body runs is SQLite-only SQL (the PostgreSQL dialect is to come)."""
    pg = postgresql.dialect()
    statements = [v for v in vars(q).values() if isinstance(v, sa.Executable)]
    assert len(statements) > 30 and q.CLAIM_DIALOG in statements
    for stmt in statements:
        stmt.compile(dialect=pg)
    claim = str(q.CLAIM_DIALOG.compile(dialect=pg))
    assert claim.startswith("UPDATE dialogs SET") and "RETURNING" in claim
    for table in t.metadata.sorted_tables:
        sa.schema.CreateTable(table).compile(dialect=pg)
    ddl = sa.schema.CreateColumn(t.dialogs.c.claim_expires).compile(dialect=pg)
    assert str(ddl) == "claim_expires FLOAT"
