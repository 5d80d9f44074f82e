"""The workspace ref outside git: no `git` process, the same hash as a plain walk over the
deliverables, and a file is read again only when its size or timestamps moved (a change
that keeps size and mtime still moves ctime)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mindloop.workspace import ref
from mindloop.workspace.ref import workspace_ref


def _plain(root: Path) -> str:
    """The definition: sha256 over (relative path, content digest) of every deliverable,
    directories walked top-down in name order, links to directories not followed."""
    h = hashlib.sha256()
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d
            for d in dirs
            if not (d.startswith(".") or d in ("__pycache__", "node_modules") or d.endswith(".tsk"))
        )
        for name in sorted(f for f in files if not f.startswith(".")):
            path = Path(top, name)
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            try:
                h.update(hashlib.sha256(path.read_bytes()).digest())
            except OSError:
                h.update(b"?")
    return "tree:" + h.hexdigest()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "p"
    for rel, text in {
        "README.md": "# p\n",
        "src/app.py": "x = 1\n",
        "src/lib/util.py": "y = 2\n",
        "src/.hidden": "no\n",
        "src/__pycache__/app.pyc": "bytes",
        "tasks/t.tsk/workspace/graph.json": "{}",
        ".mindloop/state.sqlite": "db",
        "docs/a b.md": "spaces\n",
    }.items():
        (r / rel).parent.mkdir(parents=True, exist_ok=True)
        (r / rel).write_text(text)
    (r / "linked").symlink_to(r / "src", target_is_directory=True)
    (r / "broken.txt").symlink_to(r / "missing")
    return r


def test_outside_git_no_process_runs_and_the_hash_is_the_plain_walks(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_process(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a process ran: {args}")

    monkeypatch.setattr(subprocess, "run", no_process)
    assert workspace_ref(root) == _plain(root)
    (root / "src" / "new.py").write_text("z = 3\n")
    assert workspace_ref(root) == _plain(root)


def test_an_unchanged_file_is_not_read_again_a_changed_one_is(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ref, "_RACY_NS", 0)  # every file old enough to be trusted
    reads: list[str] = []
    real = ref._content

    def counting(path: str, size: int) -> bytes:
        reads.append(str(path))
        return real(path, size)

    monkeypatch.setattr(ref, "_content", counting)
    first = workspace_ref(root)
    assert reads
    reads.clear()
    assert workspace_ref(root) == first and reads == []
    # same size, mtime put back: ctime still moves
    app = root / "src" / "app.py"
    st = app.stat()
    app.write_text("x = 9\n")
    os.utime(app, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed = workspace_ref(root)
    assert changed != first and changed == _plain(root)
    assert reads == [str(app)]


def test_a_git_repository_above_the_rtws_is_seen_without_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GIT_DIR", raising=False)
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    inner = tmp_path / "repo" / "sub"
    inner.mkdir()
    assert ref._in_git(inner) and not ref._in_git(tmp_path)


def test_since_checks_holds_only_at_the_ref_of_the_scopes_latest_check(root: Path) -> None:
    """Condition 3 as a transition's gate: the latest passing CHECK of the scope must be
    at the ref now; a scope node the CHECK entry under way passed counts as checked now
    (the loop records its mark when the entry ends)."""
    from mindloop.workspace.ref import CheckMarks, since_checks

    at = workspace_ref(root)
    checked = {"a": (2.0, at), "b": (1.0, "tree:older")}
    gate = since_checks(root, lambda: CheckMarks(checked))
    assert gate(["a", "b"]) is None  # b's older check is not the latest
    assert gate(["b"]) == f"the workspace changed since the checks (tree:older → {at})"
    assert gate(["c"]) == "no check of its scope was recorded"
    (root / "src" / "app.py").write_text("x = 5\n")
    now = workspace_ref(root)
    assert gate(["a"]) == f"the workspace changed since the checks ({at} → {now})"
    checking = since_checks(root, lambda: CheckMarks(checked, frozenset({"c"})))
    assert checking(["a", "c"]) is None and checking(["c"]) is None
    assert checking(["a"]) is not None


def test_a_repository_made_or_removed_later_is_seen_at_the_next_ref(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GIT_DIR", raising=False)
    _in_git = ref._in_git
    rtws = tmp_path / "outer" / "proj"
    rtws.mkdir(parents=True)
    assert not _in_git(rtws)
    (tmp_path / "outer" / ".git").mkdir()
    assert _in_git(rtws) and _in_git(Path(os.path.relpath(rtws)))
    (tmp_path / "outer" / ".git").rmdir()
    assert not _in_git(rtws)
    (rtws / ".git").write_text("gitdir: elsewhere\n")  # a worktree's `.git` is a file
    assert _in_git(rtws)


@pytest.mark.parametrize("size", [0, 1, 97, 65536, 65537, 200_000])
def test_a_file_is_read_to_its_end_whatever_size_was_stated(tmp_path: Path, size: int) -> None:
    """The ref reads a recent file to its end: the size its stat gave may be stale (the
    file grew or shrank since)."""
    path = tmp_path / "f.bin"
    data = os.urandom(size)
    path.write_bytes(data)
    for stated in (size, max(0, size - 3), size + 10, 0):
        assert ref._content(str(path), stated) == data
