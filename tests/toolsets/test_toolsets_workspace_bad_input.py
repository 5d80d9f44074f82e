"""Issue 11's "Bad input": an unknown node, parent or dep; a cycle; a title with path
separators; a requirement line that would break the projection's sections; an oversized
field; a doc path outside the rtws or into encapsulated state; a stale version; an
illegal transition. Each is a clear error that names the argument, and changes nothing
(store rows, log, files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mindloop.store import Store
from tests.toolsets.ws_env import Env, build

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
