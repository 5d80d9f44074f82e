"""When a BENCH node may be tested (agent-loop §5.5), all four conditions.

The workspace's commands check conditions 1 (its scope is DONE), 2 (the workspace is
quiescent) and 4 (every criterion has a `verify`) (`Session.bench_not_ready`). Condition 3,
"nothing changed since the checks", needs the workspace itself: its *ref* now must equal
the ref recorded when the last node of the scope passed CHECK.

A workspace ref is what identifies the deliverables' state:

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
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from mindloop.workspace.commands import Session
from mindloop.workspace.models import Node, NodeKind, NodeStatus, NodeType
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import Authority

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
    with open(path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).digest()
    if now_ns - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS:
        if len(_digests) >= _DIGESTS_KEPT:
            _digests.clear()
        _digests[key] = (*sig, digest)
    return digest


def tree_hash(rtws: Path) -> str:
    """sha256 over the rtws's deliverable files: relative path and content, in order."""
    h = hashlib.sha256()
    now_ns = time.time_ns()
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(rtws, rel_dir)) as it:
                entries = sorted(it, key=lambda e: e.name)
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
    rtws or a directory above it (a few stats, no process)."""
    if os.environ.get("GIT_DIR"):
        return True
    here = os.path.abspath(rtws)
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return True
        up = os.path.dirname(here)
        if up == here:
            return False
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
    """The nodes a BENCH node tests: its deps, else its TASK siblings."""
    if bench.deps:
        return list(bench.deps)
    parent = state.nodes.get(bench.parent_id or "")
    siblings = parent.children if parent is not None else []
    return [
        c
        for c in siblings
        if c != bench.id and c in state.nodes and state.nodes[c].type is NodeType.TASK
    ]


def bench_candidates(state: WorkspaceState) -> list[Node]:
    """BENCH nodes waiting to be tested whose conditions 1, 2 and 4 hold."""
    out = []
    session: Session | None = None
    for node in state.nodes.values():
        if (
            node.kind is NodeKind.EXECUTION
            and node.type is NodeType.BENCH
            and node.status is NodeStatus.WAIT
        ):
            session = session or Session(state, Authority.runtime())
            if session.bench_not_ready(node) is None:
                out.append(node)
    return out


def unchanged_since_checks(
    state: WorkspaceState, bench: Node, checked: Mapping[str, tuple[float, str]], ref: str
) -> str | None:
    """Condition 3: why it fails (None: it holds). `checked` maps a node to (when, ref) of
    its passing CHECK, as the loop recorded it."""
    scope = bench_scope(state, bench)
    marks = [checked[n] for n in scope if n in checked]
    if not marks:
        return "no check of its scope was recorded"
    latest = max(marks)[1]
    if latest != ref:
        return f"the workspace changed since the checks ({latest} → {ref})"
    return None


def ready_benches(
    state: WorkspaceState,
    rtws: Path,
    checked: Callable[[], Mapping[str, tuple[float, str]]],
) -> tuple[frozenset[str], dict[str, str]]:
    """The BENCH nodes for which all four conditions hold, and why the others that pass
    1, 2 and 4 do not (condition 3). `checked()` gives the passing CHECKs recorded (read
    only when a BENCH node is a candidate)."""
    candidates = bench_candidates(state)
    if not candidates:
        return frozenset(), {}
    marks = checked()
    ref = workspace_ref(rtws)
    ready, why = set(), {}
    for node in candidates:
        problem = unchanged_since_checks(state, node, marks, ref)
        if problem is None:
            ready.add(node.id)
        else:
            why[node.id] = problem
    return frozenset(ready), why
