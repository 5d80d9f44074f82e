"""The task start scan (seed 003, part 7): the rtws top level, a README and doc folders,
recorded in the workspace log on first use; the docs found are offered to the planner,
not indexed nor dispatched."""

from __future__ import annotations

from pathlib import Path

from mindloop.workspace.api import WorkspaceApi
from mindloop.workspace.scan import MAX_OFFERED, scan

TASK = "tasks/example.tsk"


def _layout(root: Path) -> None:
    for rel in (
        "README.md",
        "CONTRIBUTING.md",
        "pyproject.toml",
        "src/app.py",
        "docs/design.md",
        "docs/api/v1.md",
        "docs/api/deep/too_deep.md",
        "docs/logo.png",
        "build/out.md",
        ".hidden/x.md",
        "notes.tsk/goals.md",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    (root / ".gitignore").write_text("build/\n")


def test_the_scan_sees_the_top_level_readme_and_doc_folders(tmp_path: Path) -> None:
    _layout(tmp_path)
    found = scan(tmp_path)
    assert found.dirs == ["docs", "src"]  # build/ ignored, hidden and *.tsk skipped
    assert found.files == ["CONTRIBUTING.md", "README.md", "pyproject.toml"]
    assert found.readme == "README.md" and found.doc_dirs == ["docs"]
    assert [d.path for d in found.docs] == [
        "README.md",
        "CONTRIBUTING.md",
        "docs/design.md",
        "docs/api/v1.md",
    ]
    text = found.text()
    assert "directories: docs/, src/" in text and "README: README.md" in text
    assert "doc folders: docs/" in text


def test_the_scan_is_bounded(tmp_path: Path) -> None:
    for i in range(60):
        (tmp_path / "docs").mkdir(exist_ok=True)
        (tmp_path / "docs" / f"d{i:02}.md").write_text("x")
    assert len(scan(tmp_path).docs) == MAX_OFFERED


def test_first_use_logs_the_scan_and_offers_without_dispatching(rtws: Path) -> None:
    _layout(rtws)
    api = WorkspaceApi(rtws, TASK)
    api.add_rule("r")  # the first use, from the CLI's API
    state = api.state()
    assert [d.path for d in state.offered][:2] == ["README.md", "CONTRIBUTING.md"]
    assert state.index == [] and all(n.docs == [] for n in state.nodes.values())
    [scan_row] = [e for e in api.log() if e.kind == "scan"]
    assert scan_row.node_id is None and "start scan of the rtws top level" in scan_row.text
    ws = (rtws / TASK / "workspace" / "Workspace.md").read_text()
    assert "## Found at Start" in ws and "- [README.md](README.md) - README (active)" in ws
    api.add_rule("s")
    assert len([e for e in api.log() if e.kind == "scan"]) == 1  # once, on first use
    api.close()
