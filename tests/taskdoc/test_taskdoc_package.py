"""TaskPackage: path validation, creation, non-creating reads, layout, extra-section index."""

from __future__ import annotations

from pathlib import Path

import pytest
from taskdoc_testutil import make_package, tree_snapshot, write

from mindloop.errors import TaskPathError
from mindloop.taskdoc import (
    InvalidTaskdocPath,
    TaskPackage,
    recall_taskdoc,
    render_effective_taskdoc,
)


# Acceptance 27 / 59: only a `*.tsk` directory inside the rtws is a Taskdoc.
@pytest.mark.parametrize(
    "path", ["legacy.md", "tasks", "", "a.tsk/b.tsk", "../out.tsk", "/etc.tsk"]
)
def test_invalid_taskdoc_paths(tmp_path: Path, path: str) -> None:
    with pytest.raises(InvalidTaskdocPath) as info:
        TaskPackage(tmp_path, path)
    assert "Invalid Taskdoc path" in str(info.value)
    assert info.value.code == "TASKDOC_INVALID" and "TASKDOC_INVALID" in str(info.value)
    assert isinstance(info.value, TaskPathError)
    assert list(tmp_path.iterdir()) == []


def test_single_file_taskdoc_points_to_migrate(tmp_path: Path) -> None:
    """Seed: single-file Taskdocs must be migrated before running new dialogs."""
    write(tmp_path, "notes/old.md", "# Goals\nx\n")
    with pytest.raises(InvalidTaskdocPath) as info:
        TaskPackage(tmp_path, "notes/old.md")
    assert "`mindloop taskdoc migrate notes/old.md`" in str(info.value)


def test_existing_file_named_tsk_is_rejected(tmp_path: Path) -> None:
    write(tmp_path, "x.tsk", "not a dir")
    with pytest.raises(TaskPathError, match=r"must be a directory ending in \.tsk"):
        TaskPackage(tmp_path, "x.tsk")


def test_any_tsk_dir_in_rtws_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "deep" / "er").mkdir(parents=True)
    pkg = TaskPackage(tmp_path, "deep/er/work.tsk/")
    assert pkg.rel_path == "deep/er/work.tsk"
    assert TaskPackage(tmp_path, tmp_path / "abs.tsk").rel_path == "abs.tsk"


def test_symlinked_package_outside_rtws_is_rejected(tmp_path: Path) -> None:
    outside = tmp_path / "outside.tsk"
    outside.mkdir()
    rtws = tmp_path / "rtws"
    rtws.mkdir()
    (rtws / "link.tsk").symlink_to(outside)
    with pytest.raises(TaskPathError, match="inside the rtws"):
        TaskPackage(rtws, "link.tsk")


def test_create_default_location_and_files(tmp_path: Path) -> None:
    pkg = TaskPackage.create(tmp_path, "login", goal="  Users can log in  ", constraints=["A", " "])
    assert pkg.rel_path == "tasks/login.tsk"
    assert (pkg.path / "goals.md").read_text() == "Users can log in\n"
    assert (pkg.path / "constraints.md").read_text() == "- A\n"
    assert (pkg.path / "progress.md").read_text() == ""


def test_create_refuses_existing_and_bad_slugs(tmp_path: Path) -> None:
    pkg = TaskPackage.create(tmp_path, "login")
    (pkg.path / "goals.md").write_text("keep\n")
    with pytest.raises(TaskPathError, match="already exists"):
        TaskPackage.create(tmp_path, "login", goal="other")
    TaskPackage.create(tmp_path, "login", goal="other", exist_ok=True)
    assert (pkg.path / "goals.md").read_text() == "keep\n"
    for slug in ["../x", "a/b", "", ".hidden", "x y"]:
        with pytest.raises(TaskPathError, match="Invalid task slug"):
            TaskPackage.create(tmp_path, slug)


def test_reading_never_creates(tmp_path: Path) -> None:
    pkg = TaskPackage(tmp_path, "tasks/missing.tsk")
    before = tree_snapshot(tmp_path)
    assert pkg.read_section("goals.md") == ""
    assert not pkg.section_exists("goals.md")
    assert pkg.bearinmind_state() == ("absent", [])
    assert pkg.extra_sections().entries == []
    assert pkg.layout_violations() == []
    assert tree_snapshot(tmp_path) == before
    assert not pkg.path.exists()


