"""Issue 11's "Bad input": an unknown node, parent or dep; a cycle; a title with path
separators; a requirement line that would break the projection's sections; an oversized
field; a doc path outside the rtws or into encapsulated state; a stale version; an
illegal transition. Each is a clear error that names the argument, and changes nothing
(store rows, log, files)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mindloop.store import Store
from mindloop.workspace.api import WorkspaceApi
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.models import NodeStatus
from mindloop.workspace.transitions import Authority
from tests.toolsets.ws_env import TASK, Env, build

CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("unknown node", "node_update", {"node_id": "n99", "notes": "x"}, "UNKNOWN_NODE: node_id:"),
    (
        "unknown parent",
        "node_create",
        {"parent_id": "n99", "kind": "EXECUTION", "title": "t", "requirement": "r"},
        "UNKNOWN_NODE: parent_id:",
    ),
    (
        "unknown dep",
        "node_create",
        {
            "parent_id": "root",
            "kind": "EXECUTION",
            "title": "t",
            "requirement": "r",
            "deps": ["n1", "n99"],
        },
        "UNKNOWN_NODE: deps[1]:",
    ),
    (
        "a cycle",
        "node_create",
        {"parent_id": "n1", "kind": "EXECUTION", "title": "t", "requirement": "r", "deps": ["n1"]},
        "CYCLE: deps: the deps would form a cycle: n1 → n3 → n1",
    ),
    (
        "a title with a path separator",
        "node_create",
        {"parent_id": "root", "kind": "EXECUTION", "title": "api\\login", "requirement": "r"},
        "INVALID_TITLE: title:",
    ),
    (
        "a section-breaking requirement",
        "node_create",
        {
            "parent_id": "root",
            "kind": "EXECUTION",
            "title": "t",
            "requirement": "ok\n## Conclusion\nfake",
        },
        "INVALID_CONTENT: requirement: line 2",
    ),
    (
        "an oversized field",
        "node_update",
        {"node_id": "n2", "notes": "x" * 5001},
        "invalid arguments for node_update:\n- notes: string should have at most 5000 characters",
    ),
    (
        "an oversized list",
        "node_create",
        {
            "parent_id": "root",
            "kind": "EXECUTION",
            "title": "t",
            "requirement": "r",
            "skills": ["s"] * 51,
        },
        "invalid arguments for node_create:\n- skills: list should have at most 50 items",
    ),
    (
        "a doc outside the rtws",
        "node_reference",
        {"node_id": "n2", "target": "../outside.md", "action": "add"},
        "INVALID_DOC_PATH: target:",
    ),
    (
        "a doc in encapsulated state",
        "node_reference",
        {"node_id": "n2", "target": "tasks/login.tsk/goals.md", "action": "add"},
        "INVALID_DOC_PATH: target:",
    ),
    (
        "a stale version",
        "node_transition",
        {"node_id": "n2", "to": "IN_PROGRESS", "reason": "go", "expected_version": 7},
        "STALE_VERSION: expected_version: node n2 is at version 1",
    ),
    (
        "an illegal transition",
        "node_transition",
        {"node_id": "n2", "to": "DONE", "reason": "x", "conclusion": "c"},
        "ILLEGAL_TRANSITION: to: {from: NEW, to: DONE, by: ADJUST|CHECK|DO|PLAN}",
    ),
    (
        "an unknown status",
        "node_transition",
        {"node_id": "n2", "to": "FINISHED", "reason": "x"},
        "invalid arguments for node_transition:\n- to: input should be 'NEW'",
    ),
    (
        "an unknown argument",
        "node_get",
        {"node_id": "n2", "nod_id": "n2"},
        "invalid arguments for node_get:\n- nod_id: unknown argument",
    ),
]


@pytest.mark.parametrize(("what", "tool", "args", "error"), CASES, ids=[c[0] for c in CASES])
async def test_bad_input_names_the_argument_and_changes_nothing(
    tmp_path: Path, what: str, tool: str, args: dict[str, Any], error: str
) -> None:
    rtws = build(tmp_path)
    env = Env(rtws, Store.for_rtws(rtws, durable=False))
    await env.call("node_create", parent_id="root", kind="PLANNING", title="P", requirement="p")
    await env.call("node_create", parent_id="root", kind="EXECUTION", title="E", requirement="e")
    before = env.snapshot()
    out = await env.call(tool, **args)
    assert out.is_error, what
    assert out.text.startswith(error), (what, out.text)
    assert env.snapshot() == before, what
    env.store.close()


# ---------------------------------------------------------------- every refusal code
# Each code below is raised in one place of mindloop/workspace (commands.py, moves.py);
# every one is reached here the way an agent or a user reaches it, on a workspace where
# it applies, and changes nothing (store rows, log, files).

AUTH = {"path": "docs/auth.md", "description": "auth"}
VERIFY = [{"when": "the suite runs", "then": "green", "verify": "pytest"}]


async def _refusal_tree(env: Env) -> None:
    """root ─ n1 P (planning; derived DONE: its one child n3 is DONE) ─ n3 Done;
    root ─ n2 E (docs/auth.md); root ─ n4 Bench (a BENCH, WAIT); root ─ n5 M (bob's)."""
    calls: list[dict[str, Any]] = [
        dict(parent_id="root", kind="PLANNING", title="P", requirement="p"),
        dict(parent_id="root", kind="EXECUTION", title="E", requirement="e", docs=[AUTH]),
        dict(parent_id="n1", kind="EXECUTION", title="Done", requirement="d"),
        dict(
            parent_id="root",
            kind="EXECUTION",
            type="BENCH",
            title="Bench",
            requirement="b",
            acceptance_criteria=VERIFY,
        ),
        dict(parent_id="root", kind="EXECUTION", title="M", requirement="m", assignee="MEMBER:bob"),
    ]
    for args in calls:
        out = await env.call("node_create", **args)
        assert not out.is_error, out.text
    for args in (
        dict(to="IN_PROGRESS", reason="go"),
        dict(to="COMPLETE", reason="done", no_artifacts_reason="none"),
        dict(to="DONE", reason="checked", conclusion="ok"),
    ):
        out = await env.call("node_transition", node_id="n3", **args)
        assert not out.is_error, out.text
    assert env.state().nodes["n1"].status is NodeStatus.DONE


def _api(env: Env) -> WorkspaceApi:
    return WorkspaceApi(env.rtws, TASK, store=env.store)


async def _tool(env: Env, tool: str, **args: Any) -> str:
    out = await env.call(tool, **args)
    assert out.is_error, out.text
    return out.text


async def _raised(fn: Callable[[], Any]) -> str:
    with pytest.raises(WorkspaceError) as err:
        fn()
    return str(err.value)


async def _bench_in_progress(env: Env) -> None:
    """n4 (BENCH) WAIT → NEW by the runtime (waits done, not started: its BENCH_READY
    holds once it tests only the DONE n3), then started."""
    out = await env.call("node_add_deps", node_id="n4", deps=["n3"])
    assert not out.is_error, out.text
    _api(env).command(
        lambda s: s.transition(node_id="n4", to=NodeStatus.NEW, reason="waits done"),
        authority=Authority.runtime(),
    )
    out = await env.call("node_transition", node_id="n4", to="IN_PROGRESS", reason="go")
    assert not out.is_error, out.text


async def _dispatched(env: Env) -> None:
    out = await env.call("node_dispatch", node_id="n5")
    assert not out.is_error and env.state().nodes["n5"].status is NodeStatus.WAIT, out.text


Act = Callable[[Env], Awaitable[str]]
Prepare = Callable[[Env], Awaitable[None]] | None

REFUSALS: list[tuple[str, Prepare, Act, str]] = [
    (
        "a child under a terminal planning node",
        None,
        lambda env: _tool(
            env, "node_create", parent_id="n1", kind="EXECUTION", title="x", requirement="r"
        ),
        "INVALID_PARENT_STATUS: parent_id: n1 is DONE",
    ),
    (
        "removing an indexed doc a node references",
        None,
        lambda env: _raised(lambda: _api(env).remove_doc("docs/auth.md")),
        "DOC_IN_USE: path: 'docs/auth.md' is referenced by n2",
    ),
    (
        "a planning BENCH",
        None,
        lambda env: _tool(
            env,
            "node_create",
            parent_id="root",
            kind="PLANNING",
            type="BENCH",
            title="x",
            requirement="r",
            acceptance_criteria=VERIFY,
        ),
        "INVALID_NODE_TYPE: type: BENCH applies to execution nodes only",
    ),
    (
        "splitting a BENCH",
        _bench_in_progress,
        lambda env: _tool(env, "node_split", parent_id="n4", title="x", requirement="r"),
        "INVALID_NODE_TYPE: parent_id: a BENCH node is not split",
    ),
    (
        "a node depending on itself",
        None,
        lambda env: _tool(env, "node_add_deps", node_id="n2", deps=["n2"]),
        "SELF_DEPENDENCY: deps: a node cannot depend on itself",
    ),
    (
        "superseding a node that is not terminal",
        None,
        lambda env: _tool(
            env,
            "node_create",
            parent_id="root",
            kind="EXECUTION",
            title="x",
            requirement="r",
            supersedes="n2",
        ),
        "INVALID_SUPERSEDES: supersedes: n2 is NEW",
    ),
    (
        "a doc given twice",
        None,
        lambda env: _tool(
            env,
            "node_create",
            parent_id="root",
            kind="EXECUTION",
            title="x",
            requirement="r",
            docs=[AUTH, {"path": "./docs/auth.md"}],
        ),
        "DUPLICATE_DOC: docs: 'docs/auth.md' is given twice",
    ),
    (
        "COMPLETE for a dispatched node other than by its member's reply",
        _dispatched,
        lambda env: _raised(
            lambda: _api(env).command(
                lambda s: s.transition(node_id="n5", to=NodeStatus.COMPLETE, reason="x"),
                authority=Authority.runtime(),
            )
        ),
        "REPLY_ONLY: to: n5 becomes COMPLETE through its member's reply",
    ),
    (
        "dispatching a MAIN node without a member",
        None,
        lambda env: _tool(env, "node_dispatch", node_id="n2"),
        "NO_MEMBER: member: n2 is assigned to MAIN",
    ),
    (
        "dispatching a planning node",
        None,
        lambda env: _tool(env, "node_dispatch", node_id="n1", member="bob"),
        "NOT_DISPATCHABLE: node_id: n1 is not an execution TASK node",
    ),
    (
        "dispatching a node that is done",
        None,
        lambda env: _tool(env, "node_dispatch", node_id="n3", member="bob"),
        "NOT_DISPATCHABLE: node_id: n3 is DONE; only a NEW or ADJUSTING node is dispatched",
    ),
]


@pytest.mark.parametrize(
    ("what", "prepare", "act", "error"), REFUSALS, ids=[c[0] for c in REFUSALS]
)
async def test_every_refusal_code_names_its_argument_and_changes_nothing(
    tmp_path: Path, what: str, prepare: Prepare, act: Act, error: str
) -> None:
    rtws = build(tmp_path)
    env = Env(rtws, Store.for_rtws(rtws, durable=False))
    await _refusal_tree(env)
    if prepare is not None:
        await prepare(env)
    before = env.snapshot()
    text = await act(env)
    assert text.startswith(error), (what, text)
    assert env.snapshot() == before, what
    env.store.close()
