"""The workspace's store tables: a value written and read back whole, versions, a stale
write refused with nothing written, after-commit steps (on every dialect of the store
conformance suite), and the migration."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mindloop.store import Store
from mindloop.store import schema as t
from mindloop.store import workspace as rows
from mindloop.workspace import repo
from mindloop.workspace.commands import Session
from mindloop.workspace.errors import StaleVersion, WriteConflict
from mindloop.workspace.models import NodeStatus
from tests.store.stores import KINDS, open_store
from tests.workspace.ws_util import CHAT, TASK, apply, tree


@pytest.fixture(params=KINDS)
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    opened = open_store(tmp_path / ".mindloop" / "state.sqlite", request.param, durable=False)
    yield opened
    opened.close()


def _save(store: Store, state_fn) -> None:  # type: ignore[no-untyped-def]
    with store.tx():
        s = Session(repo.load(store, TASK), CHAT, now=2.0)
        state_fn(s)
        repo.write(store, s.finish())


def test_a_workspace_round_trips_through_the_store(store: Store) -> None:
    assert repo.load(store, TASK).exists is False
    built = tree()
    built = apply(built, lambda s: s.add_rule("Use type hints everywhere", {"by": "human"}))
    with store.tx():
        from mindloop.workspace.commands import Change

        repo.write(store, Change(repo.load(store, TASK), built, []))
    back = repo.load(store, TASK)
    assert back.exists and list(back.nodes) == list(built.nodes)
    assert back.nodes == built.nodes
    assert back.index == built.index
    assert [r.text for r in back.rules] == ["Use type hints everywhere"] and back.rules[0].id
    assert rows.tasks(store) == [TASK]
    assert rows.rule_texts(store, TASK) == ["Use type hints everywhere"]


def test_versions_bump_on_change_and_a_stale_write_changes_nothing(store: Store) -> None:
    _save(store, lambda s: s.init())
    _save(
        store,
        lambda s: s.create_node(
            parent_id="root",
            kind="EXECUTION",
            title="A",
            requirement="r",  # type: ignore[arg-type]
        ),
    )
    assert repo.load(store, TASK).nodes["n1"].version == 1
    _save(store, lambda s: s.update(node_id="n1", notes="first", expected_version=1))
    n1 = repo.load(store, TASK).nodes["n1"]
    assert n1.version == 2 and n1.notes == "first"
    before_log = rows.log(store, TASK)
    with pytest.raises(StaleVersion) as err:
        _save(store, lambda s: s.update(node_id="n1", notes="second", expected_version=1))
    assert err.value.arg == "expected_version" and "at version 2" in str(err.value)
    assert repo.load(store, TASK).nodes["n1"].notes == "first"
    assert rows.log(store, TASK) == before_log
    # a write that raced (the row moved on under the session) is refused whole
    stale = repo.load(store, TASK)
    _save(store, lambda s: s.update(node_id="n1", notes="third"))
    s = Session(stale, CHAT, now=3.0)
    s.transition(node_id="n1", to=NodeStatus.IN_PROGRESS, reason="go")
    with pytest.raises(WriteConflict), store.tx():
        repo.write(store, s.finish())
    now = repo.load(store, TASK)
    assert now.nodes["n1"].status is NodeStatus.NEW and now.nodes["n1"].notes == "third"
    assert len(rows.log(store, TASK)) == len(before_log) + 1


def test_after_commit_runs_once_after_the_commit_and_never_after_a_rollback(store: Store) -> None:
    ran: list[str] = []
    with store.tx():
        store.after_commit("k", lambda: ran.append("first"))
        store.after_commit("k", lambda: ran.append("second"))  # one per key: the last
        _save(store, lambda s: s.init())
        assert ran == []
    assert ran == ["second"]
    with pytest.raises(RuntimeError), store.tx():
        store.after_commit("k", lambda: ran.append("rolled back"))
        raise RuntimeError("boom")
    with store.tx():
        pass
    assert ran == ["second"]
    store.after_commit("now", lambda: ran.append("outside"))
    assert ran == ["second", "outside"]

    def broken() -> None:
        raise OSError("disk full")

    with store.tx():
        store.after_commit("x", broken)  # logged; the commit stands
        _save(store, lambda s: s.add_rule("r", {}))
    assert rows.rule_texts(store, TASK) == ["r"]


def test_an_older_database_gains_the_workspace_tables(tmp_path: Path) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    Store(db).close()
    con = sqlite3.connect(db)
    for table in t.WORKSPACE_TABLES:
        con.execute(f"DROP TABLE {table.name}")
    con.execute("UPDATE schema_version SET version = 4")
    con.commit()
    con.close()
    store = Store(db)
    assert store.schema_version() == t.SCHEMA_VERSION
    _save(store, lambda s: s.init())
    assert repo.load(store, TASK).exists
