"""Workspace loads are cached per store and checked by the workspace's stamp: a load is one
indexed read while nothing changed (also inside the transaction that wrote it), the value
after a commit is what a full read gives, another connection's commit and a rollback are
seen; a command session copies only the nodes it takes, and a refused command leaves the
shared value as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.store import Store
from mindloop.workspace import repo
from mindloop.workspace.api import execute
from mindloop.workspace.commands import CriterionInput, DocInput
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.models import DocStatus, NodeKind, NodeStatus, NodeType, SelfCheck
from mindloop.workspace.transitions import Authority
from tests.store.stores import downgrade, open_store

TASK = "tasks/login.tsk"
CHAT = Authority.chat("@dev")


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".minds").mkdir(parents=True)
    (root / TASK).mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "docs" / "auth.md").write_text("# auth\n")
    return root


@pytest.fixture
def store(rtws: Path) -> Store:
    return Store.for_rtws(rtws, durable=False)


def _tree(store: Store, rtws: Path) -> None:
    def build(s):  # type: ignore[no-untyped-def]
        s.create_node(parent_id="root", kind=NodeKind.PLANNING, title="Backend", requirement="b")
        for title in ("API", "DB"):
            s.create_node(
                parent_id="n1",
                kind=NodeKind.EXECUTION,
                title=title,
                requirement="r",
                docs=[DocInput("docs/auth.md", "auth")],
                acceptance_criteria=[CriterionInput("w", "t")],
            )

    execute(store, rtws, TASK, CHAT, build)


def test_the_cached_value_is_what_a_full_read_gives_after_every_kind_of_commit(
    rtws: Path, store: Store
) -> None:
    _tree(store, rtws)
    steps = [
        lambda s: s.transition(node_id="n2", to=NodeStatus.IN_PROGRESS, reason="go"),
        lambda s: s.update(node_id="n2", notes="halfway", artifacts=["src/api.py"]),
        lambda s: s.add_rule("type hints", {"by": "test"}),
        lambda s: s.index_status("docs/auth.md", DocStatus.EXPIRED),
        lambda s: s.transition(
            node_id="n2",
            to=NodeStatus.COMPLETE,
            reason="done",
            self_check=[SelfCheck(criterion="AC1", passed=True)],
            conclusion="works",
        ),
        lambda s: s.record("n3", "note", "a row only"),
        lambda s: s.remove_rule("type hints"),
        lambda s: s.create_node(
            parent_id="n1",
            kind=NodeKind.EXECUTION,
            type=NodeType.BENCH,
            title="Bench",
            requirement="b",
            deps=["n2"],
            acceptance_criteria=[CriterionInput("w", "t", verify="pytest")],
        ),
    ]
    for step in steps:
        execute(store, rtws, TASK, CHAT, step)
        cached = repo.load(store, TASK)
        assert cached == repo.load(store, TASK, cached=False)
        assert repo.load(store, TASK) is cached  # nothing changed: the same value


def test_a_current_cached_load_is_one_read(rtws: Path, store: Store) -> None:
    _tree(store, rtws)
    repo.load(store, TASK)
    before = store.stats.statements
    for _ in range(5):
        repo.load(store, TASK)
    assert store.stats.statements - before == 5


def test_another_connections_commit_is_seen(rtws: Path, store: Store) -> None:
    _tree(store, rtws)
    assert repo.load(store, TASK).nodes["n2"].notes == ""
    other = Store.for_rtws(rtws, durable=False)
    execute(other, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="theirs"))
    other.close()
    assert repo.load(store, TASK).nodes["n2"].notes == "theirs"
    assert repo.load(store, TASK) == repo.load(store, TASK, cached=False)


def test_a_rolled_back_change_is_never_cached(rtws: Path, store: Store) -> None:
    _tree(store, rtws)
    with pytest.raises(RuntimeError), store.tx():
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="one"))
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="two"))
        assert repo.load(store, TASK).nodes["n2"].notes == "two"  # the transaction's own view
        raise RuntimeError("rolled back")
    assert repo.load(store, TASK).nodes["n2"].notes == ""
    # the rolled-back write's stamp never comes back: the next write is read as written
    execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n3", notes="kept"))
    assert repo.load(store, TASK) == repo.load(store, TASK, cached=False)
    assert repo.load(store, TASK).nodes["n2"].notes == ""


def test_two_changes_in_one_transaction_are_cached_as_committed(rtws: Path, store: Store) -> None:
    _tree(store, rtws)
    with store.tx():
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="one"))
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n3", notes="two"))
    cached = repo.load(store, TASK)
    assert (cached.nodes["n2"].notes, cached.nodes["n3"].notes) == ("one", "two")
    assert cached == repo.load(store, TASK, cached=False)


def test_a_session_copies_only_the_nodes_it_takes(rtws: Path, store: Store) -> None:
    _tree(store, rtws)
    shared = repo.load(store, TASK)
    _, change = execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="x"))
    assert change.after.touched() == ["n2"]
    assert change.changed_nodes == ["n2"]
    assert change.after.view()["n3"] is shared.nodes["n3"]  # not copied
    assert shared.nodes["n2"].notes == ""  # the shared value was not changed in place


def test_a_refused_command_leaves_the_shared_value_as_it_was(rtws: Path, store: Store) -> None:
    _tree(store, rtws)
    shared = repo.load(store, TASK)
    before = shared.copy()

    def half_then_refused(s):  # type: ignore[no-untyped-def]
        s.update(node_id="n2", notes="half")
        s.transition(node_id="n3", to=NodeStatus.DONE, reason="not allowed")

    with pytest.raises(WorkspaceError):
        execute(store, rtws, TASK, CHAT, half_then_refused)
    assert repo.load(store, TASK) is shared and shared == before


def test_a_write_is_read_back_from_the_cache_inside_its_transaction(
    rtws: Path, store: Store
) -> None:
    _tree(store, rtws)
    with store.tx():
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="one"))
        before = store.stats.statements
        inside = repo.load(store, TASK)
        assert store.stats.statements - before == 0  # the stamp it wrote is known
        assert inside.nodes["n2"].notes == "one"
        assert inside == repo.load(store, TASK, cached=False)


def test_a_transaction_reads_the_stamp_once_and_the_next_one_again(
    rtws: Path, store: Store
) -> None:
    """A write transaction holds the write lock: what it read of the stamp stands till
    its end (its own writes set it). The next transaction, or a read outside one, reads
    it again: another connection may have committed in between."""
    _tree(store, rtws)
    with store.tx():
        before = store.stats.statements
        first = repo.load(store, TASK)
        for _ in range(3):
            assert repo.load(store, TASK) is first
        assert store.stats.statements - before == 1
    other = Store.for_rtws(rtws, durable=False)
    execute(other, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="theirs"))
    other.close()
    with store.tx():
        assert repo.load(store, TASK).nodes["n2"].notes == "theirs"
    execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n3", notes="ours"))
    with pytest.raises(RuntimeError), store.tx():
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n3", notes="undone"))
        raise RuntimeError("rolled back")
    with store.tx():  # the rolled-back stamp is not remembered
        assert repo.load(store, TASK).nodes["n3"].notes == "ours"
        assert repo.load(store, TASK) == repo.load(store, TASK, cached=False)


def test_an_older_database_gains_the_stamp(tmp_path: Path) -> None:
    from mindloop.store import schema as t

    db = tmp_path / ".mindloop" / "state.sqlite"
    rtws = tmp_path
    (rtws / TASK).mkdir(parents=True)
    s = open_store(db, "sqlite")
    execute(s, rtws, TASK, CHAT, lambda x: x.record(None, "note", "old"))
    downgrade(
        s,
        "ALTER TABLE ws_meta DROP COLUMN stamp",
        f"UPDATE schema_version SET version = {t.MIGRATIONS.index(t._workspace_stamp)}",
    )
    s = open_store(db, "sqlite")
    assert s.schema_version() == t.SCHEMA_VERSION
    assert repo.load(s, TASK).stamp == ""
    execute(s, rtws, TASK, CHAT, lambda x: x.record(None, "note", "new"))
    stamp = repo.load(s, TASK).stamp
    assert stamp != "" and repo.load(s, TASK, cached=False).stamp == stamp
    s.close()


def test_a_change_checked_on_a_workspace_commits_as_is_only_while_nothing_moved(
    rtws: Path, store: Store
) -> None:
    """A tool checks its command on the workspace as read, and commits that change with
    its result (`api.commit_checked`) unless the workspace moved in between: then nothing
    is written and the command must run again. A new workspace always runs again."""
    from mindloop.workspace.api import commit_checked, session_for

    def check(title: str):  # type: ignore[no-untyped-def]
        s = session_for(repo.load(store, TASK), rtws, CHAT)
        s.create_node(parent_id="root", kind=NodeKind.EXECUTION, title=title, requirement="r")
        return s.finish()

    assert not commit_checked(store, rtws, check("first"))  # not initialised: run it again
    assert not repo.load(store, TASK).exists
    _tree(store, rtws)
    checked = check("API tests")
    assert commit_checked(store, rtws, checked)
    titles = [n.title for n in repo.load(store, TASK, cached=False).nodes.values()]
    assert titles.count("API tests") == 1

    stale = check("Docs")
    execute(store, rtws, TASK, CHAT, lambda s: s.add_rule("no new deps", {}))
    assert not commit_checked(store, rtws, stale)
    assert "Docs" not in [n.title for n in repo.load(store, TASK, cached=False).nodes.values()]


def test_a_load_given_the_stamp_just_read_reads_nothing_when_it_holds_that_value(
    rtws: Path, store: Store
) -> None:
    _tree(store, rtws)
    held = repo.load(store, TASK)
    before = store.stats.statements
    assert repo.load(store, TASK, stamp=held.stamp) is held
    assert repo.held(store, TASK, held.stamp) is held
    assert store.stats.statements == before
    other = Store.for_rtws(rtws, durable=False)
    execute(other, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="theirs"))
    other.close()
    from mindloop.store import workspace as rows

    now = rows.stamp(store, TASK)
    assert now is not None and repo.held(store, TASK, now) is None
    fresh = repo.load(store, TASK, stamp=now)  # not held: read as it is now
    assert fresh.nodes["n2"].notes == "theirs" and fresh.stamp == now
