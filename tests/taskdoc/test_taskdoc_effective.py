"""The effective Taskdoc message: structure, status block, bounds, determinism, caching."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from taskdoc_testutil import make_package, tree_snapshot, write

from mindloop.rtws import init_rtws
from mindloop.taskdoc import TaskPackage, layout_problems, render_effective_taskdoc
from mindloop.taskdoc.effective import clear_cache


def render(pkg: TaskPackage, is_root: bool = True, lang: str = "en") -> str:
    return render_effective_taskdoc(pkg, is_root=is_root, maintainer="lead", lang=lang)  # type: ignore[arg-type]


def body_of(text: str) -> str:
    return text.split("\n---\n")[1]


# Acceptance 28.
def test_missing_package_reports_missing_and_creates_nothing(tmp_path: Path) -> None:
    pkg = TaskPackage(tmp_path, "my-task.tsk")
    text = render(pkg)
    assert "Encapsulated `*.tsk/`" in text
    assert "`goals.md`: missing" in text
    assert "## Goals" in text
    assert not (tmp_path / "my-task.tsk").exists()
    assert tree_snapshot(tmp_path) == {}


# Acceptance 29.
def test_three_sections_in_order_verbatim_without_bear_in_mind(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="G *body*\n", constraints="- MUST c\n", progress="p\n")
    text = render(pkg)
    body = body_of(text)
    assert body.startswith("# Taskdoc (Dialog Tree)\n")
    g, c, p = body.index("## Goals"), body.index("## Constraints"), body.index("## Progress")
    assert g < c < p
    assert "## Goals\nG *body*\n" in body
    assert "## Constraints\n- MUST c\n" in body
    assert body.rstrip("\n").endswith("## Progress\np")
    assert "## Bear In Mind" not in text
    assert "`goals.md`: present" in text


# Acceptance 30.
def test_bear_in_mind_between_constraints_and_progress(tmp_path: Path) -> None:
    pkg = make_package(
        tmp_path,
        goals="g",
        constraints="c",
        progress="p",
        bearinmind__risks="R",
        bearinmind__contracts="C",
        bearinmind__extra="E-not-inlined",
    )
    text = render(pkg)
    body = body_of(text)
    assert body.index("## Constraints") < body.index("## Bear In Mind") < body.index("## Progress")
    assert body.index("### contracts.md") < body.index("### risks.md")
    assert "E-not-inlined" not in text
    assert "`extra.md`" in text  # reported as an extra entry
    assert "found at: `bearinmind/extra.md`" in text


# Acceptance 31.
def test_blank_whitelisted_files_are_omitted(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="g", bearinmind__risks="  \n\n", bearinmind__grants="G")
    text = render(pkg)
    assert "### grants.md" in text and "### risks.md" not in text
    (pkg.path / "bearinmind" / "grants.md").write_text("\n")
    assert "## Bear In Mind" not in render(pkg)


# Acceptance 32 (index part).
def test_extra_sections_listed_not_inlined(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="g", ux__checklist="SECRET-CHECKLIST")
    text = render(pkg)
    assert "SECRET-CHECKLIST" not in text
    assert (
        '`ux/checklist.md` (read: `recall_taskdoc({"category":"ux","selector":"checklist"})`'
        in text
    )
    side = render(pkg, is_root=False)
    assert "recall_taskdoc" in side and 'change_mind({"category":"ux"' not in side


def test_index_cap_note(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    for i in range(65):
        write(pkg.path, f"notes/s{i:02d}.md", "x")
    text = render(pkg)
    assert "⚠️ Truncated: too many entries; showing first 64." in text
    assert "notes/s63.md" in text and "notes/s64.md" not in text


# Acceptance 40.
def test_layout_violations_listed(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, ux__goals="x", ux__risks="y")
    (pkg.path / "bearinmind" / "dir").mkdir(parents=True)
    text = render(pkg)
    block = text.split("**Layout violations (fix manually):**")[1].split("---")[0]
    assert "`ux/goals.md`" in block and "`ux/risks.md`" in block and "`bearinmind/dir`" in block


# Acceptance 41.
def test_too_large_body_keeps_status_block(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="x" * (100 * 1024 + 1), constraints="c")
    text = render(pkg)
    assert "too large to inline" in text
    assert "**Taskdoc Constitution (Encapsulated `*.tsk/`):**" in text
    assert "`goals.md`: present" in text
    assert "## Goals" not in text and "xxxxxxxxxx" not in text
    assert len(text.encode()) < 10_000


def test_root_and_side_status_differ(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="g")
    root = render(pkg, is_root=True)
    side = render(pkg, is_root=False)
    assert "This dialog may change the Taskdoc: yes" in root
    assert "This dialog may change the Taskdoc: no" in side
    assert "ask the Taskdoc maintainer @lead" in side
    assert "Taskdoc maintainer (runs `change_mind`): @lead" in root
    for text in (root, side):
        assert "Do not invoke any general file tools" in text
        assert text.index("**Taskdoc:** `tasks/t.tsk`") == 0


def test_deterministic_across_cache_and_fresh_renders(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="g", ux__b="b", ux__a="a", bearinmind__risks="r")
    first = render(pkg)
    clear_cache()
    assert render(pkg) == first
    assert render(TaskPackage(tmp_path, "tasks/t.tsk")) == first


def test_cache_sees_every_kind_of_change(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="one")
    assert "one" in render(pkg)
    # same size, rewritten in place, mtime forced identical: the inode/ctime still differ
    goals = pkg.path / "goals.md"
    st = os.stat(goals)
    tmp = pkg.path / "g.tmp"
    tmp.write_text("two")
    os.replace(tmp, goals)
    os.utime(goals, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert "two" in render(pkg)
    write(pkg.path, "deep/er/goals.md", "misplaced")  # violation deep in a new dir
    assert "`deep/er/goals.md`" in render(pkg)
    (pkg.path / "deep" / "er" / "goals.md").unlink()
    assert "deep/er/goals.md" not in render(pkg)
    write(pkg.path, "bearinmind/risks.md", "RISK")
    assert "### risks.md\nRISK" in render(pkg)
    write(pkg.path, "ux/new.md", "n")
    assert "`ux/new.md`" in render(pkg)


def test_chinese_rendering(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, goals="目标内容")
    text = render(pkg, lang="zh")
    assert text.startswith("**差遣牒：** `tasks/t.tsk`")
    assert "## Goals\n目标内容" in text
    assert "`goals.md`：存在" in text
    assert "不要对 `*.tsk/` 下的任何路径调用通用文件工具" in text


# Issue part 1: layout violations reach `mindloop check`, each naming the offending path.
def test_layout_problems_name_the_offending_path(tmp_path: Path) -> None:
    make_package(tmp_path, goals="g", ux__goals="x", ux__risks="r", bearinmind__extra="e")
    (tmp_path / "tasks/t.tsk/bearinmind/sub").mkdir()
    make_package(tmp_path, "clean.tsk", goals="g")
    assert layout_problems(tmp_path) == [
        "tasks/t.tsk/bearinmind/extra.md: layout violation: extra entries are not allowed "
        "under `bearinmind/` (found at: `bearinmind/extra.md`)",
        "tasks/t.tsk/bearinmind/sub: layout violation: extra entries are not allowed under "
        "`bearinmind/` (found at: `bearinmind/sub`)",
        "tasks/t.tsk/ux/goals.md: layout violation: top-level file `goals.md` must not appear "
        "under any subdirectory (found at: `ux/goals.md`)",
        "tasks/t.tsk/ux/risks.md: layout violation: `risks.md` must only appear under "
        "`bearinmind/` (found at: `ux/risks.md`)",
    ]


def test_mindloop_check_reports_layout_violations(tmp_path: Path) -> None:
    rtws = tmp_path / "p"
    init_rtws(rtws, provider="mock")
    ok = subprocess.run(
        [sys.executable, "-m", "mindloop.cli.app", "check", "-C", str(rtws)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    make_package(rtws, "tasks/example.tsk", ux__goals="x", bearinmind__extra="e")
    bad = subprocess.run(
        [sys.executable, "-m", "mindloop.cli.app", "check", "-C", str(rtws)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1
    lines = [line for line in bad.stderr.splitlines() if "layout violation" in line]
    assert len(lines) == 2
    assert all(line.startswith("tasks/example.tsk") for line in lines)
    assert "`goals.md` must not appear under any subdirectory" in lines[1]
    assert "ux/goals.md" in lines[1] and "bearinmind/extra.md" in lines[0]


def test_cache_sees_bear_in_mind_come_and_go(tmp_path: Path) -> None:
    """A hit skips the `lstat` of files whose directory is missing; the directory's own
    signature still sees them arrive, change and go."""
    pkg = make_package(tmp_path, goals="g")
    assert "## Bear In Mind" not in render(pkg)
    write(pkg.path, "bearinmind/runbook.md", "RUN")
    assert "### runbook.md\nRUN" in render(pkg)
    write(pkg.path, "bearinmind/runbook.md", "RUN FASTER")
    assert "### runbook.md\nRUN FASTER" in render(pkg)
    shutil.rmtree(pkg.path / "bearinmind")
    assert "## Bear In Mind" not in render(pkg)


def test_cache_sees_a_missing_section_arrive_and_go(tmp_path: Path) -> None:
    """A hit looks for a section missing at the rendering without `lstat` (`access`):
    its arriving is a change, and so is its going again."""
    pkg = make_package(tmp_path, goals="g")
    first = render(pkg)
    for _ in range(2):  # hits
        assert render(pkg) == first
    write(pkg.path, "constraints.md", "CONSTRAINED")
    assert "CONSTRAINED" in render(pkg)
    (pkg.path / "constraints.md").unlink()
    assert render(pkg) == first
    write(pkg.path, "progress.md", "PROGRESSED")
    assert "PROGRESSED" in render(pkg)
