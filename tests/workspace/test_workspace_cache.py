"""Workspace loads are cached per store and checked by the workspace's stamp: a load is one
indexed read while nothing changed (also inside the transaction that wrote it), the value
after a commit is what a full read gives, another connection's commit and a rollback are
seen; a command session copies only the nodes it takes, and a refused command leaves the
shared value as it was."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mindloop.store import Store
from mindloop.workspace import repo
from mindloop.workspace.api import count_steps, execute
from mindloop.workspace.commands import Change, CriterionInput, DocInput, Session
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
    # the docs found, the index and the rules are shared too, until a command takes them
    assert change.after.offered is shared.offered
    assert change.after.index is shared.index and change.after.rules is shared.rules
    current = repo.load(store, TASK)
    before = current.copy()
    _, expired = execute(
        store,
        rtws,
        TASK,
        Authority.user(),
        lambda s: s.index_status("docs/auth.md", DocStatus.EXPIRED),
    )
    assert expired.after.index is not current.index  # taken: copied, then changed
    assert expired.after.index_doc("docs/auth.md").status is DocStatus.EXPIRED  # type: ignore[union-attr]
    assert current == before  # the shared value is as it was
    assert expired.after.rules is current.rules
    _, ruled = execute(store, rtws, TASK, CHAT, lambda s: s.add_rule("Be brief", {}))
    assert ruled.after.rules is not expired.after.rules and expired.after.rules == []
    assert ruled.after.index is expired.after.index


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
    is written and the command must run again. A change that initialises the workspace
    commits as is while the workspace is still not initialised."""
    from mindloop.workspace.api import commit_checked, session_for

    def check(title: str, task: str = TASK):  # type: ignore[no-untyped-def]
        s = session_for(repo.load(store, task), rtws, CHAT)
        s.create_node(parent_id="root", kind=NodeKind.EXECUTION, title=title, requirement="r")
        return s.finish()

    other = "tasks/other.tsk"
    (rtws / other).mkdir(parents=True)
    first, late = check("first", other), check("late", other)
    assert commit_checked(store, rtws, first)  # not initialised then nor now
    assert not commit_checked(store, rtws, late)  # it was initialised meanwhile
    titles = [n.title for n in repo.load(store, other, cached=False).nodes.values()]
    assert titles == ["other", "first"]
    _tree(store, rtws)
    checked = check("API tests")
    assert commit_checked(store, rtws, checked)
    titles = [n.title for n in repo.load(store, TASK, cached=False).nodes.values()]
    assert titles.count("API tests") == 1

    stale = check("Docs")
    execute(store, rtws, TASK, CHAT, lambda s: s.add_rule("no new deps", {}))
    assert not commit_checked(store, rtws, stale)
    assert "Docs" not in [n.title for n in repo.load(store, TASK, cached=False).nodes.values()]


def _stored(store: Store) -> tuple[Any, ...]:
    """The workspace as stored (every row but times and stamps)."""
    state = repo.load(store, TASK, cached=False)
    nodes = {k: n.model_dump(exclude={"created_at", "updated_at"}) for k, n in state.nodes.items()}
    log = [(e.node_id, e.kind, e.text, e.data) for e in repo.log(store, TASK)]
    return nodes, state.index, [r.text for r in state.rules], state.focus, log


Command = Callable[[Session], Any]


def _step(rtws: Path, store: Store, commands: list[Command], *, replay: bool) -> list[bool]:
    """A tool step's calls: each checked on the value the earlier ones left (as
    `toolsets.workspace` does), then their effects in one transaction: committed as
    checked, or (`replay`) every command run again. Which committed as checked."""
    from mindloop.workspace.api import commit_checked, session_for

    changes = []
    state = repo.load(store, TASK)
    for command in commands:
        s = session_for(state, rtws, CHAT)
        command(s)
        change = s.finish()
        changes.append(change)
        state = dataclasses.replace(change.after, stamp="")
    taken = []
    with store.tx():
        for command, change in zip(commands, changes, strict=True):
            ok = not replay and commit_checked(store, rtws, change)
            if not ok:
                execute(store, rtws, TASK, CHAT, command)
            taken.append(ok)
    return taken


def _create(title: str, *deps: str) -> Command:
    return lambda s: s.create_node(
        parent_id="root", kind=NodeKind.EXECUTION, title=title, requirement="r", deps=list(deps)
    )


STEPS: list[list[Command]] = [
    [_create("a"), _create("b", "n1"), _create("c", "n2")],  # on a new workspace
    [
        lambda s: s.add_rule("first rule", {}),
        _create("g"),  # computed on a rule without its id: runs again
        lambda s: s.record("n2", "note", "noted"),
    ],
    [
        lambda s: s.transition(node_id="n1", to=NodeStatus.IN_PROGRESS, reason="go"),
        _create("d"),
        lambda s: s.update(node_id="n1", notes="the transition's log id is kept"),
        lambda s: s.add_rule("first rule", {}),
        lambda s: s.add_rule("second rule", {}),
        _create("e", "n4"),
        lambda s: s.index_add("docs/a.md", "A"),
        _create("f"),
    ],
]


def test_a_steps_later_calls_commit_as_checked_and_write_what_running_them_again_would(
    tmp_path: Path,
) -> None:
    got, want = [], []
    for replay, out in ((False, got), (True, want)):
        rtws = tmp_path / ("replayed" if replay else "checked")
        (rtws / ".minds").mkdir(parents=True)
        (rtws / TASK).mkdir(parents=True)
        (rtws / "docs").mkdir()
        (rtws / "docs" / "a.md").write_text("a\n")
        store = Store.for_rtws(rtws, durable=False)
        for commands in STEPS:
            taken = _step(rtws, store, commands, replay=replay)
            out.append(_stored(store))
            if not replay:
                out.append(taken)
        store.close()
    assert got[0::2] == want
    assert got[1] == [True, True, True]  # a new workspace, then a chain of creations
    # the update takes n1, whose transition's log id the first call's write put in place:
    # it runs again, and the calls after it, computed on its checked value, too
    assert got[3] == [True, False, False]
    assert got[5] == [True, True, False, False, False, False, False, False]


