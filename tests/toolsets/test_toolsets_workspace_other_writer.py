"""A write tool's check runs on the workspace value this process last knew committed,
without asking the store whether another process wrote since (`repo.known`): what the
store holds decides all the same. A call refused on that value is checked again on the
stored workspace; one that passed on it is run again at its commit when the store moved
(`api.commit_checked`), its result replacing the check's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mindloop.store import Store
from mindloop.workspace import api, repo
from mindloop.workspace.commands import Session
from mindloop.workspace.models import NodeKind
from mindloop.workspace.transitions import Authority
from tests.toolsets.ws_env import TASK, Env, build


@pytest.fixture
def env(tmp_path: Path) -> Env:
    rtws = build(tmp_path)
    return Env(rtws, Store.for_rtws(rtws, durable=False))


def _other_writer(env: Env, command: Callable[[Session], object]) -> None:
    """`command` run by another process: a store of its own on the same database."""
    other = Store.for_rtws(env.rtws, durable=False)
    try:
        api.execute(other, env.rtws, TASK, Authority.chat("@other"), command)
    finally:
        other.close()


async def test_a_call_refused_on_the_known_value_is_checked_on_the_stored_one(env: Env) -> None:
    out = await env.call(
        "node_create", parent_id="root", kind="EXECUTION", title="A", requirement="a"
    )
    assert not out.is_error, out.text
    _other_writer(
        env,
        lambda s: s.create_node(
            parent_id="root", kind=NodeKind.EXECUTION, title="B", requirement="b"
        ),
    )
    known = repo.known(env.store, TASK)
    assert known is not None and "n1" in known.nodes and "n2" not in known.nodes
    out = await env.call("node_update", node_id="n2", notes="seen by this process too")
    assert not out.is_error, out.text
    assert out.text.startswith("updated n2 ")
    assert env.state().nodes["n2"].notes == "seen by this process too"


async def test_a_call_refused_on_the_stored_value_too_is_refused(env: Env) -> None:
    out = await env.call(
        "node_create", parent_id="root", kind="EXECUTION", title="A", requirement="a"
    )
    assert not out.is_error, out.text
    before = env.snapshot()
    out = await env.call("node_update", node_id="n9", notes="x")
    assert out.is_error and "n9" in out.text
    assert env.snapshot() == before


async def test_a_call_that_passed_on_a_value_the_store_moved_past_runs_again(env: Env) -> None:
    out = await env.call(
        "node_create", parent_id="root", kind="EXECUTION", title="A", requirement="a"
    )
    assert not out.is_error, out.text
    _other_writer(env, lambda s: s.update(node_id="n1", notes="from the other process"))
    out = await env.call("node_update", node_id="n1", conclusion="done here")
    assert not out.is_error, out.text
    n1 = env.state().nodes["n1"]
    assert n1.notes == "from the other process" and n1.conclusion == "done here"
    assert f"v{n1.version}" in out.text  # the result of the run at the commit
