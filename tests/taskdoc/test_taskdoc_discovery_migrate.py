"""Package discovery (with nested .taskdoc-ignore) and single-file migration."""

from __future__ import annotations

from pathlib import Path

import pytest
from taskdoc_testutil import tree_snapshot, write

from mindloop.errors import TaskPathError
from mindloop.taskdoc import MigrationError, discover_packages, migrate_single_file


def mk(root: Path, *rels: str) -> None:
    for rel in rels:
        (root / rel).mkdir(parents=True, exist_ok=True)


# Acceptance 42.
def test_discovery_recursive_skips_and_nested_ignores(tmp_path: Path) -> None:
    mk(
        tmp_path,
        "tasks/a.tsk",
        "tasks/a.tsk/inner.tsk",
        "deep/x/b.tsk",
        ".git/c.tsk",
        ".minds/d.tsk",
        ".mindloop/e.tsk",
        "node_modules/f.tsk",
        "sub/ignored.tsk",
        "sub/kept.tsk",
        "sub/nested/ignored.tsk",
        "sub/anchored.tsk",
        "sub/nested/anchored.tsk",
        "sub/nested/gone.tsk",
        "archive/old.tsk",
        "other/ignored.tsk",
        "anchored.tsk",
        "Case.TSK",
    )
    write(tmp_path, ".taskdoc-ignore", "# comment\narchive/\n")
    # A leading `/` is rtws-relative (dominds.md §12), even in a nested file; a pattern
    # naming something outside the file's subtree (`/anchored.tsk`) does nothing.
    write(tmp_path, "sub/.taskdoc-ignore", "ignored.tsk\n/sub/anchored.tsk\n/anchored.tsk\n")
    write(tmp_path, "sub/nested/.taskdoc-ignore", "!ignored.tsk\n/sub/nested/gone.tsk\n")
    assert discover_packages(tmp_path) == [
        "Case.TSK",
        "anchored.tsk",
        "deep/x/b.tsk",
        "other/ignored.tsk",
        "sub/kept.tsk",
        "sub/nested/anchored.tsk",
        "sub/nested/ignored.tsk",
        "tasks/a.tsk",
    ]


def test_discovery_matches_the_anchor_example(tmp_path: Path) -> None:
    """The anchor's own discovery test (dominds tests/taskdoc-search.ts), same verdicts."""
    mk(
        tmp_path,
        "included-root.tsk",
        "ignored-root/ignored-1.tsk",
        "ignored-root/nested/ignored-2.tsk",
        "projects/proj1/private/secret.tsk",
        "projects/proj1/public/public-1.tsk",
        "projects/proj2/public-2.tsk",
        "projects/proj1/public-ignored.tsk",
    )
    write(tmp_path, ".taskdoc-ignore", "ignored-root/\n# comment\n\n")
    write(tmp_path, "projects/proj1/.taskdoc-ignore", "private/\npublic-ignored.tsk\n")
    assert discover_packages(tmp_path) == [
        "included-root.tsk",
        "projects/proj1/public/public-1.tsk",
        "projects/proj2/public-2.tsk",
    ]


def test_discovery_does_not_follow_dir_symlinks(tmp_path: Path) -> None:
    mk(tmp_path, "real/p.tsk")
    (tmp_path / "loop").symlink_to(tmp_path)
    assert discover_packages(tmp_path) == ["real/p.tsk"]


EN = """# Goals
Users can log in.

## Details
- email + password

# Constraints
- MUST hash passwords

```md
# Not a heading (fenced)
```

# Progress
"""


def test_migrate_english(tmp_path: Path) -> None:
    write(tmp_path, "notes/old-task.md", EN)
    pkg = migrate_single_file(tmp_path, "notes/old-task.md")
    assert pkg.rel_path == "notes/old-task.tsk"
    assert (pkg.path / "goals.md").read_text() == (
        "Users can log in.\n\n## Details\n- email + password\n"
    )
    assert (pkg.path / "constraints.md").read_text() == (
        "- MUST hash passwords\n\n```md\n# Not a heading (fenced)\n```\n"
    )
    assert (pkg.path / "progress.md").read_text() == ""
    assert (tmp_path / "notes/old-task.md").read_text() == EN
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["old-task.md", "old-task.tsk"]


def test_migrate_keeps_bodies_verbatim_but_surrounding_blank_lines(tmp_path: Path) -> None:
    """No loss: an indented first line (a code block) keeps its indentation; CRLF files too."""
    text = "# Goals\n\n    indented code\n  - nested  \n\n\n# Progress\r\n\r\n  - item\r\n"
    (tmp_path / "x.md").write_bytes(text.encode())
    pkg = migrate_single_file(tmp_path, "x.md")
    assert (pkg.path / "goals.md").read_text() == "    indented code\n  - nested  \n"
    assert (pkg.path / "progress.md").read_text() == "  - item\n"


def test_migrate_refuses_non_utf8_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "old.md").write_bytes(b"# Goals\nok\n\xff bad\n")
    with pytest.raises(MigrationError, match=r"^old\.md:3: not valid UTF-8 \(byte 0xff\)"):
        migrate_single_file(tmp_path, "old.md")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.md"]


def test_migrate_chinese_headings_and_dest(tmp_path: Path) -> None:
    write(tmp_path, "t.md", "## 目标\n做完\n## 约束\n- 必须\n## 进度\n一半\n")
    pkg = migrate_single_file(tmp_path, tmp_path / "t.md", dest="tasks/t.tsk")
    assert pkg.rel_path == "tasks/t.tsk"
    assert [(pkg.path / f).read_text() for f in ("goals.md", "constraints.md", "progress.md")] == [
        "做完\n",
        "- 必须\n",
        "一半\n",
    ]
    write(tmp_path, "u.md", "# 进展\n好\n")
    assert (migrate_single_file(tmp_path, "u.md").path / "progress.md").read_text() == "好\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("intro\n# Goals\na\n", "content before the first heading"),
        ("# Goals\na\n# Goals\nb\n", "duplicate section"),
        ("# Goals\na\n# 目标\nb\n", "duplicate section"),
        ("# Notes\na\n# Ideas\nb\n", "no Goals/Constraints/Progress section found"),
        ("# Task\n## Notes\na\n", "no Goals/Constraints/Progress section found"),
        ("# Risks\na\n# Goals\nb\n# Risks\nc\n", "duplicate section"),
        ("Goals\n=====\nsetext\n", "no Goals/Constraints/Progress headings"),
    ],
)
def test_migrate_refusals_write_nothing(tmp_path: Path, text: str, reason: str) -> None:
    write(tmp_path, "x.md", text)
    before = tree_snapshot(tmp_path)
    with pytest.raises(MigrationError, match=reason):
        migrate_single_file(tmp_path, "x.md", dest="tasks/x.tsk")
    assert tree_snapshot(tmp_path) == before


def test_migrate_refuses_existing_dest_and_bad_paths(tmp_path: Path) -> None:
    write(tmp_path, "x.md", "# Goals\na\n")
    mk(tmp_path, "x.tsk")
    before = tree_snapshot(tmp_path)
    with pytest.raises(MigrationError, match="already exists"):
        migrate_single_file(tmp_path, "x.md")
    with pytest.raises(TaskPathError, match="Invalid Taskdoc path"):
        migrate_single_file(tmp_path, "x.md", dest="y.md")
    with pytest.raises(MigrationError, match="not a file"):
        migrate_single_file(tmp_path, "nope.md")
    assert tree_snapshot(tmp_path) == before
