"""A real process killed inside `change_mind` — just before and just after the audit
commit, inside the file replacement, and inside a reconciliation — then a fresh process
reads the Taskdoc: the section file equals its last audit record, no temp file is left,
and what the reader sees is the recorded content (issue 10, item 10).

The kill is `os._exit` at a named crash point (`taskdoc.audit.crash_point`): no cleanup
runs, as with SIGKILL, and the point is exact instead of a race.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from itertools import pairwise
from pathlib import Path

import pytest
from taskdoc_testutil import write

from mindloop.rtws import init_rtws
from mindloop.store import Store
from mindloop.taskdoc import TaskPackage, mismatches, reconcile
from mindloop.taskdoc.audit import (
    CRASH_ENV,
    CRASH_EXIT_CODE,
    CRASH_POINTS,
    package_lock,
    temp_files,
)
from mindloop.taskdoc.fsio import sha256_text, write_temp

TASK = "tasks/t.tsk"
V1, V2 = "progress-v1-marker\n", "progress-v2-marker\n"

CHANGE = """
import sys
from pathlib import Path
from mindloop.store import Store
from mindloop.taskdoc import TaskPackage, change_mind
rtws = Path(sys.argv[1])
store = Store.for_rtws(rtws)
result = change_mind(
    TaskPackage(rtws, sys.argv[2]), selector="progress", content=sys.argv[3],
    actor_member="dev", actor_dialog=None, is_root=True, store=store,
)
print(result.ok)
"""

READ = """
import sys
from pathlib import Path
from mindloop.taskdoc import TaskPackage, render_effective_taskdoc
pkg = TaskPackage(Path(sys.argv[1]), sys.argv[2])
print(render_effective_taskdoc(pkg, is_root=True, maintainer="dev"))
"""


def _python(code: str, *args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at is not None:
        env[CRASH_ENV] = crash_at
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )


def _change(rtws: Path, content: str, crash_at: str | None = None) -> int:
    return _python(CHANGE, str(rtws), TASK, content, crash_at=crash_at).returncode


def _read(rtws: Path, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    return _python(READ, str(rtws), TASK, crash_at=crash_at)


def _progress_record(rtws: Path) -> str:
    store = Store.for_rtws(rtws)
    try:
        return [c for c in store.taskdoc_history(TASK) if c.section == "progress.md"][
            -1
        ].content_after
    finally:
        store.close()


def _assert_invariant(rtws: Path) -> None:
    """Every section file equals its last audit record; no temp file is left."""
    pkg = TaskPackage(rtws, TASK)
    store = Store.for_rtws(rtws)
    try:
        assert mismatches(pkg, store) == []
        last = {c.section: c for c in store.taskdoc_history(TASK)}
        for rel, change in last.items():
            assert pkg.read_section_or_none(rel) == change.content_after, rel
    finally:
        store.close()
    assert temp_files(pkg) == []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    rtws = tmp_path / "proj"
    init_rtws(rtws, provider="mock")
    TaskPackage.create(rtws, "t", goal="G", exist_ok=True)
    assert _change(rtws, V1) == 0
    return rtws


# What the kill leaves on disk at each point of a change to V2, before anything reads it:
# (temp file present, last record is V2, progress file holds V2).
LEFT_BY_KILL = {
    "change_mind.before_commit": (True, False, False),
    "change_mind.after_commit": (True, True, False),
    "change_mind.in_replace": (False, True, True),
    "change_mind.after_replace": (False, True, True),
}


@pytest.mark.parametrize("point", sorted(LEFT_BY_KILL))
def test_kill_inside_change_mind_then_a_fresh_reader(project: Path, point: str) -> None:
    assert _change(project, V2, crash_at=point) == CRASH_EXIT_CODE
    pkg = TaskPackage(project, TASK)
    has_temp, recorded, replaced = LEFT_BY_KILL[point]
    assert bool(temp_files(pkg)) is has_temp
    assert (_progress_record(project) == V2) is recorded
    assert (pkg.read_section("progress.md") == V2) is replaced

    shown = _read(project)
    assert shown.returncode == 0, shown.stderr
    expected = V2 if recorded else V1
    assert f"## Progress\n{expected}" in shown.stdout
    assert (V2 if not recorded else V1) not in shown.stdout
    _assert_invariant(project)
    # The next change starts from the reconciled state, and keeps the chain of hashes.
    assert _change(project, "progress-v3\n") == 0
    _assert_invariant(project)
    store = Store.for_rtws(project)
    try:
        chain = [c for c in store.taskdoc_history(TASK) if c.section == "progress.md"]
    finally:
        store.close()
    assert all(a.hash_after == b.hash_before for a, b in pairwise(chain))


def test_kill_inside_a_reconciliation(project: Path) -> None:
    """A reader killed after rolling a change forward but before removing a stray temp:
    the next reader finishes the job."""
    assert _change(project, V2, crash_at="change_mind.after_commit") == CRASH_EXIT_CODE
    pkg = TaskPackage(project, TASK)
    stray = write_temp(pkg.path, "a change whose record never committed\n")
    killed = _read(project, crash_at="reconcile.after_roll_forward")
    assert killed.returncode == CRASH_EXIT_CODE
    assert pkg.read_section("progress.md") == V2 and stray.exists()
    shown = _read(project)
    assert shown.returncode == 0 and f"## Progress\n{V2}" in shown.stdout
    _assert_invariant(project)


def test_every_crash_point_is_tested() -> None:
    assert set(CRASH_POINTS) == {*LEFT_BY_KILL, "reconcile.after_roll_forward"}


MOCK_SCRIPT = """\
responses:
  - match: "update the progress"
    tool_calls:
      - {name: change_mind, arguments: {selector: progress, content: "progress-v2-marker"}}
  - context_contains: "progress-v2-marker"
    response: "SEEN-NEW"
  - default: true
    response: "SEEN-OLD"