def test_symlinked_directories_inside_a_package_are_never_followed(tmp_path: Path) -> None:
    """A `bearinmind` or category directory that is a symlink does not make outside files
    readable: not inlined, not recalled, not listed."""
    outside = tmp_path / "outside"
    write(outside, "risks.md", "OUTSIDE-RISK")
    write(outside, "checklist.md", "OUTSIDE-CHECK")
    pkg = make_package(tmp_path, goals="g")
    (pkg.path / "bearinmind").symlink_to(outside)
    (pkg.path / "ux").symlink_to(outside)
    for rel in ("bearinmind/risks.md", "ux/checklist.md"):
        assert pkg.read_section(rel) == "" and not pkg.section_exists(rel)
    text = render_effective_taskdoc(pkg, is_root=True, maintainer="m")
    assert "OUTSIDE" not in text and "## Bear In Mind" not in text
    assert "`bearinmind/` (optional injection): invalid" in text
    assert "OUTSIDE" not in recall_taskdoc(pkg, category="bearinmind", selector="risks")
    assert recall_taskdoc(pkg, category="ux", selector="checklist").startswith("Not found")


def test_symlinked_section_is_not_read(tmp_path: Path) -> None:
    secret = write(tmp_path, "secret.txt", "s3cret")
    pkg = make_package(tmp_path)
    (pkg.path / "goals.md").symlink_to(secret)
    assert pkg.read_section("goals.md") == ""
    assert not pkg.section_exists("goals.md")


# Acceptance 40 (+ all violation kinds).
def test_layout_violations(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="g", ux__goals="x", ux__risks="y", bearinmind__risks="r")
    (pkg.path / "bearinmind" / "sub").mkdir()
    write(pkg.path, "bearinmind/extra.md", "e")
    write(pkg.path, "decisions.md", "top-level whitelisted name")
    kinds = {(v.kind, v.found_at) for v in pkg.layout_violations()}
    assert kinds == {
        ("top_level_file_under_subdir", "ux/goals.md"),
        ("bearinmind_file_outside_bearinmind", "ux/risks.md"),
        ("bearinmind_file_outside_bearinmind", "decisions.md"),
        ("bearinmind_extra_entry", "bearinmind/sub"),
        ("bearinmind_extra_entry", "bearinmind/extra.md"),
    }


def test_bearinmind_not_directory(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    write(pkg.path, "bearinmind", "file")
    assert [v.kind for v in pkg.layout_violations()] == ["bearinmind_not_directory"]
    assert pkg.bearinmind_state() == ("invalid", [])


def test_scan_limit(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    for i in range(30):
        write(pkg.path, f"notes/n{i}.md", "x")
    found = pkg.layout_violations(scan_limit=10)
    assert found[-1].kind == "scan_limit_exceeded" and found[-1].max_entries == 10
    assert pkg.layout_violations() == []


def test_runtime_managed_entries_are_neither_sections_nor_violations(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="g")
    write(pkg.path, "workspace/Workspace.md", "w")
    write(pkg.path, "workspace/nodes/a/goals.md", "runtime file with a reserved name")
    write(pkg.path, "_snapshots/risks.md", "x")
    write(pkg.path, ".cache/progress.md", "x")
    write(pkg.path, "attachments-index.md", "x")
    assert pkg.layout_violations() == []
    assert pkg.extra_sections().entries == []


def test_extra_sections_index_sorted_filtered_and_capped(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    write(pkg.path, "ux/zeta.md", "z")
    write(pkg.path, "ux/alpha.md", "a")
    write(pkg.path, "api/spec.v2.md", "s")
    write(pkg.path, "ux/goals.md", "reserved: not an extra section")
    write(pkg.path, "ux/bad name.md", "not an identifier")
    write(pkg.path, "ux/notes.txt", "not markdown")
    write(pkg.path, "bearinmind/risks.md", "r")
    index = pkg.extra_sections()
    assert [e.rel for e in index.entries] == ["api/spec.v2.md", "ux/alpha.md", "ux/zeta.md"]
    assert not index.truncated
    for i in range(70):
        write(pkg.path, f"many/s{i:02d}.md", "x")
    capped = pkg.extra_sections()
    assert len(capped.entries) == 64 and capped.truncated
    assert capped.entries[0].rel == "api/spec.v2.md"
