"""A node's refs and check report at the workspace layer (agent-loop §5.1, §5.4): the rows
that record a ref take the runtime's `workspace_ref` (never the evidence); CHECK's verdict
row, once written, is the node's check report (`check_report_ref`), for a pass and for a
failure, and the runtime's own moves leave the report alone."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mindloop.store import Store
from mindloop.workspace import repo
from mindloop.workspace.commands import Change, Session
from mindloop.workspace.models import LogEntry, NodeStatus
from mindloop.workspace.report import find_report, report_row_id, report_text
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import REF_TARGETS, Actor, Authority
from tests.workspace.ws_util import RT, TASK, apply, complete, tree

S = NodeStatus
CHECK = Authority.phase(Actor.CHECK, "@checker")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / ".mindloop" / "state.sqlite", durable=False)
    yield opened
    opened.close()


def _commit(
    store: Store, state: WorkspaceState, fn: Callable[[Session], object], authority: Authority
) -> WorkspaceState:
    with store.tx():
        s = Session(state, authority, now=3.0)
        fn(s)
        change = s.finish()
        repo.write(store, change)
    return repo.load(store, TASK, cached=False)


def test_only_complete_and_done_record_a_ref() -> None:
    assert frozenset({S.COMPLETE, S.DONE}) == REF_TARGETS


def test_the_refs_are_the_runtimes_and_the_evidence_is_only_logged() -> None:
    state = apply(tree(), lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"))
    s = Session(state, Authority.chat("@dev"), now=2.0)
    s.transition(
        node_id="n3",
        to=S.COMPLETE,
        reason="done",
        evidence="tests green",
        no_artifacts_reason="schema only",
        workspace_ref="git:abc+dirty:123",
    )
    ch = s.finish()
    assert ch.after.nodes["n3"].checkpoint_ref == "git:abc+dirty:123"
    [row] = [e for e in ch.log if e.kind == "transition"]
    assert (row.data["evidence"], row.data["ref"]) == ("tests green", "git:abc+dirty:123")
    assert "report" not in row.data  # DO's move is no check report
    # without a ref the field stays empty: the evidence never stands in for it
    state = apply(tree(), lambda s: s.transition(node_id="n3", to=S.IN_PROGRESS, reason="go"))
    state = apply(
        state,
        lambda s: s.transition(
            node_id="n3", to=S.COMPLETE, reason="done", evidence="ref-9", no_artifacts_reason="x"
        ),
    )
    assert state.nodes["n3"].checkpoint_ref is None


@pytest.mark.parametrize(("to", "ref"), [(S.DONE, "tree:1"), (S.CHECK_FAILED, None)])
def test_checks_verdict_row_becomes_the_nodes_report(
    store: Store, to: NodeStatus, ref: str | None
) -> None:
    built = complete(tree(), "n3")
    with store.tx():
        repo.write(store, Change(repo.load(store, TASK), built, []))
    state = repo.load(store, TASK, cached=False)
    assert state.nodes["n3"].check_report_ref is None  # COMPLETE reports nothing

    def verdict(s: Session) -> None:
        s.transition(
            node_id="n3",
            to=to,
            reason="AC1 checked",
            evidence="pytest -q: 3 passed" if to is S.DONE else "AC1: 500 on login",
            conclusion="works" if to is S.DONE else None,
            workspace_ref=ref,
        )

    state = _commit(store, state, verdict, CHECK)
    n3 = state.nodes["n3"]
    entries = [e for e in repo.log(store, TASK) if e.node_id == "n3"]
    report = find_report(n3, entries)
    assert report is not None and report.id == report_row_id(n3.check_report_ref)
    assert n3.check_report_ref == f"worklog:{report.id}" and report.id in n3.worklog_refs
    assert (report.data["to"], report.data["by"]) == (to.value, "CHECK")
    assert n3.checked_ref == ref
    if to is S.CHECK_FAILED:  # the runtime's next move (ADJUST's start) keeps the report
        state = _commit(
            store,
            state,
            lambda s: s.transition(node_id="n3", to=S.ADJUSTING, reason="ADJUST starts"),
            RT,
        )
        assert state.nodes["n3"].check_report_ref == n3.check_report_ref


def test_the_report_in_one_line() -> None:
    row = LogEntry(
        id=7,
        node_id="n3",
        text="x",
        kind="transition",
        data={"from": "COMPLETE", "to": "DONE", "by": "CHECK", "reason": "ok", "ref": "tree:1"},
    )
    assert report_text(row) == "COMPLETE → DONE by CHECK: ok (ref tree:1)"
    row.data["evidence"] = "3 passed"
    assert report_text(row) == "COMPLETE → DONE by CHECK: ok (evidence: 3 passed; ref tree:1)"
    assert report_row_id("worklog:7") == 7
    assert report_row_id("worklog:x") is None and report_row_id(None) is None
