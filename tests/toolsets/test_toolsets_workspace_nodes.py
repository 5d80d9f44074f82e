"""The `workspace` toolset's node tools, through the registry as the engine calls them:
TanmiWorkspace acceptance statements 5, 6, 12-14, 17, 18, 21, 24, 26, 27, 31, 33, 50, 59,
60, 65, 70 (as our decisions keep them), and every declared parameter reaching its
handler (statement 72, flaw 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.workspace import markdown, repo
from mindloop.workspace.models import DocStatus, NodeKind, NodeStatus, NodeType
from mindloop.workspace.ref import workspace_ref
from tests.toolsets.ws_env import TASK, Env, build


@pytest.fixture
def env(tmp_path: Path) -> Env:
    from mindloop.store import Store

    rtws = build(tmp_path)
    return Env(rtws, Store.for_rtws(rtws, durable=False))


async def _tree(env: Env) -> None:
    """root ─ n1 Backend (planning, docs A B C) ─ n2 API, n3 Schema; root ─ n4 Form."""
    out = await env.call(
        "node_create",
        parent_id="root",
        kind="PLANNING",
        title="Backend",
        requirement="b",
        docs=[{"path": "docs/auth.md"}, {"path": "docs/api.md"}, {"path": "docs/db.md"}],
    )
    assert not out.is_error, out.text
    out = await env.call(
        "node_create",
        parent_id="n1",
        kind="EXECUTION",
        title="API",
        requirement="r",
        docs=[{"path": "docs/auth.md", "description": "auth design"}, {"path": "docs/api.md"}],
        acceptance_criteria=[{"when": "POST /login", "then": "200 and a token"}],
    )
    assert not out.is_error, out.text
    await env.call("node_create", parent_id="n1", kind="EXECUTION", title="Schema", requirement="s")
    await env.call(
        "node_create",
        parent_id="root",
        kind="EXECUTION",
        title="Form",
        requirement="f",
        deps=["n2"],
    )


async def test_first_use_creates_the_root_and_logs_the_scan(env: Env) -> None:
    out = await env.call("node_list")
    assert "root [NEW] PLANNING 'login'" in out.text and "(focus)" in out.text
    assert "start scan found these docs" in out.text and "README.md" in out.text
    st = env.state()
    root = st.nodes["root"]
    assert (root.kind, root.status, root.parent_id, st.focus) == (
        NodeKind.PLANNING,
        NodeStatus.NEW,
        None,
        "root",
    )
    log = (env.rtws / TASK / "workspace" / "Log.md").read_text()
    assert "workspace of tasks/login.tsk created" in log and "start scan" in log
    assert "build/" not in log  # .gitignore honoured
    assert [d.path for d in st.offered][:2] == ["README.md", "docs/api.md"]
    assert st.index == []  # offered, not indexed nor dispatched


async def test_create_appends_the_child_with_exactly_the_docs_given(env: Env) -> None:
    await _tree(env)
    st = env.state()
    assert st.nodes["n1"].children == ["n2", "n3"] and st.nodes["n2"].parent_id == "n1"
    # 13: exactly A, B in order; the parent keeps A, B, C
    assert [d.path for d in st.nodes["n2"].docs] == ["docs/auth.md", "docs/api.md"]
    assert [d.path for d in st.nodes["n1"].docs] == ["docs/auth.md", "docs/api.md", "docs/db.md"]
    # 14: no docs given, none at all (nothing inherited)
    assert st.nodes["n3"].docs == [] and st.nodes["n4"].docs == []
    # 15 (mindloop): dispatched docs are indexed once
    assert [d.path for d in st.index] == ["docs/auth.md", "docs/api.md", "docs/db.md"]
    assert st.nodes["n2"].acceptance_criteria[0].id == "AC1"


async def test_create_refusals_name_the_argument_and_write_nothing(env: Env) -> None:
    await _tree(env)
    before = env.snapshot()
    cases = [
        (
            dict(parent_id="n2", kind="EXECUTION", title="x", requirement="r"),
            "EXECUTION_CANNOT_HAVE_CHILDREN: parent_id",
        ),
        (
            dict(parent_id="nope", kind="EXECUTION", title="x", requirement="r"),
            "UNKNOWN_NODE: parent_id: no node 'nope'",
        ),
        (
            dict(parent_id="root", kind="EXECUTION", title="a/b", requirement="r"),
            "INVALID_TITLE: title",
        ),
        (
            dict(parent_id="root", kind="EXECUTION", title="x", requirement="r", deps=["n9"]),
            "UNKNOWN_NODE: deps[0]",
        ),
        (
            dict(parent_id="root", kind="EXECUTION", title="x", requirement="a\n## Notes\nb"),
            "INVALID_CONTENT: requirement: line 2 starts with '## '",
        ),
    ]
    for args, expected in cases:
        out = await env.call("node_create", **args)
        assert out.is_error and out.text.startswith(expected), (args, out.text)
    out = await env.call("node_create", parent_id="root", kind="WORK", title="x", requirement="r")
    assert out.is_error and "kind" in out.text and "'PLANNING' or 'EXECUTION'" in out.text
    out = await env.call(
        "node_create", parent_id="root", kind="EXECUTION", title="x", requirement="r", colour=1
    )
    assert out.is_error and "colour: unknown argument" in out.text  # 65: no auto-correct
    out = await env.call(
        "node_create", parent_id="root", kind="EXECUTION", title="x" * 101, requirement="r"
    )
    assert out.is_error and "title" in out.text and "100" in out.text
    assert env.snapshot() == before


async def test_a_literal_backslash_n_is_a_newline_and_sub_headings_pass(env: Env) -> None:
    out = await env.call(
        "node_create",
        parent_id="root",
        kind="EXECUTION",
        title="JWT",
        requirement="Implement auth.\\n\\n### Constraints\\n- must use JWT",
    )
    assert not out.is_error, out.text
    assert (
        env.state().nodes["n1"].requirement == "Implement auth.\n\n### Constraints\n- must use JWT"
    )


async def test_transitions_log_and_focus_and_refuse_bad_conclusions(env: Env) -> None:
    await _tree(env)
    out = await env.call("node_transition", node_id="n3", to="IN_PROGRESS", reason="starting")
    assert out.text.startswith("n3: NEW → IN_PROGRESS.") and env.state().focus == "n3"
    log = (env.rtws / TASK / "workspace/nodes/Schema_n3/Log.md").read_text()
    assert "NEW → IN_PROGRESS by RT (@dev): starting" in log
    before = env.snapshot()
    out = await env.call(
        "node_transition", node_id="n3", to="CANCELLED", reason="scope", conclusion="x\n## y"
    )
    assert out.is_error and out.text.startswith("INVALID_CONTENT: conclusion")
    out = await env.call("node_transition", node_id="n3", to="CANCELLED", reason="scope")
    assert out.is_error and out.text.startswith("CONCLUSION_REQUIRED: conclusion")
    out = await env.call("node_transition", node_id="n3", to="DONE", reason="x", conclusion="c")
    assert out.is_error and "ILLEGAL_TRANSITION: to: {from: IN_PROGRESS, to: DONE" in out.text
    assert "legal from there" not in out.text or "COMPLETE" in out.text
    out = await env.call("node_transition", node_id="n3", to="FINISHED", reason="x")
    assert out.is_error and "to:" in out.text and "'DONE'" in out.text
    assert env.snapshot() == before
    out = await env.call(
        "node_transition",
        node_id="n3",
        to="COMPLETE",
        reason="done",
        evidence="tests green",
        no_artifacts_reason="schema only",
    )
    assert not out.is_error, out.text
    # the checkpoint is the workspace ref the runtime took; the evidence is logged
    assert env.state().nodes["n3"].checkpoint_ref == workspace_ref(env.rtws)
    [row] = [
        e for e in repo.log(env.store, TASK) if e.node_id == "n3" and e.data.get("to") == "COMPLETE"
    ]
    assert (row.data["evidence"], row.data["ref"]) == ("tests green", workspace_ref(env.rtws))


async def test_update_sets_notes_artifacts_conclusion_into_info_and_graph(env: Env) -> None:
    await _tree(env)
    out = await env.call(
        "node_update",
        node_id="n2",
        notes="halfway",
        artifacts=["src/login.py"],
        conclusion="works",
        expected_version=1,
    )
    assert not out.is_error, out.text
    info = markdown.parse_info_md((env.rtws / TASK / "workspace/nodes/API_n2/Info.md").read_text())
    assert (info["notes"], info["artifacts"], info["conclusion"]) == (
        "halfway",
        ["src/login.py"],
        "works",
    )
    import json

    graph = json.loads((env.rtws / TASK / "workspace/graph.json").read_text())
    assert graph["nodes"]["n2"]["conclusion"] is True and graph["nodes"]["n2"]["version"] == 2
    before = env.snapshot()
    out = await env.call("node_update", node_id="n2", notes="again", expected_version=1)
    assert out.is_error and out.text.startswith(
        "STALE_VERSION: expected_version: node n2 is at version 2"
    )
    assert env.snapshot() == before


async def test_node_list_depth_and_root(env: Env) -> None:
    await _tree(env)
    out = await env.call("node_list", depth=1)
    assert "n1 [NEW] PLANNING 'Backend'" in out.text and "n4" in out.text
    assert "n2 [" not in out.text and "n3 [" not in out.text
    out = await env.call("node_list", root_id="n1")
    assert "n2 [NEW] EXECUTION 'API'" in out.text and "n4" not in out.text
    out = await env.call("node_get", node_id="n4")
    assert "deps=n2" in out.text and "requirement:\nf" in out.text


async def test_split_needs_in_progress_then_focuses_an_isolated_child(env: Env) -> None:
    await _tree(env)
    before = env.snapshot()
    out = await env.call("node_split", parent_id="n3", title="Index", requirement="add an index")
    assert out.is_error and out.text.startswith("SPLIT_REQUIRES_IN_PROGRESS: parent_id")
    assert env.snapshot() == before
    await env.call("node_transition", node_id="n3", to="IN_PROGRESS", reason="go")
    out = await env.call(
        "node_split",
        parent_id="n3",
        title="Index",
        requirement="add an index",
        docs=[{"path": "docs/notes.md", "description": "n"}],
        inherit_context=False,
    )
    assert not out.is_error, out.text
    st = env.state()
    child = st.nodes["n5"]
    assert st.focus == "n5" and child.isolate and child.parent_id == "n3"
    assert [d.path for d in child.docs] == ["docs/notes.md"] and st.index_doc("docs/notes.md")
    n3 = st.nodes["n3"]
    assert n3.kind is NodeKind.PLANNING and n3.children == ["n5", "n6"]
    rest = st.nodes["n6"]
    assert (rest.title, rest.requirement, rest.deps) == ("Schema", "s", ["n5"])
    assert "n3 is now a planning node" in out.text
    out = await env.call(
        "node_split", parent_id="n2", title="x", requirement="y", docs=[{"path": "docs/none.md"}]
    )
    assert out.is_error


async def test_every_declared_parameter_reaches_its_handler(env: Env) -> None:
    """Statement 72 (upstream flaw 6: declared parameters silently dropped)."""
    await _tree(env)
    out = await env.call(
        "node_create",
        parent_id="root",
        kind="EXECUTION",
        title="Bench",
        requirement="e2e",
        docs=[{"path": "docs/api.md", "description": "api"}],
        acceptance_criteria=[{"id": "E1", "when": "w", "then": "t", "verify": "pytest -k e2e"}],
        type="BENCH",
        deps=["n3"],
        skills=["pytest"],
        assignee="MAIN",
        can_start_immediately=True,
    )
    assert not out.is_error, out.text
    n = env.state().nodes["n5"]
    assert (n.parent_id, n.kind, n.title, n.requirement, n.type) == (
        "root",
        NodeKind.EXECUTION,
        "Bench",
        "e2e",
        NodeType.BENCH,
    )
    assert [(d.path, d.description) for d in n.docs] == [("docs/api.md", "api")]
    assert [(c.id, c.verify) for c in n.acceptance_criteria] == [("E1", "pytest -k e2e")]
    assert (n.deps, n.skills, n.assignee, n.can_start_immediately) == (
        ["n3"],
        ["pytest"],
        "MAIN",
        True,
    )
    out = await env.call(
        "node_create",
        parent_id="root",
        kind="EXECUTION",
        title="M",
        requirement="m",
        assignee="MEMBER:bob",
    )
    assert env.state().nodes["n6"].assignee == "MEMBER:bob"
    out = await env.call(
        "node_reference",
        node_id="n2",
        target="docs/api.md",
        action="expire",
        description="api (old)",
        expected_version=1,
    )
    assert not out.is_error, out.text
    ref = env.state().nodes["n2"].doc("docs/api.md")
    assert ref is not None and (ref.status, ref.description) == (DocStatus.EXPIRED, "api (old)")
    out = await env.call(
        "node_reference", node_id="n2", target="docs/api.md", action="activate", expected_version=1
    )
    assert out.is_error and "STALE_VERSION" in out.text  # expected_version reached it
    await env.call("node_transition", node_id="n3", to="IN_PROGRESS", reason="go")
    out = await env.call(
        "node_transition",
        node_id="n3",
        to="COMPLETE",
        reason="done",
        evidence="ev-1",
        self_check=[],
        no_artifacts_reason="docs only",
        expected_version=2,
    )
    assert not out.is_error, out.text
    n3 = env.state().nodes["n3"]
    assert (n3.checkpoint_ref, n3.no_artifacts_reason) == (workspace_ref(env.rtws), "docs only")
    out = await env.call(
        "node_transition",
        node_id="n3",
        to="DONE",
        reason="checked",
        conclusion="ok",
        evidence="ref-9",
    )
    n3 = env.state().nodes["n3"]
    assert (n3.status, n3.conclusion, n3.checked_ref) == (
        NodeStatus.DONE,
        "ok",
        workspace_ref(env.rtws),
    )
    [verdict] = [
        e for e in repo.log(env.store, TASK) if e.node_id == "n3" and e.data.get("to") == "DONE"
    ]
    assert verdict.data["evidence"] == "ref-9" and n3.check_report_ref == f"worklog:{verdict.id}"
    out = await env.call(
        "node_split", parent_id="root", title="T", requirement="t", docs=[], inherit_context=True
    )
    assert not out.is_error, out.text  # root is IN_PROGRESS (derived): n3 started
    assert env.state().nodes["n7"].isolate is False and env.state().nodes["n7"].docs == []
    out = await env.call("node_dispatch", node_id="n4", member="carol", expected_version=1)
    assert out.is_error and "n2" in out.text  # n4 waits for n2; member and version were read
    out = await env.call("node_dispatch", node_id="n4", member="zed")
    assert out.is_error and "UNKNOWN_MEMBER: member" in out.text
    out = await env.call("doc_lookup", query="notes", node_id="n2")
    assert "docs/notes.md" in out.text and env.state().nodes["n2"].doc("docs/notes.md")
    out = await env.call("node_list", root_id="n1", depth=0)
    assert out.text.count("\n") == 1
    out = await env.call("rule_add", rule="r", quote="q")
    assert out.is_error and "quote" in out.text  # the quote reached the handler
    out = await env.call("node_get", node_id="n9")
    assert out.is_error and "n9" in out.text
    out = await env.call("node_update", node_id="n2", notes="n", artifacts=["a"], conclusion="c")
    n2 = env.state().nodes["n2"]
    assert (n2.notes, n2.artifacts, n2.conclusion) == ("n", ["a"], "c")


async def test_node_create_supersedes_a_terminal_node(env: Env) -> None:
    """Reopening is a new node with `supersedes` (the refusals say so): the tool takes it."""
    await _tree(env)
    await env.call("node_transition", node_id="n3", to="IN_PROGRESS", reason="go")
    await env.call(
        "node_transition", node_id="n3", to="COMPLETE", reason="x", no_artifacts_reason="none"
    )
    out = await env.call("node_transition", node_id="n3", to="DONE", reason="ok", conclusion="c")
    assert not out.is_error, out.text
    before = env.snapshot()
    out = await env.call(
        "node_create",
        parent_id="n1",
        kind="EXECUTION",
        title="Schema again",
        requirement="s",
        supersedes="n2",
    )
    assert out.is_error and out.text.startswith("INVALID_SUPERSEDES: supersedes: n2 is NEW")
    assert env.snapshot() == before
    out = await env.call(
        "node_create",
        parent_id="n1",
        kind="EXECUTION",
        title="Schema again",
        requirement="s",
        supersedes="n3",
    )
    assert not out.is_error, out.text
    assert env.state().nodes["n5"].supersedes == "n3"
    out = await env.call("node_get", node_id="n5")
    assert "supersedes: n3" in out.text


async def test_node_list_shows_the_start_scans_offer_when_the_cli_initialised(env: Env) -> None:
    """The offer is appended to the first tool result only; a workspace first touched from
    the CLI (a `rules add`) never showed it to an agent. node_list and node_get root show
    the docs offered and not given to any node yet."""
    from mindloop.workspace.api import WorkspaceApi

    WorkspaceApi(env.rtws, TASK, store=env.store).add_rule("Use type hints everywhere")
    out = await env.call("node_list")
    assert not out.is_error and "start scan found these docs" not in out.text  # not first use
    assert "offered" in out.text and "README.md" in out.text and "docs/auth.md" in out.text
    out = await env.call("node_get", node_id="root")
    assert "offered" in out.text and "README.md" in out.text
    await env.call(
        "node_create",
        parent_id="root",
        kind="EXECUTION",
        title="x",
        requirement="r",
        docs=[{"path": "README.md"}],
    )
    out = await env.call("node_list")
    offered = next(line for line in out.text.splitlines() if "offered" in line)
    assert "README.md" not in offered and "docs/auth.md" in offered  # given: no longer offered


async def test_statement_54_node_get_shows_the_last_20_log_rows(env: Env) -> None:
    """54 as kept: a node's 27 log rows (created, – → NEW, 25 updates) → node_get shows
    the newest 20, oldest first (no `maxLogEntries`: the log files keep every row)."""
    await env.call("node_create", parent_id="root", kind="EXECUTION", title="E", requirement="e")
    for i in range(25):
        out = await env.call("node_update", node_id="n1", notes=f"step {i}")
        assert not out.is_error, out.text
    out = await env.call("node_get", node_id="n1")
    shown = out.text.split("\nlog:\n", 1)[1].splitlines()
    assert len(shown) == 20 and all(line.endswith("updated notes") for line in shown)
    assert "created" not in out.text.split("\nlog:\n", 1)[1]
    log = (env.rtws / TASK / "workspace" / "nodes" / "E_n1" / "Log.md").read_text()
    assert log.count("updated notes") == 25 and "created" in log
