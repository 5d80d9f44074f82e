"""What only the PostgreSQL dialect has to show (the rest is the conformance suite every
dialect passes): it is chosen by `MINDLOOP_DATABASE_URL`, write transactions exclude
each other as SQLite's do, a lazy commit is lazy only for itself, errors are one line
without secrets, a schema of someone else's is refused untouched, and processes that
start on a new database together share one schema."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from mindloop.store import DialogRecord, Store, StoreError
from mindloop.store.location import DATABASE_URL_ENV
from mindloop.store.postgres import PostgresDialect
from mindloop.store.schema import SCHEMA_VERSION
from tests import pg
from tests.store import claim_race
from tests.store.stores import open_store, url_for


def _pg(tmp_path: Path) -> Store:
    return open_store(tmp_path / "s", "postgresql")


def test_the_database_url_selects_postgresql_and_no_state_file_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATABASE_URL_ENV, pg.server().schema_url())
    s = Store.for_rtws(tmp_path)
    assert (s.dialect.name, s.schema_version()) == ("postgresql", SCHEMA_VERSION)
    assert Store.exists_for(tmp_path)
    s.close()
    assert not (tmp_path / ".mindloop").exists()
    monkeypatch.delenv(DATABASE_URL_ENV)
    assert not Store.exists_for(tmp_path)  # SQLite again: no file, no state


def test_a_write_transaction_excludes_other_writers_until_it_commits(tmp_path: Path) -> None:
    """What the store body's read-then-write operations rely on (SQLite: BEGIN
    IMMEDIATE): while one transaction runs, another process's write transaction waits."""
    a = _pg(tmp_path)
    b = open_store(tmp_path / "s", "postgresql")
    a.create_dialog(DialogRecord(id="d", root_id="d", member="m", task_path="t"))
    order: list[str] = []
    entered = threading.Event()

    def other() -> None:
        entered.set()
        with b.tx():
            order.append("b starts")
            b.update_dialog("d", title="b")

    with a.tx():
        assert a.get_dialog("d").title is None
        t = threading.Thread(target=other)
        t.start()
        entered.wait()
        time.sleep(0.3)  # b had every chance to start its transaction
        order.append("a commits")
        a.update_dialog("d", title="a")
    t.join(timeout=30)
    assert order == ["a commits", "b starts"]
    assert a.get_dialog("d").title == "b"
    a.close()
    b.close()


def test_a_lazy_commit_is_lazy_for_itself_only(tmp_path: Path) -> None:
    s = _pg(tmp_path)
    setting = sa.text("SELECT current_setting('synchronous_commit')")
    with s.tx(durable=False) as conn:
        assert conn.execute(setting).scalar_one() == "off"
    with s.tx() as conn:
        assert conn.execute(setting).scalar_one() == "on"
    s.close()


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    port = pg.server().port + 1 if pg.server().port < 65000 else 1
    url = f"postgresql://mindloop:s3cret@127.0.0.1:{port}/nowhere"
    with pytest.raises(StoreError) as err:
        Store(Path("x"), dialect=PostgresDialect(url))
    text = str(err.value)
    assert "\n" not in text and "s3cret" not in text
    assert "127.0.0.1" in text and "cannot connect" in text


def test_a_url_of_another_database_kind_is_refused() -> None:
    with pytest.raises(StoreError, match="only postgresql://"):
        PostgresDialect("mysql://u@h/db")


def test_someone_elses_schema_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    url = url_for(tmp_path / "s")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE dialogs (id text primary key, mine int)")
    with pytest.raises(StoreError, match="not a mindloop state database"):
        _pg(tmp_path)
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    assert tables == [("dialogs",)]


def test_processes_starting_together_on_a_new_database_share_one_schema(tmp_path: Path) -> None:
    url = url_for(tmp_path / "s")
    ctx = multiprocessing.get_context("spawn")
    owners = [f"p{i}" for i in range(4)]
    start, results = ctx.Barrier(len(owners)), ctx.Queue()
    procs = [
        ctx.Process(target=claim_race.first_start_at, args=(url, o, start, results)) for o in owners
    ]
    for p in procs:
        p.start()
    versions = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert versions == [SCHEMA_VERSION] * len(owners)
    s = _pg(tmp_path)
    assert sorted(d.id for d in s.list_dialogs()) == owners
    s.close()
