"""One test per upstream flaw of TanmiWorkspace (reference §5.6), each proving mindloop
does not have it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from mindloop.toolsets import workspace as toolset
from mindloop.workspace import markdown
from mindloop.workspace.api import WorkspaceApi
from mindloop.workspace.commands import DocInput, Session, parse_reply
from mindloop.workspace.context import node_context
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.models import DocRef, DocStatus, NodeKind, NodeStatus, RefAction
from mindloop.workspace.transitions import Authority
from tests.workspace.ws_util import CHAT, apply, fresh

TASK = "tasks/example.tsk"


@pytest.fixture
def api(rtws: Path) -> WorkspaceApi:
    for name in ("a", "b", "c"):
        (rtws / "docs").mkdir(exist_ok=True)
        (rtws / "docs" / f"{name}.md").write_text(f"BODY_{name}\n")
    api = WorkspaceApi(rtws, TASK)
    api.command(
        lambda s: s.create_node(
            parent_id="root",
            kind=NodeKind.EXECUTION,
            title="T",
            requirement="r",
            docs=[DocInput("docs/a.md", "alpha"), DocInput("docs/b.md", "")],
        ),
        authority=CHAT,
    )
    return api


def test_flaw_1_no_rewrite_path_loses_a_doc_status(api: WorkspaceApi, rtws: Path) -> None:
    """Upstream: status and conclusion updates re-wrote Info.md with a status-unaware
    writer, so the first transition after `expire` made the doc active again."""
    api.command(
        lambda s: s.reference(node_id="n1", target="docs/a.md", action=RefAction.EXPIRE),
        authority=CHAT,
    )
    api.command(
        lambda s: s.transition(node_id="n1", to=NodeStatus.IN_PROGRESS, reason="go"), authority=CHAT
    )
    api.command(lambda s: s.update(node_id="n1", conclusion="half"), authority=CHAT)
    api.add_doc("docs/c.md")  # an index rewrite
    info = markdown.parse_info_md((rtws / TASK / "workspace/nodes/T_n1/Info.md").read_text())
    assert [d.status for d in info["docs"]] == [DocStatus.EXPIRED, DocStatus.ACTIVE]
    assert api.state().nodes["n1"].docs[0].status is DocStatus.EXPIRED


def test_flaw_2_no_ancestor_doc_and_no_index_dump_in_a_childs_context(tmp_path: Path) -> None:
    for name in ("p", "c", "i"):
        (tmp_path / f"{name}.md").write_text(f"BODY_{name.upper()}\n")
    state = apply(
        fresh(),
        lambda s: [
            s.create_node(
                parent_id="root",
                kind=NodeKind.PLANNING,
                title="P",
                requirement="p",
                docs=[DocInput("p.md")],
            ),
            s.create_node(
                parent_id="n1",
                kind=NodeKind.EXECUTION,
                title="C",
                requirement="c",
                docs=[DocInput("c.md")],
            ),
            s.index_add("i.md"),
        ],
    )
    text = node_context(state, "n2", rtws=tmp_path)
    assert "BODY_C" in text and "p.md" not in text and "i.md" not in text


def test_flaw_3_an_unknown_reference_action_is_refused_not_silently_accepted() -> None:
    state = apply(
        fresh(),
        lambda s: s.create_node(
            parent_id="root",
            kind=NodeKind.EXECUTION,
            title="T",
            requirement="r",
            docs=[DocInput("a.md")],
        ),
    )
    s = Session(state, CHAT)
    with pytest.raises(WorkspaceError) as err:
        s.reference(node_id="n1", target="a.md", action="archive")  # type: ignore[arg-type]
    assert err.value.arg == "action" and "add, remove, expire, activate" in str(err.value)
    assert s.log == [] and s.state.nodes == state.nodes
    fields = toolset.NodeReferenceArgs.model_json_schema()["properties"]["action"]
    assert "'archive'" not in str(fields)


def test_flaw_4_the_formats_we_document_pass_our_own_validation() -> None:
    """Upstream documented a `## 规则` format its own validation refused. Ours: the
    requirement structure the tools describe (`###` sub-headings, seed 003's constraints
    list) and a member's reply in the documented protocol, even with `## ` headings of
    its own, are accepted."""
    described = toolset.NodeCreateArgs.model_json_schema()["properties"]["requirement"][
        "description"
    ]
    assert "###" in described
    seed_example = "实现用户认证功能。\n\n约束：\n- 必须使用 JWT\n- 不能使用第三方认证服务"
    state = apply(
        fresh(),
        lambda s: [
            s.create_node(
                parent_id="root", kind=NodeKind.EXECUTION, title="认证", requirement=seed_example
            ),
            s.create_node(
                parent_id="root",
                kind=NodeKind.EXECUTION,
                title="B",
                requirement="Do.\n\n### Constraints\n- JWT",
                assignee="MEMBER:bob",
            ),
        ],
    )
    assert state.nodes["n1"].requirement == seed_example
    state = apply(
        state, lambda s: s.dispatch(node_id="n2", dispatch_id="k", side_id="s", caller_id="d")
    )
    reply = "## Summary\nDone.\n\n## Checks\nAC pass.\nARTIFACT: src/x.py"
    state = apply(
        state,
        lambda s: s.member_reply(
            node_id="n2", dispatch_id="k", ok=True, text=reply, side_id="s", member="bob"
        ),
        Authority.runtime(),
    )
    node = state.nodes["n2"]
    assert node.status is NodeStatus.COMPLETE and node.artifacts == ["src/x.py"]
    assert node.conclusion.startswith("### Summary\nDone.")
    assert parse_reply(reply).artifacts == ["src/x.py"]


def test_flaw_5_a_doc_without_description_survives_every_read(
    api: WorkspaceApi, rtws: Path
) -> None:
    api.add_doc("docs/c.md", "")
    ws = markdown.parse_workspace_md((rtws / TASK / "workspace/Workspace.md").read_text())
    assert DocRef(path="docs/c.md", description="") in ws[1]
    info = markdown.parse_info_md((rtws / TASK / "workspace/nodes/T_n1/Info.md").read_text())
    assert DocRef(path="docs/b.md", description="") in info["docs"]
    assert [d.path for d in api.state().index] == ["docs/a.md", "docs/b.md", "docs/c.md"]


def test_flaw_6_every_declared_tool_parameter_is_read_by_its_handler() -> None:
    """Upstream's MCP layer silently dropped declared parameters. Our tools get the whole
    validated model; this guards that each handler reads every field it declares (the
    per-tool behaviour is in tests/toolsets/test_toolsets_workspace_nodes.py)."""
    source = ast.parse(inspect.getsource(toolset))
    used: dict[str, set[str]] = {}
    for fn in ast.walk(source):
        if isinstance(fn, ast.AsyncFunctionDef):
            used[fn.name] = {
                n.attr
                for n in ast.walk(fn)
                if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id == "a"
            }
    helpers = used.get("_lookup_index", set()) | used.get("_lookup_found", set())
    for tool in toolset.workspace_tools():
        declared = set(tool.args_model.model_fields)
        read = used[tool.name] | (helpers if tool.name == "doc_lookup" else set())
        assert declared <= read, (tool.name, declared - read)


def test_flaw_7_a_log_row_mentioning_time_is_not_skipped_and_urls_keep_their_colons() -> None:
    from mindloop.workspace.models import LogEntry

    rows = markdown.parse_log_md(
        markdown.log_md([LogEntry(at=0, actor="Time", text="时间: http://x")], "en")
    )
    assert rows[0][1:] == ("Time", "时间: http://x")
    line = markdown.doc_line(DocRef(path="http://example.com:8080/a", description="c: d"))
    assert markdown.parse_doc_line(line) == DocRef(
        path="http://example.com:8080/a", description="c: d"
    )
