"""The workspace ref and agent-loop §5.5 condition 3, "nothing changed since the checks".

A workspace ref is what identifies the deliverables' state (a node's `checkpoint_ref`
and `checked_ref`, the loop's record of each passing CHECK, a wait's photograph):

- in a git repository: `HEAD`, and when the working tree is not clean, `HEAD` plus the
  hash of what differs from it (the diff and the untracked files' contents), so a ref
  equal to the checked one means nothing changed since the check, committed or not;
- elsewhere: a hash of the tree's files (paths and contents).

Either way the rtws's own state (`.mindloop/`, `.minds/`, the `*.tsk/` packages, whose
workspace projections change with every commit) and caches (`__pycache__`, hidden
directories) are left out: they are not deliverables. The ref is computed only when a
BENCH node's other conditions hold and when CHECK ends, never per step.

Its cost: whether git sees a work tree is a few `stat`s (a `.git` in the rtws or above
it), so an rtws outside git runs no `git` process; the tree hash stats every file but
reads and hashes only those whose (size, mtime, ctime) moved since they were last hashed
in this process (a file changed within the last `_RACY_NS` is always read again: a
timestamp too coarse to tell two writes apart cannot hide a change).

Condition 3 is checked where a BENCH node is routed to CHECK (`loop/bench.py`) and where
CHECK moves it (`since_checks`, the gate the work loop's CHECK authority carries into the
transition's BENCH_READY guard: `moves.Moves.bench_not_ready`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import operator
import os
import subprocess
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mindloop.workspace.models import Node, NodeType
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import SinceChecks

_EXCLUDE_DIRS = frozenset({"__pycache__", "node_modules"})
_GIT_EXCLUDES = (
    ":(exclude,glob)**/*.tsk/**",
    ":(exclude).minds",
    ":(exclude).mindloop",
    *(f":(exclude,glob)**/{d}/**" for d in sorted(_EXCLUDE_DIRS)),
)


def _git(rtws: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=rtws,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


_NAME = operator.attrgetter("name")


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in _EXCLUDE_DIRS or name.endswith(".tsk")


# content digests by file identity: (dev, inode) → (size, mtime_ns, ctime_ns, digest)
_RACY_NS = 2_000_000_000
_DIGESTS_KEPT = 100_000
_digests: dict[tuple[int, int], tuple[int, int, int, bytes]] = {}


def _digest(path: str, st: os.stat_result, now_ns: int) -> bytes:
    key = (st.st_dev, st.st_ino)
    sig = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    held = _digests.get(key)
    if held is not None and held[:3] == sig:
        return held[3]
    digest = hashlib.sha256(_content(path, st.st_size)).digest()
    if now_ns - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS:
        if len(_digests) >= _DIGESTS_KEPT:
            _digests.clear()
        _digests[key] = (*sig, digest)
    return digest


def _content(path: str, size: int) -> bytes:
    """The file's bytes, to its end (`open(path, "rb").read()` without the file object's
    own system calls: a recent file is read again at every ref, several times a node)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        want = size + 1  # a short read is the end of a regular file; more: it grew
        while chunk := os.read(fd, want):
            chunks.append(chunk)
            if len(chunk) < want:
                break
            want = 1 << 16
    finally:
        os.close(fd)
    return b"".join(chunks)


def tree_hash(rtws: Path) -> str:
    """sha256 over the rtws's deliverable files: relative path and content, in order."""
    h = hashlib.sha256()
    now_ns = time.time_ns()
    base = os.fspath(rtws)
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(f"{base}/{rel_dir}" if rel_dir else base) as it:
                entries = sorted(it, key=_NAME)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if is_dir:  # a link to a directory is not followed (as `os.walk` does not)
                if not _skipped(entry.name) and not entry.is_symlink():
                    subdirs.append(rel)
                continue
            if entry.name.startswith("."):
                continue
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            try:
                h.update(_digest(entry.path, entry.stat(), now_ns))
            except OSError:
                h.update(b"?")
        # depth first, each directory's files before its subdirectories' (sorted)
        stack.extend(reversed(subdirs))
    return "tree:" + h.hexdigest()


