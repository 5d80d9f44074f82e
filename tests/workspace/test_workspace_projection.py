"""The projections: written from the store after each commit, atomically; a hand edit is
detected, kept beside the new file and reported; a crash between the commit and the
files leaves nothing a rewrite does not repair and nothing that looks like a hand edit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindloop.store import Store
from mindloop.workspace import markdown, projection, repo
from mindloop.workspace.api import WorkspaceApi, execute, prepare
from mindloop.workspace.commands import DocInput
from mindloop.workspace.models import DocStatus, NodeKind, NodeStatus, RefAction, SelfCheck
from mindloop.workspace.transitions import Authority

TASK = "tasks/login.tsk"
CHAT = Authority.chat("@dev")


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".minds").mkdir(parents=True)
    (root / TASK).mkdir(parents=True)
    (root / TASK / "goals.md").write_text("log in\n")
    (root / "docs").mkdir()
    for name in ("auth.md", "api.md", "db.md"):
        (root / "docs" / name).write_text(f"# {name}\n")
    (root / "README.md").write_text("# proj\n")
    return root


def _store(rtws: Path) -> Store:
    return Store.for_rtws(rtws, durable=False)


def _tree(store: Store, rtws: Path) -> None:
    def build(s):  # type: ignore[no-untyped-def]
        s.create_node(parent_id="root", kind=NodeKind.PLANNING, title="Backend", requirement="b")
        s.create_node(
            parent_id="n1",
            kind=NodeKind.EXECUTION,
            title="API",
            requirement="Build it.\n\n### Constraints\n- JWT",
            docs=[DocInput("docs/auth.md", "auth design"), DocInput("docs/api.md", "")],
        )

    execute(store, rtws, TASK, CHAT, build)


def _ws(rtws: Path) -> Path:
    return rtws / TASK / "workspace"


def test_files_are_written_after_the_commit_from_the_store(rtws: Path) -> None:
    store = _store(rtws)
    _tree(store, rtws)
    ws = _ws(rtws)
    names = sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*") if p.is_file())
    assert names == [
        ".lock",
        ".projection.json",
        "Log.md",
        "Workspace.md",
        "graph.json",
        "nodes/API_n2/Info.md",
        "nodes/API_n2/Log.md",
        "nodes/Backend_n1/Info.md",
        "nodes/Backend_n1/Log.md",
        "nodes/root/Info.md",
        "nodes/root/Log.md",
    ]
    _rules, index, found = markdown.parse_workspace_md((ws / "Workspace.md").read_text())
    assert [d.path for d in index] == ["docs/auth.md", "docs/api.md"]
    assert [d.path for d in found] == ["README.md", "docs/api.md", "docs/auth.md", "docs/db.md"]
    graph = json.loads((ws / "graph.json").read_text())
    assert graph["nodes"]["n2"]["status"] == "NEW" and graph["nodes"]["n1"]["children"] == ["n2"]
    info = markdown.parse_info_md((ws / "nodes/API_n2/Info.md").read_text())
    assert info["requirement"] == "Build it.\n\n### Constraints\n- JWT"
    assert "start scan of the rtws top level" in (ws / "Log.md").read_text()
    assert projection.problems(store, rtws, TASK) == []


def test_flaw_1_a_doc_status_survives_every_later_rewrite(rtws: Path) -> None:
    """Statement 49: after `expire`, a transition, a conclusion, a node update, another
    reference edit and an index rewrite all keep the status."""
    store = _store(rtws)
    _tree(store, rtws)
    info = _ws(rtws) / "nodes/API_n2/Info.md"

    def status() -> DocStatus:
        docs = markdown.parse_info_md(info.read_text())["docs"]
        return next(d.status for d in docs if d.path == "docs/api.md")

    execute(
        store,
        rtws,
        TASK,
        CHAT,
        lambda s: s.reference(node_id="n2", target="docs/api.md", action=RefAction.EXPIRE),
    )
    assert status() is DocStatus.EXPIRED
    steps = [
        lambda s: s.transition(node_id="n2", to=NodeStatus.IN_PROGRESS, reason="go"),
        lambda s: s.update(node_id="n2", notes="halfway", artifacts=["src/api.py"]),
        lambda s: s.reference(node_id="n2", target="docs/db.md", action=RefAction.ADD),
        lambda s: s.index_add("README.md", "readme"),
        lambda s: s.transition(
            node_id="n2",
            to=NodeStatus.COMPLETE,
            reason="done",
            self_check=[SelfCheck(criterion="x", passed=True)],
            conclusion="works",
        ),
    ]
    for step in steps:
        execute(store, rtws, TASK, CHAT, step)
        assert status() is DocStatus.EXPIRED
        assert repo.load(store, TASK).nodes["n2"].doc("docs/api.md").status is DocStatus.EXPIRED  # type: ignore[union-attr]


def test_a_hand_edit_is_detected_kept_beside_and_reported(rtws: Path) -> None:
    store = _store(rtws)
    _tree(store, rtws)
    ws = _ws(rtws)
    info = ws / "nodes/API_n2/Info.md"
    edited = info.read_text().replace("Build it.", "Build it my way.")
    info.write_text(edited)
    found = projection.problems(store, rtws, TASK)
    assert found == [
        f"{TASK}/workspace/nodes/API_n2/Info.md: edited by hand (the store is "
        "authoritative: change the workspace with the CLI or the tools; the edit "
        "is kept beside the file when it is next rewritten)"
    ]
    execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="n"))
    kept = list((ws / "nodes/API_n2").glob("Info.edited-*.md"))
    assert len(kept) == 1 and kept[0].read_text() == edited  # never silently overwritten
    assert "Build it my way." not in info.read_text()
    assert markdown.parse_info_md(info.read_text())["notes"] == "n"
    [problem] = projection.problems(store, rtws, TASK)
    assert problem.startswith(f"{TASK}/workspace/nodes/API_n2/{kept[0].name}: a hand edit kept")
    kept[0].unlink()
    assert projection.problems(store, rtws, TASK) == []


def test_a_crash_between_commit_and_files_is_repaired_without_false_hand_edits(
    rtws: Path,
) -> None:
    store = _store(rtws)
    _tree(store, rtws)
    ws = _ws(rtws)
    # a commit whose projection never ran (the process died right after the commit)
    with store.tx():
        s = prepare(store, rtws, TASK, CHAT)
        s.update(node_id="n2", notes="after the crash")
        repo.write(store, s.finish())
    stale = projection.problems(store, rtws, TASK)
    assert [p.split(":")[0] for p in stale] == [
        f"{TASK}/workspace/graph.json",  # the node's version
        f"{TASK}/workspace/nodes/API_n2/Info.md",
        f"{TASK}/workspace/nodes/API_n2/Log.md",
    ]
    assert all("disagrees with the store" in p for p in stale)
    # a crash in the middle of a rewrite: the manifest accepts old and new, half the
    # files are new
    files = projection.render(repo.load(store, TASK), repo.log(store, TASK))
    manifest = json.loads((ws / ".projection.json").read_text())["files"]
    for rel, text in files.items():
        h = projection._hash(text)
        manifest[rel] = sorted({*manifest.get(rel, []), h})
    (ws / ".projection.json").write_text(json.dumps({"files": manifest}))
    (ws / "nodes/API_n2/Info.md").write_text(files["nodes/API_n2/Info.md"])
    (ws / ".change_mind.deadbeef.tmp").write_text("half")  # a temp file the kill left
    assert all("edited by hand" not in p for p in projection.problems(store, rtws, TASK))
    written = projection.write(store, rtws, TASK)
    assert written.kept == [] and "nodes/API_n2/Log.md" in written.written
    assert projection.problems(store, rtws, TASK) == []
    assert not (ws / ".change_mind.deadbeef.tmp").exists()


def test_only_changed_files_are_rewritten(rtws: Path) -> None:
    store = _store(rtws)
    _tree(store, rtws)
    backend = _ws(rtws) / "nodes/Backend_n1/Info.md"
    before = backend.stat().st_ino
    execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="x"))
    assert backend.stat().st_ino == before


def test_headings_follow_the_work_language(rtws: Path) -> None:
    api = WorkspaceApi(rtws, TASK, lang="zh")
    api.add_rule("所有函数都要有类型注解")
    text = (_ws(rtws) / "Workspace.md").read_text()
    assert "## 规则" in text and "## 文档" in text and "- 所有函数都要有类型注解" in text
    assert "## Rules" not in text
    assert "## 日志" in (_ws(rtws) / "Log.md").read_text()
    api.close()


def test_statements_19_30_derived_planning_statuses_reach_graph_and_info(rtws: Path) -> None:
    """19, 30 as our decisions keep them: a planning node's status is derived from its
    children (no `monitoring`): NEW while no child started, IN_PROGRESS up the chain
    once one starts, and the root takes new scope after it ended; graph.json and Info.md
    show the derived status after each commit."""
    store = _store(rtws)
    _tree(store, rtws)  # root ─ n1 Backend (planning) ─ n2 API: its first child

    def shown(nid: str, folder: str) -> tuple[str, str]:
        graph = json.loads((_ws(rtws) / "graph.json").read_text())
        info = markdown.parse_info_md((_ws(rtws) / "nodes" / folder / "Info.md").read_text())
        return graph["nodes"][nid]["status"], str(info["status"])

    assert shown("n1", "Backend_n1") == ("NEW", "NEW") and shown("root", "root") == ("NEW", "NEW")
    execute(
        store,
        rtws,
        TASK,
        CHAT,
        lambda s: s.transition(node_id="n2", to=NodeStatus.IN_PROGRESS, reason="go"),
    )
    assert shown("n1", "Backend_n1") == ("IN_PROGRESS", "IN_PROGRESS")
    assert shown("root", "root") == ("IN_PROGRESS", "IN_PROGRESS")

    def finish(s):  # type: ignore[no-untyped-def]
        s.transition(
            node_id="n2",
            to=NodeStatus.COMPLETE,
            reason="built",
            self_check=[],
            no_artifacts_reason="none",
        )
        s.transition(node_id="n2", to=NodeStatus.DONE, reason="checked", conclusion="ok")

    execute(store, rtws, TASK, CHAT, finish)
    assert shown("n1", "Backend_n1") == ("DONE", "DONE") and shown("root", "root")[0] == "DONE"
    execute(  # reopening: the root takes new scope; a new child makes it open again
        store,
        rtws,
        TASK,
        CHAT,
        lambda s: s.create_node(
            parent_id="root", kind=NodeKind.EXECUTION, title="More", requirement="m"
        ),
    )
    assert shown("root", "root") == ("IN_PROGRESS", "IN_PROGRESS")
    assert shown("n1", "Backend_n1") == ("DONE", "DONE")  # terminal is final
    store.close()