"""


def _mindloop(
    rtws: Path, *args: str, crash_at: str | None = None
) -> subprocess.CompletedProcess[str]:
    code = "from mindloop.cli.app import main; main()"
    return _python(code, "-C", str(rtws), *args, crash_at=crash_at)


def test_the_engine_killed_in_change_mind_then_the_next_generation(project: Path) -> None:
    """The issue's report, end to end: `mindloop chat` is killed after the audit commit of
    its `change_mind`; the next generation (a new `mindloop chat` on the task) sees the
    new section, not the old one."""
    write(project, ".minds/mock/mock-model.yaml", MOCK_SCRIPT)
    killed = _mindloop(
        project, "chat", "--task", TASK, "update the progress", crash_at="change_mind.after_commit"
    )
    assert killed.returncode == CRASH_EXIT_CODE, killed.stdout + killed.stderr
    pkg = TaskPackage(project, TASK)
    assert pkg.read_section("progress.md") == V1 and temp_files(pkg)  # the reported state

    after = _mindloop(project, "chat", "--task", TASK, "what is the progress")
    assert after.returncode == 0, after.stdout + after.stderr
    assert "SEEN-NEW" in after.stdout and "SEEN-OLD" not in after.stdout
    _assert_invariant(project)


def test_a_reader_waits_for_a_live_writer(project: Path) -> None:
    """A temp file of a writer that is alive (holding the package lock between its commit
    and its replace) is neither removed nor applied by a reader: the reader waits."""
    pkg = TaskPackage(project, TASK)
    store = Store.for_rtws(project)
    try:
        with package_lock(pkg):  # this test is the live writer, between steps 2 and 3
            tmp = write_temp(pkg.path, V2)
            store.record_taskdoc_change(
                store.taskdoc_history(TASK)[-1].model_copy(
                    update={
                        "hash_before": sha256_text(V1),
                        "hash_after": sha256_text(V2),
                        "content_before": V1,
                        "content_after": V2,
                    }
                )
            )
            reader = threading.Thread(target=reconcile, args=(pkg,))
            reader.start()
            reader.join(timeout=1.0)
            assert reader.is_alive() and tmp.exists()  # blocked on the lock
            os.replace(tmp, pkg.path / "progress.md")
        reader.join(timeout=60)
        assert not reader.is_alive()
    finally:
        store.close()
    _assert_invariant(project)
    assert pkg.read_section("progress.md") == V2
