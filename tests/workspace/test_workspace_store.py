"""The workspace's store tables: a value written and read back whole, versions, a stale
write refused with nothing written, after-commit steps (on every dialect of the store
conformance suite), and the migration."""

from __future__ import annotations

import sqlite3
import typing
from pathlib import Path

import pytest
import sqlalchemy as sa
from pydantic import BaseModel

from mindloop.store import Store
from mindloop.store import schema as t
from mindloop.store import workspace as rows
from mindloop.workspace import repo
from mindloop.workspace.commands import CriterionInput, Session
from mindloop.workspace.errors import StaleVersion, WriteConflict
from mindloop.workspace.models import Node, NodeStatus
from tests.store.stores import KINDS, open_store, statements_run
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
    _one_node(store)
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


def _none_defaults(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[str]:
    """The fields of `model` and of the records it holds that admit None but default to
    something else."""
    seen.add(model)
    out = []
    for name, info in model.model_fields.items():
        kinds = [info.annotation, *typing.get_args(info.annotation)]
        kinds += [a for k in kinds for a in typing.get_args(k)]
        if type(None) in kinds and info.get_default(call_default_factory=True) is not None:
            out.append(f"{model.__name__}.{name}")
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, BaseModel) and kind not in seen:
                out += _none_defaults(kind, seen)
    return out


def test_a_node_is_stored_without_its_fields_at_none_and_reads_back_the_same(
    store: Store,
) -> None:
    # a field at None is left out of the stored record: it must default to None
    assert _none_defaults(Node, set()) == []
    _save(store, lambda s: s.init())
    _save(
        store,
        lambda s: s.create_node(
            parent_id="root",
            kind="EXECUTION",
            title="t",
            requirement="r",
            acceptance_criteria=[CriterionInput("w", "t"), CriterionInput("w2", "t2", "pytest")],
        ),
    )
    stored = dict(store._rows(sa.select(t.ws_nodes.c.node_id, t.ws_nodes.c.data)))
    assert (
        "parent_id" not in stored["root"] and "verify" not in stored["n1"]["acceptance_criteria"][0]
    )
    assert stored["n1"]["acceptance_criteria"][1]["verify"] == "pytest"
    assert repo.load(store, TASK, cached=False).nodes == repo.load(store, TASK).nodes


def _transition(store: Store, to: NodeStatus, **kw: typing.Any) -> None:
    s = Session(repo.load(store, TASK), CHAT, now=4.0)
    s.transition(node_id="n1", to=to, **kw)
    repo.write(store, s.finish())


def _one_node(store: Store) -> None:
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


def test_a_transaction_writes_each_node_row_and_the_stamp_once(tmp_path: Path) -> None:
    # a step's calls and the phase they end move a node several times in one transaction
    store = Store(tmp_path / ".mindloop" / "state.sqlite")
    try:
        _one_node(store)

        def step() -> None:
            with store.tx():
                _transition(store, NodeStatus.IN_PROGRESS, reason="go")
                _save(store, lambda s: s.update(node_id="n1", notes="half way"))

        seen = statements_run(store, step)
        nodes = [s.rsplit("ws_nodes.node_id = ", 1)[1][:6] for s in seen if "UPDATE ws_nodes" in s]
        assert sorted(nodes) == ["'n1' A", "'root'"]  # n1 twice, the root rolled up
        assert len([s for s in seen if s.startswith("UPDATE ws_meta")]) == 1
        n1 = repo.load(store, TASK, cached=False).nodes["n1"]
        assert (n1.status, n1.notes, n1.version) == (NodeStatus.IN_PROGRESS, "half way", 3)
        assert repo.load(store, TASK, cached=False).stamp == rows.stamp(store, TASK)
    finally:
        store.close()


def test_reads_in_the_transaction_see_the_rows_held_back(store: Store) -> None:
    _one_node(store)
    with store.tx():
        _transition(store, NodeStatus.IN_PROGRESS, reason="go")
        stamp = rows.stamp(store, TASK)
        fresh = repo.load(store, TASK, cached=False)  # a full read: the rows as written
        assert fresh.nodes["n1"].status is NodeStatus.IN_PROGRESS and fresh.stamp == stamp
        _save(store, lambda s: s.update(node_id="n1", notes="after the read"))
    back = repo.load(store, TASK, cached=False)
    assert back.nodes["n1"].notes == "after the read" and back.stamp == rows.stamp(store, TASK)
    with pytest.raises(RuntimeError), store.tx():  # rolled back: nothing of it is written
        _save(store, lambda s: s.update(node_id="n1", notes="rolled back"))
        raise RuntimeError("the step failed")
    assert repo.load(store, TASK, cached=False).nodes["n1"].notes == "after the read"


def test_a_second_write_of_a_node_that_raced_the_first_is_refused_whole(store: Store) -> None:
    _one_node(store)
    stale = repo.load(store, TASK)
    with pytest.raises(WriteConflict), store.tx():
        _transition(store, NodeStatus.IN_PROGRESS, reason="go")
        s = Session(stale, CHAT, now=3.0)  # computed before the first write
        s.update(node_id="n1", notes="stale")
        repo.write(store, s.finish())
    n1 = repo.load(store, TASK, cached=False).nodes["n1"]
    assert n1.status is NodeStatus.NEW and n1.version == 1