def _in_git(rtws: Path) -> bool:
    """Whether git would find a repository for the rtws: `GIT_DIR` set, or a `.git` in the
    rtws or a directory above it (one `access` per directory, no process; the paths looked
    at are worked out once per rtws)."""
    if os.environ.get("GIT_DIR"):
        return True
    path = os.fspath(rtws)
    # `access` as `lstat` would find it (a link itself counts), without the exception a
    # missing path raises there: every candidate is missing outside git
    exists, found = os.access, os.F_OK
    for candidate in _git_candidates(path if os.path.isabs(path) else os.path.abspath(path)):
        if exists(candidate, found, follow_symlinks=False):
            return True
    return False


@functools.lru_cache(maxsize=64)
def _git_candidates(rtws: str) -> tuple[str, ...]:
    """`<dir>/.git` for the rtws (an absolute path) and every directory above it, nearest
    first."""
    out = []
    here = os.path.abspath(rtws)
    while True:
        out.append(os.path.join(here, ".git"))
        up = os.path.dirname(here)
        if up == here:
            return tuple(out)
        here = up


def workspace_ref(rtws: Path) -> str:
    """The deliverables' state now (see the module doc)."""
    if not _in_git(rtws):
        return tree_hash(rtws)
    head = _git(rtws, "rev-parse", "--verify", "-q", "HEAD")
    if head is None:
        if _git(rtws, "rev-parse", "--is-inside-work-tree") is None:
            return tree_hash(rtws)
        head = "(no commit)"  # a repository without a commit yet
    head = head.strip()
    status = _git(rtws, "status", "--porcelain", "--untracked-files=all", "--", ".", *_GIT_EXCLUDES)
    if status is None:
        return tree_hash(rtws)
    if not status.strip():
        return f"git:{head}"
    h = hashlib.sha256(status.encode())
    diff = _git(rtws, "diff", "HEAD", "--", ".", *_GIT_EXCLUDES) or ""
    h.update(diff.encode("utf-8", "surrogateescape"))
    for line in status.splitlines():
        if line.startswith("??"):
            path = rtws / line[3:].strip().strip('"')
            with contextlib.suppress(OSError):
                h.update(hashlib.sha256(path.read_bytes()).digest())
    return f"git:{head}+dirty:{h.hexdigest()[:16]}"


def bench_scope(state: WorkspaceState, bench: Node) -> list[str]:
    """The nodes a BENCH node tests: its deps, else its TASK siblings (§5.5 condition 1)."""
    if bench.deps:
        return list(bench.deps)
    parent = state.peek(bench.parent_id) if bench.parent_id else None
    siblings = parent.children if parent is not None else []
    return [
        c
        for c in siblings
        if c != bench.id and (n := state.peek(c)) is not None and n.type is NodeType.TASK
    ]


# node -> (when, workspace ref) of its latest passing CHECK
Marks = Mapping[str, tuple[float, str]]


@dataclass(frozen=True)
class CheckMarks:
    """The passing CHECKs a task's loop recorded (node -> (when, ref)), and the nodes the
    CHECK entry under way verifies (recorded when it ends, at the ref then)."""

    checked: Marks = field(default_factory=dict)
    checking: Collection[str] = frozenset()


def unchanged_since_checks(scope: Sequence[str], checked: Marks, ref: str) -> str | None:
    """Condition 3 for a BENCH node whose scope is `scope`: why it fails (None: it
    holds) — the latest passing CHECK in the scope must be at `ref`, the ref now."""
    marks = [checked[n] for n in scope if n in checked]
    if not marks:
        return "no check of its scope was recorded"
    latest = max(marks)[1]
    if latest != ref:
        return f"the workspace changed since the checks ({latest} → {ref})"
    return None


def since_checks(rtws: Path, record: Callable[[], CheckMarks]) -> SinceChecks:
    """Condition 3 as a transition's gate: the ref now against `record()` (read only when
    a BENCH node's other conditions hold). A scope node the CHECK entry under way passed
    counts as checked now (its mark is written when the entry ends)."""

    def gate(scope: Sequence[str]) -> str | None:
        marks = record()
        ref = workspace_ref(rtws)
        checked = dict(marks.checked)
        now = time.time()
        for node in scope:
            if node in marks.checking:
                checked[node] = (now, ref)
        return unchanged_since_checks(scope, checked, ref)

    return gate