def test_a_later_call_runs_again_when_the_workspace_moved_under_the_step(
    rtws: Path, store: Store
) -> None:
    from mindloop.workspace.api import commit_checked, session_for

    def chain() -> tuple[Change, Change]:
        first = session_for(repo.load(store, TASK), rtws, CHAT)
        _create("x")(first)
        one = first.finish()
        second = session_for(dataclasses.replace(one.after, stamp=""), rtws, CHAT)
        _create("y")(second)
        return one, second.finish()

    _tree(store, rtws)
    one, two = chain()
    assert commit_checked(store, rtws, one)
    execute(store, rtws, TASK, CHAT, lambda s: s.record(None, "note", "someone else"))
    assert not commit_checked(store, rtws, two)  # another write came between
    one, two = chain()
    with pytest.raises(RuntimeError), store.tx():
        assert commit_checked(store, rtws, one)
        raise RuntimeError("rolled back")
    assert not commit_checked(store, rtws, two)  # what it followed was never committed
    titles = [n.title for n in repo.load(store, TASK, cached=False).nodes.values()]
    assert titles.count("x") == 1 and "y" not in titles


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


def test_a_taken_node_is_a_deep_copy_of_every_field() -> None:
    from pydantic import BaseModel, PrivateAttr

    from mindloop.workspace.models import (
        Criterion,
        DocRef,
        Node,
        NodeDispatch,
        Rule,
    )
    from mindloop.workspace.models import SelfCheck as Check
    from mindloop.workspace.state import _copy_node, copy_plan

    node = Node(
        id="n1",
        parent_id="root",
        kind=NodeKind.PLANNING,
        title="t",
        children=["n2"],
        deps=["n3"],
        skills=["py"],
        acceptance_criteria=[Criterion(id="AC1", when="w", then="t", verify="v")],
        artifacts=["a.py"],
        docs=[DocRef(path="docs/a.md", description="A")],
        worklog_refs=[4],
        blockers=["b"],
        self_check=[Check(criterion="AC1", passed=True, evidence="e")],
        dispatch=NodeDispatch(member="m", dispatch_id="d", side_id="s", caller_id="c", at=1.0),
    )
    plan = copy_plan(Node)
    assert plan is not None  # every field of a node has a shape it copies
    assert plan.plain  # nothing beside its fields: copied without `model_copy`'s generic path
    assert copy_plan(Rule) is None  # a dict field: dumped and validated again

    class Private(BaseModel):
        tags: list[str] = []
        _seen: int = PrivateAttr(default=0)

    private = copy_plan(Private)
    assert private is not None and not private.plain  # its private part: `model_copy`
    was = node.model_dump()
    copy = _copy_node(node)
    assert copy == node and copy.model_dump() == was
    assert copy.model_fields_set == node.model_fields_set
    assert copy.model_fields_set is not node.model_fields_set
    for name in Node.model_fields:
        mine, theirs = getattr(copy, name), getattr(node, name)
        if isinstance(mine, list | BaseModel):
            assert mine is not theirs, name
        if isinstance(mine, list):
            assert not any(
                a is b for a, b in zip(mine, theirs, strict=True) if isinstance(a, BaseModel)
            )
    copy.children.append("x")
    copy.docs[0].status = DocStatus.EXPIRED
    copy.self_check[0].passed = False
    copy.acceptance_criteria[0].verify = None
    assert copy.dispatch is not None
    copy.dispatch.member = "other"
    copy.worklog_refs.append(5)
    assert node.model_dump() == was


def test_the_runtimes_step_count_writes_what_the_sessions_count_would(
    rtws: Path, store: Store
) -> None:
    """`api.count_steps` (the loop's DO close) writes one node's record without a command
    session: the same node `Session.count_steps` gives, its files rewritten; nothing for
    no steps, a terminal or a missing node."""
    _tree(store, rtws)
    execute(
        store,
        rtws,
        TASK,
        CHAT,
        lambda s: s.transition(node_id="n2", to=NodeStatus.IN_PROGRESS, reason="go"),
    )
    before = repo.load(store, TASK)
    by_session = Session(before, Authority.runtime(), now=5.0)
    by_session.count_steps(node_id="n2", steps=3)
    expected = by_session.finish().after.nodes["n2"]
    after = count_steps(store, rtws, TASK, "n2", 3, now=5.0)
    assert after.nodes["n2"] == expected and expected.steps_used == 3
    assert repo.load(store, TASK, cached=False).nodes["n2"] == expected
    assert repo.load(store, TASK).stamp != before.stamp
    info = (rtws / TASK / "workspace" / "nodes" / expected.dir / "Info.md").read_text()
    assert "steps_used: 3" in info
    execute(
        store,
        rtws,
        TASK,
        Authority.runtime(),
        lambda s: s.transition(node_id="n3", to=NodeStatus.CANCELLED, reason="x", conclusion="c"),
    )
    stamp = repo.load(store, TASK).stamp
    for node_id, steps in (("n2", 0), ("nope", 2), ("n3", 2)):
        count_steps(store, rtws, TASK, node_id, steps)
    assert repo.load(store, TASK).stamp == stamp  # nothing written
    with pytest.raises(WorkspaceError):
        count_steps(store, rtws, TASK, "n2", -1)
