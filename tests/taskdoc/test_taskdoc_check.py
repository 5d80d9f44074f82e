"""`mindloop check` reports a section file that disagrees with its last audit record —
as a warning: a person may edit a Taskdoc by hand, and an interrupted change is completed
by the next read. Checking repairs nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from taskdoc_testutil import tree_snapshot

from mindloop.rtws import init_rtws
from mindloop.store import Store
from mindloop.taskdoc import TaskPackage, change_mind
from mindloop.taskdoc.audit import CRASH_ENV, CRASH_EXIT_CODE, audit_warnings

TASK = "tasks/t.tsk"


def _project(tmp_path: Path) -> tuple[Path, TaskPackage]:
    rtws = tmp_path / "proj"
    init_rtws(rtws, provider="mock")
    pkg = TaskPackage.create(rtws, "t", goal="G", exist_ok=True)
    store = Store.for_rtws(rtws)
    try:
        for selector in ("progress", "goals"):
            change = change_mind(
                pkg,
                selector=selector,
                content=f"{selector} v1",
                actor_member="dev",
                actor_dialog=None,
                is_root=True,
                store=store,
            )
            assert change.ok
    finally:
        store.close()
    return rtws, pkg


def _check(rtws: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from mindloop.cli.app import main; main()",
            "-C",
            str(rtws),
            "check",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )


def test_agreeing_package_has_no_warning(tmp_path: Path) -> None:
    rtws, _ = _project(tmp_path)
    assert audit_warnings(rtws) == []


def test_edit_and_deletion_outside_mindloop_are_reported(tmp_path: Path) -> None:
    rtws, pkg = _project(tmp_path)
    (pkg.path / "progress.md").write_text("edited by hand\n", encoding="utf-8")
    (pkg.path / "goals.md").unlink()
    before = tree_snapshot(rtws / "tasks")
    warnings = audit_warnings(rtws)
    assert warnings == [
        f"{TASK}/goals.md: deleted outside mindloop since its last audited change "
        "(audit record #2 by dev)",
        f"{TASK}/progress.md: changed outside mindloop since its last audited change "
        f"(audit record #1 by dev); `mindloop taskdoc show {TASK} --history progress` lists "
        "the audited versions",
    ]
    checked = _check(rtws)
    assert checked.returncode == 0, checked.stderr
    for line in warnings:
        assert f"warning: {line}" in checked.stderr
    assert tree_snapshot(rtws / "tasks") == before  # nothing repaired or created


def test_interrupted_change_is_reported_and_not_repaired_by_check(tmp_path: Path) -> None:
    rtws, _pkg = _project(tmp_path)
    code = (
        "import sys; from pathlib import Path; from mindloop.store import Store\n"
        "from mindloop.taskdoc import TaskPackage, change_mind\n"
        "r = Path(sys.argv[1])\n"
        "change_mind(TaskPackage(r, 'tasks/t.tsk'), selector='progress', content='v2',"
        " actor_member='dev', actor_dialog=None, is_root=True, store=Store.for_rtws(r))\n"
    )
    env = {**os.environ, CRASH_ENV: "change_mind.after_commit"}
    killed = subprocess.run([sys.executable, "-c", code, str(rtws)], env=env, timeout=120)
    assert killed.returncode == CRASH_EXIT_CODE
    before = tree_snapshot(rtws / "tasks")
    [warning] = audit_warnings(rtws)
    assert warning.startswith(
        f"{TASK}/progress.md: a change_mind interrupted by a crash (audit record #3 by dev) "
        "is not applied yet"
    )
    checked = _check(rtws)
    assert f"warning: {warning}" in checked.stderr
    assert tree_snapshot(rtws / "tasks") == before


def test_rtws_never_run_has_nothing_to_compare(tmp_path: Path) -> None:
    init_rtws(tmp_path, provider="mock")
    TaskPackage.create(tmp_path, "t", goal="G")
    assert audit_warnings(tmp_path) == []
    assert not (tmp_path / ".mindloop").exists()
