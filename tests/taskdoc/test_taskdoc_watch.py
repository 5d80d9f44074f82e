"""The kernel's watch of the files a generation reads (`taskdoc.watch`): a mark stays
quiet only while nothing happened to its paths, whoever changed them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mindloop.taskdoc import watch

pytestmark = pytest.mark.skipif(
    watch.watcher() is None, reason="no inotify watcher on this system or filesystem"
)


def _files(root: Path) -> tuple[Path, Path, Path]:
    """A directory with a file, and a path whose directory does not exist yet."""
    (root / "pkg").mkdir()
    present = root / "pkg" / "goals.md"
    present.write_text("goals")
    return root / "pkg", present, root / "pkg" / "later" / "runbook.md"


def _replace(path: Path) -> None:
    tmp = path.with_name(".tmp")
    tmp.write_text("replaced")
    os.replace(tmp, path)


def _create(missing: Path) -> None:
    missing.parent.mkdir()
    missing.write_text("run")


CHANGES: dict[str, Callable[[Path, Path, Path], object]] = {
    "written in place": lambda d, f, m: f.write_text("other goals"),
    "appended": lambda d, f, m: f.open("a").write("!"),
    "truncated": lambda d, f, m: os.truncate(f, 0),
    "touched": lambda d, f, m: os.utime(f, ns=(1, 1)),
    "replaced": lambda d, f, m: _replace(f),
    "removed": lambda d, f, m: f.unlink(),
    "created where missing": lambda d, f, m: _create(m),
    "a file added beside": lambda d, f, m: (d / "extra.md").write_text("x"),
    "its directory renamed": lambda d, f, m: d.rename(d.with_name("moved")),
    "its directory removed": lambda d, f, m: shutil.rmtree(d),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_mark_is_quiet_until_its_paths_change(tmp_path: Path, change: str) -> None:
    folder, present, missing = _files(tmp_path)
    mark = watch.arm([str(folder), str(present), str(missing)])
    assert mark is not None
    assert mark.quiet() and mark.quiet()
    CHANGES[change](folder, present, missing)
    assert not mark.quiet()
    assert not mark.quiet()  # it stays so: the caller arms again


def test_another_process_writing_is_seen_at_once(tmp_path: Path) -> None:
    _, present, _ = _files(tmp_path)
    mark = watch.arm([str(present)])
    assert mark is not None and mark.quiet()
    code = f"open({str(present)!r}, 'a').write(' and more')"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert not mark.quiet()


def test_a_mark_armed_again_after_a_change_is_quiet_again(tmp_path: Path) -> None:
    _, present, _ = _files(tmp_path)
    first = watch.arm([str(present)])
    _replace(present)  # a new inode at the path
    assert first is not None and not first.quiet()
    again = watch.arm([str(present)])
    assert again is not None and again.quiet()
    present.write_text("edited after")  # the new file is the one watched
    assert not again.quiet()


def test_a_change_elsewhere_leaves_a_mark_quiet(tmp_path: Path) -> None:
    _, present, _ = _files(tmp_path)
    (tmp_path / "other").mkdir()
    elsewhere = tmp_path / "other" / "persona.md"
    elsewhere.write_text("p")
    mark = watch.arm([str(present)])
    other = watch.arm([str(elsewhere)])
    assert mark is not None and other is not None
    elsewhere.write_text("changed")
    assert not other.quiet()
    assert mark.quiet()


def test_reports_lost_in_an_overflow_leave_no_mark_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, present, _ = _files(tmp_path)
    mark = watch.arm([str(present)])
    w = watch.watcher()
    assert mark is not None and w is not None and mark.quiet()
    overflow = watch._EVENT.pack(-1, watch._IN_Q_OVERFLOW, 0, 0)
    w._events(overflow)  # as the kernel reports an overflowed queue
    assert not mark.quiet()
    fresh = watch.arm([str(present)])
    assert fresh is not None and fresh.quiet()


def test_no_mark_where_the_kernel_would_not_report_every_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, present, _ = _files(tmp_path)
    w = watch.watcher()
    assert w is not None
    monkeypatch.setattr(w, "_local", {})
    monkeypatch.setattr(watch, "_filesystem", lambda path: "nfs")
    assert watch.arm([str(present)]) is None


def test_a_forked_child_trusts_no_mark_of_its_parent(tmp_path: Path) -> None:
    _, present, _ = _files(tmp_path)
    mark = watch.arm([str(present)])
    assert mark is not None and mark.quiet()
    code = (
        "import os, sys\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ok = not MARK.quiet() and watch.arm([PATH]) is not None\n"
        "    os._exit(0 if ok else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    # in a process of its own (a test worker must not fork itself)
    script = (
        "from mindloop.taskdoc import watch\n"
        f"PATH = {str(present)!r}\n"
        "MARK = watch.arm([PATH])\n"
        "assert MARK is not None and MARK.quiet()\n" + code
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert mark.quiet()  # the parent's marks are its own


def test_no_watcher_when_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(watch.DISABLE_ENV, "1")
    assert watch._new_watcher() is None
