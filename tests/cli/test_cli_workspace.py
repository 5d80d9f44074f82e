"""The workspace commands end to end (real `mindloop` processes): `workspace show`,
`node show`, `rules`, `docs`, each with `--json`; reads create no state; bad input is one
line naming the argument, with nothing changed; `check` reports hand-edited projections."""

from __future__ import annotations

import json
from pathlib import Path

from mindloop.workspace.api import WorkspaceApi
from mindloop.workspace.commands import CriterionInput, DocInput
from mindloop.workspace.models import NodeKind, NodeStatus
from mindloop.workspace.transitions import Authority
from tests.scenario_util import ml

TASK = "tasks/example.tsk"


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj)).returncode == 0
    (proj / "docs").mkdir()
    (proj / "docs" / "auth.md").write_text("# auth\n")
    (proj / "docs" / "api.md").write_text("# api\n")
    return proj


def test_reads_create_no_state_and_say_there_is_no_workspace(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    out = ml("workspace", "show", "-C", str(proj), TASK)
    assert out.returncode == 0 and "has no workspace yet" in out.stdout
    out = ml("rules", "list", "-C", str(proj), TASK, "--json")
    assert out.returncode == 0 and json.loads(out.stdout) == []
    assert not (proj / ".mindloop").exists()
    bad = ml("workspace", "show", "-C", str(proj), "tasks/nope.tsk")
    assert bad.returncode == 1 and "tasks/nope.tsk does not exist" in bad.stderr


def test_rules_and_docs_commands(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    out = ml("rules", "add", "-C", str(proj), TASK, "Use type hints everywhere")
    assert out.returncode == 0 and "rule added" in out.stdout, out.stderr
    again = ml("rules", "add", "-C", str(proj), TASK, "Use type hints everywhere", "--json")
    assert json.loads(again.stdout)["added"] is False
    listed = json.loads(ml("rules", "list", "-C", str(proj), TASK, "--json").stdout)
    assert [r["text"] for r in listed] == ["Use type hints everywhere"]
    assert "## Rules" in (proj / TASK / "workspace" / "Workspace.md").read_text()
    gone = ml("rules", "remove", "-C", str(proj), TASK, "No such rule")
    assert gone.returncode == 1 and gone.stderr.startswith("error: RULE_NOT_FOUND: rule:")
    out = ml("docs", "add", "-C", str(proj), TASK, "docs/auth.md", "--description", "auth design")
    assert out.returncode == 0, out.stderr
    ml("docs", "add", "-C", str(proj), TASK, "docs/api.md")
    ml("docs", "expire", "-C", str(proj), TASK, "docs/api.md")
    docs = json.loads(ml("docs", "list", "-C", str(proj), TASK, "--json").stdout)
    assert docs == [
        {"path": "docs/auth.md", "description": "auth design", "status": "active"},
        {"path": "docs/api.md", "description": "", "status": "expired"},
    ]
    text = ml("docs", "list", "-C", str(proj), TASK).stdout
    assert "- docs/api.md (expired)" in text
    before = (proj / TASK / "workspace" / "Workspace.md").read_text()
    for path, code in (
        ("../etc/passwd", "INVALID_DOC_PATH"),
        ("docs/none.md", "DOC_NOT_FOUND"),
        (f"{TASK}/goals.md", "INVALID_DOC_PATH"),
        (".minds/team.yaml", "INVALID_DOC_PATH"),
    ):
        bad = ml("docs", "add", "-C", str(proj), TASK, path)
        assert bad.returncode == 1 and bad.stderr.startswith(f"error: {code}: path:"), bad.stderr
        assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert (proj / TASK / "workspace" / "Workspace.md").read_text() == before
    out = ml("docs", "activate", "-C", str(proj), TASK, "docs/api.md", "--json")
    assert json.loads(out.stdout)["status"] == "active"
    out = ml("docs", "remove", "-C", str(proj), TASK, "docs/api.md")
    assert out.returncode == 0 and "removed" in out.stdout


def test_workspace_show_and_node_show(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    api = WorkspaceApi(proj, TASK)
    chat = Authority.chat("@dev")

    def build(s):  # type: ignore[no-untyped-def]
        s.create_node(parent_id="root", kind=NodeKind.PLANNING, title="Backend", requirement="b")
        s.create_node(
            parent_id="n1",
            kind=NodeKind.EXECUTION,
            title="API",
            requirement="Build the API.",
            docs=[DocInput("docs/auth.md", "auth design")],
            acceptance_criteria=[CriterionInput("POST /login", "200")],
            assignee="MEMBER:bob",
        )
        s.create_node(
            parent_id="root", kind=NodeKind.EXECUTION, title="Form", requirement="f", deps=["n2"]
        )
        s.create_node(parent_id="root", kind=NodeKind.EXECUTION, title="Docs", requirement="d")
        s.transition(node_id="n4", to=NodeStatus.IN_PROGRESS, reason="go")

    api.command(build, authority=chat)
    api.close()
    out = ml("workspace", "show", "-C", str(proj), TASK)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "tasks/example.tsk  focus: n4  rules: 0  docs: 1" in lines[0]
    assert any("○ NEW n2 API TASK @bob docs 1/1" in ln for ln in lines)
    assert any("○ NEW n3 Form TASK deps: n2" in ln for ln in lines)
    assert any("▶ IN_PROGRESS n4 Docs TASK ◀ focus" in ln for ln in lines)
    assert any("▶ IN_PROGRESS root" in ln for ln in lines)
    data = json.loads(ml("workspace", "show", "-C", str(proj), TASK, "--json").stdout)
    assert [(n["node"]["id"], n["depth"]) for n in data["nodes"]] == [
        ("root", 0),
        ("n1", 1),
        ("n2", 2),
        ("n3", 1),
        ("n4", 1),
    ]
    assert data["focus"] == "n4" and data["nodes"][4]["focus"] is True
    out = ml("node", "show", "-C", str(proj), TASK, "n2")
    assert out.returncode == 0, out.stderr
    for needle in (
        "Build the API.",
        "- AC1: WHEN POST /login THEN 200",
        "- docs/auth.md — auth design (active)",
        "– → NEW by PLAN",
    ):
        assert needle in out.stdout, needle
    node = json.loads(ml("node", "show", "-C", str(proj), TASK, "n2", "--json").stdout)
    assert node["node"]["assignee"] == "MEMBER:bob" and node["log"]
    bad = ml("node", "show", "-C", str(proj), TASK, "n9")
    assert bad.returncode == 1 and bad.stderr.startswith(
        "error: UNKNOWN_NODE: node_id: no node 'n9'"
    )


def test_check_reports_a_hand_edited_projection_with_its_path(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    assert ml("rules", "add", "-C", str(proj), TASK, "Keep it simple").returncode == 0
    assert ml("check", "-C", str(proj)).returncode == 0
    ws = proj / TASK / "workspace" / "Workspace.md"
    ws.write_text(ws.read_text().replace("Keep it simple", "Keep it complicated"))
    bad = ml("check", "-C", str(proj))
    assert bad.returncode == 1
    assert f"{TASK}/workspace/Workspace.md: edited by hand" in bad.stderr
    data = json.loads(ml("check", "-C", str(proj), "--json").stdout)
    assert any("Workspace.md: edited by hand" in p["text"] for p in data["problems"])
    # the next rewrite keeps the edit beside the new file; check names it
    ml("rules", "add", "-C", str(proj), TASK, "Second rule")
    kept = list(ws.parent.glob("Workspace.edited-*.md"))
    assert len(kept) == 1 and "Keep it complicated" in kept[0].read_text()
    assert "Keep it simple" in ws.read_text()
    bad = ml("check", "-C", str(proj))
    assert f"{TASK}/workspace/{kept[0].name}: a hand edit kept" in bad.stderr
    kept[0].unlink()
    assert ml("check", "-C", str(proj)).returncode == 0


def test_node_cancel_moves_the_node_with_its_reason_and_refuses_a_terminal_one(
    tmp_path: Path,
) -> None:
    """`mindloop node cancel TASK NODE --reason …`: the node is CANCELLED as the user,
    the reason its conclusion; a node already ended, or no reason, is refused (exit 1,
    nothing changed). (Stopping a teammate's side dialog with it: tests/loop.)"""
    proj = _project(tmp_path)
    api = WorkspaceApi(proj, TASK)
    api.command(
        lambda s: s.create_node(
            parent_id="root", kind=NodeKind.EXECUTION, title="Docs", requirement="d"
        ),
        authority=Authority.chat("@dev"),
    )
    out = ml("node", "cancel", "-C", str(proj), TASK, "n1", "--reason", "not needed", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"task": TASK, "node_id": "n1", "stopped": []}
    node = api.state().nodes["n1"]
    assert node.status is NodeStatus.CANCELLED and node.conclusion == "not needed"
    again = ml("node", "cancel", "-C", str(proj), TASK, "n1", "--reason", "twice")
    assert again.returncode == 1 and "ILLEGAL_TRANSITION" in again.stderr
    empty = ml("node", "cancel", "-C", str(proj), TASK, "n1", "--reason", " ")
    assert empty.returncode == 1 and "the reason is empty" in empty.stderr
    api.close()
