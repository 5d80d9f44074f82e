"""The `workspace` toolset's doc and rule tools: references with statuses (statements
42, 46-48, flaw 3), doc path checks (16, 68), the lookup priority (69), `rule_add`, and a
change that races the call's commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.store import Store
from mindloop.workspace import markdown
from mindloop.workspace.api import execute
from mindloop.workspace.models import DocRef, DocStatus
from mindloop.workspace.transitions import Authority
from tests.toolsets.ws_env import TASK, Env, build


@pytest.fixture
def env(tmp_path: Path) -> Env:
    rtws = build(tmp_path)
    return Env(rtws, Store.for_rtws(rtws, durable=False))


async def _node(env: Env, **extra: object) -> None:
    out = await env.call(
        "node_create",
        parent_id="root",
        kind="EXECUTION",
        title="API",
        requirement="r",
        docs=[{"path": "docs/auth.md", "description": "auth design"}],
        **extra,
    )
    assert not out.is_error, out.text


async def test_reference_add_remove_with_their_errors_and_lines(env: Env) -> None:
    await _node(env)
    out = await env.call("node_reference", node_id="n1", target="docs/auth.md", action="add")
    assert out.is_error and out.text.startswith("REFERENCE_EXISTS: target")
    out = await env.call("node_reference", node_id="n1", target="docs/db.md", action="remove")
    assert out.is_error and out.text.startswith("REFERENCE_NOT_FOUND: target")
    out = await env.call(
        "node_reference", node_id="n1", target="docs/db.md", action="add", description="tables"
    )
    assert not out.is_error and "- docs/db.md (active) tables" in out.text
    info = (env.rtws / TASK / "workspace/nodes/API_n1/Info.md").read_text()
    assert "- [db.md](docs/db.md) - tables (active)" in info
    log = (env.rtws / TASK / "workspace/nodes/API_n1/Log.md").read_text()
    assert "add reference: docs/db.md" in log
    assert env.state().index_doc("docs/db.md") is not None  # indexed on dispatch
    out = await env.call("node_reference", node_id="n1", target="docs/db.md", action="remove")
    assert not out.is_error
    assert env.state().nodes["n1"].doc("docs/db.md") is None
    assert env.state().index_doc("docs/db.md") is not None  # the index keeps every used doc


async def test_flaw_3_an_unknown_action_is_an_error_naming_the_allowed_ones(env: Env) -> None:
    await _node(env)
    before = env.snapshot()
    out = await env.call("node_reference", node_id="n1", target="docs/auth.md", action="archive")
    assert out.is_error
    assert "action" in out.text and all(
        f"'{a}'" in out.text for a in ("add", "remove", "expire", "activate")
    )
    assert env.snapshot() == before


async def test_expire_keeps_the_doc_listed_and_activate_brings_it_back(env: Env) -> None:
    await _node(env)
    out = await env.call("node_reference", node_id="n1", target="docs/auth.md", action="expire")
    assert not out.is_error and "- docs/auth.md (expired) auth design" in out.text
    st = env.state()
    assert st.nodes["n1"].doc("docs/auth.md").status is DocStatus.EXPIRED  # type: ignore[union-attr]
    assert st.index_doc("docs/auth.md") is not None  # still in the index
    assert st.prompt_docs(st.nodes["n1"]) == []  # never in a prompt
    files = (env.rtws / TASK / "workspace/nodes/API_n1/Info.md").read_text()
    assert "- [auth.md](docs/auth.md) - auth design (expired)" in files
    out = await env.call("node_reference", node_id="n1", target="docs/none.md", action="expire")
    assert out.is_error and out.text.startswith("REFERENCE_NOT_FOUND")
    await env.call("node_reference", node_id="n1", target="docs/auth.md", action="activate")
    st = env.state()
    assert [d.path for d in st.prompt_docs(st.nodes["n1"])] == ["docs/auth.md"]


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("docs/missing.md", "DOC_NOT_FOUND"),
        ("../outside.md", "INVALID_DOC_PATH"),
        ("/etc/passwd", "INVALID_DOC_PATH"),
        ("docs/escape.md", "INVALID_DOC_PATH"),  # a symlink out of the rtws
        ("tasks/login.tsk/secret.md", "INVALID_DOC_PATH"),
        (".minds/team.yaml", "INVALID_DOC_PATH"),
        (".mindloop/state.sqlite", "INVALID_DOC_PATH"),
        ("docs", "DOC_NOT_FOUND"),  # a directory
        ("ftp://example.com/a", "INVALID_DOC_PATH"),
    ],
)
async def test_bad_doc_paths_are_refused_naming_the_path_and_nothing_is_written(
    env: Env, path: str, code: str
) -> None:
    await _node(env)
    before = env.snapshot()
    for args in (
        {"tool": "node_reference", "node_id": "n1", "target": path, "action": "add"},
        {
            "tool": "node_create",
            "parent_id": "root",
            "kind": "EXECUTION",
            "title": "x",
            "requirement": "r",
            "docs": [{"path": "docs/api.md"}, {"path": path}],
        },
    ):
        name = str(args.pop("tool"))
        out = await env.call(name, **args)
        arg = "target" if name == "node_reference" else "docs[1].path"
        assert out.is_error and out.text.startswith(f"{code}: {arg}:"), out.text
        assert path.split("/")[-1] in out.text
    assert env.snapshot() == before


async def test_urls_skip_the_file_check(env: Env) -> None:
    await _node(env)
    out = await env.call(
        "node_reference", node_id="n1", target="https://example.com/rfc7519", action="add"
    )
    assert not out.is_error, out.text


async def test_lookup_index_first_then_the_rtws_else_ask_the_human(env: Env) -> None:
    await _node(env)
    out = await env.call("doc_lookup", query="auth")
    assert out.text.startswith("found in the workspace index (1)") and "docs/auth.md" in out.text
    # not indexed: found in the rtws, indexed and referenced on the node
    out = await env.call("doc_lookup", query="login.py", node_id="n1")
    assert "found in the rtws, now indexed and referenced on n1" in out.text
    st = env.state()
    assert st.index_doc("src/login.py") and st.nodes["n1"].doc("src/login.py")
    # .gitignore is honoured: build/login_generated.md is never found
    out = await env.call("doc_lookup", query="generated")
    assert out.text.startswith("MISSING:") and "!?@human" in out.text
    assert "doc missing: 'generated'" in (env.rtws / TASK / "workspace/Log.md").read_text()
    # encapsulated state is never found either
    out = await env.call("doc_lookup", query="secret")
    assert out.text.startswith("MISSING:")


async def test_rule_add_is_the_root_dialogs_and_cites_the_user(env: Env) -> None:
    env.store.create_dialog(
        __import__("mindloop.store", fromlist=["DialogRecord"]).DialogRecord(
            id="d-root", root_id="d-root", member="dev", task_path=TASK, kind="root"
        )
    )
    env.store.append_message("d-root", "user", {"text": "Please: use type hints everywhere!"})
    side = env.ctx(is_root=False, dialog="s1")
    out = await env.call("rule_add", side, rule="Use type hints", quote="use type hints")
    assert out.is_error and "root dialog" in out.text
    out = await env.call("rule_add", rule="Use type hints everywhere", quote="pretty please")
    assert out.is_error and out.text.startswith("NOT_STATED: quote")
    out = await env.call(
        "rule_add", rule="Use type hints everywhere", quote="use type  hints everywhere"
    )
    assert not out.is_error, out.text
    [rule] = env.state().rules
    assert rule.text == "Use type hints everywhere" and rule.source["message_id"] == 1
    out = await env.call("rule_add", rule="Use type hints everywhere", quote="use type hints")
    assert "exists already" in out.text and len(env.state().rules) == 1
    ws = markdown.parse_workspace_md((env.rtws / TASK / "workspace/Workspace.md").read_text())
    assert ws[0] == ["Use type hints everywhere"]


async def test_a_change_racing_the_commit_is_refused_with_nothing_written(env: Env) -> None:
    await _node(env)
    pending = await env.run("node_transition", node_id="n1", to="IN_PROGRESS", reason="go")
    assert not pending.is_error and pending.effects
    # meanwhile someone else cancels the node
    execute(
        env.store,
        env.rtws,
        TASK,
        Authority.user(),
        lambda s: s.transition(node_id="n1", to="CANCELLED", reason="scope", conclusion="dropped"),  # type: ignore[arg-type]
    )
    before = env.snapshot()
    out = env.commit(pending)
    assert out.is_error and "ILLEGAL_TRANSITION" in out.text and "nothing was written" in out.text
    assert env.snapshot() == before
    # two creates checked against the same state get distinct ids at commit
    a = await env.run("node_create", parent_id="root", kind="EXECUTION", title="A", requirement="a")
    b = await env.run("node_create", parent_id="root", kind="EXECUTION", title="B", requirement="b")
    assert "created n2" in a.text and "created n2" in b.text
    assert "created n2" in env.commit(a).text
    assert env.commit(b).text.startswith("created n3")


async def test_lookup_index_hits_are_referenced_only_when_few_and_active(env: Env) -> None:
    await _node(env)
    for rel in ("docs/api.md", "docs/db.md", "docs/notes.md"):
        await env.call("node_reference", node_id="n1", target=rel, action="add")
    await env.call("node_create", parent_id="root", kind="EXECUTION", title="B", requirement="b")
    out = await env.call("doc_lookup", query="docs/", node_id="n2")
    assert "found in the workspace index (4)" in out.text
    assert "referenced on n2: docs/auth.md, docs/api.md, docs/db.md, docs/notes.md" in out.text
    execute(
        env.store,
        env.rtws,
        TASK,
        Authority.user(),
        lambda s: s.index_status("docs/db.md", DocStatus.EXPIRED),
    )
    await env.call("node_create", parent_id="root", kind="EXECUTION", title="C", requirement="c")
    out = await env.call("doc_lookup", query="db", node_id="n3")
    assert "docs/db.md (expired)" in out.text and env.state().nodes["n3"].docs == []
    for i in range(6):  # more than LOOKUP_HITS
        (env.rtws / "docs" / f"extra{i}.md").write_text("x")
        execute(
            env.store,
            env.rtws,
            TASK,
            Authority.user(),
            lambda s, i=i: s.index_add(f"docs/extra{i}.md"),
        )
    out = await env.call("doc_lookup", query="extra", node_id="n3")
    assert "narrow the query" in out.text and env.state().nodes["n3"].docs == []


async def test_statement_43_a_reference_added_without_description_stays_empty(env: Env) -> None:
    """43 as kept (flaw 5): no description is made up (upstream wrote `节点引用: <id>` or
    the path); the empty description is stored, projected and read back as empty."""
    await _node(env)
    out = await env.call("node_reference", node_id="n1", target="docs/notes.md", action="add")
    assert not out.is_error, out.text
    ref = env.state().nodes["n1"].doc("docs/notes.md")
    assert ref is not None and ref.description == ""
    index = env.state().index_doc("docs/notes.md")
    assert index is not None and index.description == ""
    info = markdown.parse_info_md((env.rtws / TASK / "workspace/nodes/API_n1/Info.md").read_text())
    assert DocRef(path="docs/notes.md", description="") in info["docs"]
