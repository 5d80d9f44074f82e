"""The workspace's files: projections of the store, rewritten after commits.

Layout, under `<task>.tsk/workspace/` (a runtime-managed directory the Taskdoc and the
file tools leave alone):

    Workspace.md   rules, the global doc index (with each doc's status), docs found at start
    graph.json     structure and statuses
    Log.md         the workspace's own log (start scan, rules, index)
    nodes/<title>_<id>/Info.md, Log.md

`write` renders every file from one read of the store (what `mindloop run` does at its
start); `write_changed` renders only the files a commit touched (`Dirty.of(change)`: the
nodes whose rows changed, the logs that got rows, graph.json and Workspace.md only when
what they show changed), so a commit costs what it changed, not the size of the tree.
Either replaces, atomically, the files whose content changed. When the writes happen
(after each commit, or coalesced during a work loop's run) is `projector.py`'s.

The files are derived views: the store is authoritative and `mindloop run` rebuilds them.
So they are replaced atomically (a temp file renamed over them: a reader or a killed
process sees the old or the new file) but not fsynced; a power failure can only leave a
file behind the store, which the next run rewrites.

A file whose content is not what mindloop last wrote was edited by hand: it is never
silently overwritten, but kept beside the new one (`Info.edited-<time>.md`) and reported
by `problems` (which `mindloop check` prints) with its path. What mindloop last wrote is
recorded by hash in `.projection.json`, in two phases (the old and the new hash both
accepted while files are replaced), so a crash between any two writes leaves nothing that
looks like a hand edit; and a file that matches no recorded hash but is exactly the
store's rendering is taken as written, not as an edit. Writers of one workspace hold an
exclusive lock (`.lock`), and render under it, so the last one writes what the store holds
last.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mindloop.store import Store
from mindloop.taskdoc.fsio import TEMP_PREFIX, TEMP_SUFFIX, atomic_write, read_text_or_none
from mindloop.workspace import markdown, repo
from mindloop.workspace.commands import Change
from mindloop.workspace.models import LogEntry, Node
from mindloop.workspace.state import WorkspaceState

WORKSPACE_DIR = "workspace"
MANIFEST = ".projection.json"
LOCK = ".lock"
EDITED_MARK = ".edited-"


def workspace_dir(rtws: Path, task: str) -> Path:
    return Path(rtws) / task / WORKSPACE_DIR


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def graph_json(state: WorkspaceState) -> str:
    nodes = {
        n.id: {
            "title": n.title,
            "kind": n.kind.value,
            "type": n.type.value,
            "status": n.status.value,
            "parent": n.parent_id,
            "children": n.children,
            "deps": n.deps,
            "assignee": n.assignee,
            "isolate": n.isolate,
            "version": n.version,
            "dir": f"nodes/{n.dir}",
            "docs": [{"path": d.path, "status": d.status.value} for d in n.docs],
            "conclusion": bool(n.conclusion),
        }
        for n in state.nodes.values()
    }
    data = {
        "version": 1,
        "task": state.task,
        "language": state.lang,
        "focus": state.focus,
        "root": "root",
        "nodes": nodes,
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def workspace_md(state: WorkspaceState) -> str:
    return markdown.workspace_md(
        task=state.task,
        lang=state.lang,
        rules=[r.text for r in state.rules],
        index=state.index,
        found=state.offered,
    )


def node_base(node: Node) -> str:
    """The node's directory, workspace-relative."""
    return f"nodes/{node.dir}"


def render(state: WorkspaceState, log: Sequence[LogEntry]) -> dict[str, str]:
    """Every projection file (workspace-relative path → text), from the store's value."""
    lang = state.lang
    files = {
        "Workspace.md": workspace_md(state),
        "graph.json": graph_json(state),
        "Log.md": markdown.log_md([e for e in log if e.node_id is None], lang),
    }
    by_node: dict[str, list[LogEntry]] = {}
    for e in log:
        if e.node_id is not None:
            by_node.setdefault(e.node_id, []).append(e)
    for node in state.nodes.values():
        base = node_base(node)
        files[f"{base}/Info.md"] = markdown.info_md(node, lang)
        files[f"{base}/Log.md"] = markdown.log_md(by_node.get(node.id, []), lang)
    return files


@dataclass
class Dirty:
    """Which projection files a change touched (more is harmless: a file is rendered from
    the store and written only if its text changed; less would leave a file stale)."""

    full: bool = False  # everything (a workspace initialised, its language changed)
    workspace: bool = False  # Workspace.md: rules, doc index, docs found
    graph: bool = False  # graph.json: any node, the focus
    nodes: set[str] = field(default_factory=set)  # their Info.md
    logs: set[str | None] = field(default_factory=set)  # their Log.md (None: the workspace's)

    @classmethod
    def of(cls, change: Change) -> Dirty:
        before, after = change.before, change.after
        if not before.exists or before.lang != after.lang:
            return cls(full=True)
        nodes = set(change.changed_nodes)
        return cls(
            workspace=[r.text for r in before.rules] != [r.text for r in after.rules]
            or before.index != after.index
            or before.offered != after.offered,
            graph=bool(nodes) or before.focus != after.focus,
            nodes=nodes,
            logs={e.node_id for e in change.log},
        )

    def merge(self, other: Dirty) -> None:
        self.full = self.full or other.full
        self.workspace = self.workspace or other.workspace
        self.graph = self.graph or other.graph
        self.nodes |= other.nodes
        self.logs |= other.logs

    def __bool__(self) -> bool:
        return self.full or self.workspace or self.graph or bool(self.nodes or self.logs)


def render_changed(
    state: WorkspaceState, dirty: Dirty, log_of: Callable[[str | None], Sequence[LogEntry]]
) -> dict[str, str]:
    """The files `dirty` names, from the store's value; `log_of(node_id)` gives one log
    (None: the workspace's own), so only the logs that got rows are read."""
    lang = state.lang
    files: dict[str, str] = {}
    if dirty.workspace:
        files["Workspace.md"] = workspace_md(state)
    if dirty.graph:
        files["graph.json"] = graph_json(state)
    for nid in dirty.logs:
        node = state.nodes.get(nid) if nid is not None else None
        if nid is None:
            files["Log.md"] = markdown.log_md(log_of(None), lang)
        elif node is not None:
            files[f"{node_base(node)}/Log.md"] = markdown.log_md(log_of(nid), lang)
    for nid in dirty.nodes:
        node = state.nodes.get(nid)
        if node is not None:
            files[f"{node_base(node)}/Info.md"] = markdown.info_md(node, lang)
    return files


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _manifest(directory: Path) -> dict[str, list[str]]:
    text = read_text_or_none(directory / MANIFEST)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return files if isinstance(files, dict) else {}


def _save_manifest(directory: Path, files: dict[str, list[str]]) -> None:
    # one line: json's C encoder (an indent takes the pure-Python one); a file for mindloop
    text = json.dumps({"files": files}, sort_keys=True, separators=(",", ":")) + "\n"
    atomic_write(directory / MANIFEST, text, fsync=False)


def _kept_name(path: Path, at: float) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(at))
    candidate = path.with_name(f"{path.stem}{EDITED_MARK}{stamp}{path.suffix}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}{EDITED_MARK}{stamp}-{n}{path.suffix}")
        n += 1
    return candidate


@dataclass
class Written:
    """What one `write` did (paths relative to the workspace directory)."""

    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # hand edits moved beside the new file


def write_files(
    directory: Path, files: dict[str, str], *, now: float | None = None, partial: bool = False
) -> Written:
    """Replace the files whose content changed; keep hand edits beside them. `files` is
    every projection file, or with `partial` some of them (the others keep their record).
    The caller holds the lock."""
    out = Written()
    manifest = _manifest(directory)
    todo: dict[str, str] = {}
    for rel, text in files.items():
        new = _hash(text)
        path = directory / rel
        if manifest.get(rel) == [new] and path.is_file():
            continue  # unchanged since mindloop wrote it (a hand edit is for `check`)
        todo[rel] = text
    if not todo:
        return out
    phase1 = dict(manifest)
    for rel, text in todo.items():
        phase1[rel] = sorted({*manifest.get(rel, []), _hash(text)})
    _save_manifest(directory, phase1)
    stamp = time.time() if now is None else now
    for rel, text in todo.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        disk = read_text_or_none(path)
        if disk is not None and disk != text and _hash(disk) not in manifest.get(rel, []):
            kept = _kept_name(path, stamp)
            os.replace(path, kept)
            out.kept.append(kept.relative_to(directory).as_posix())
        if disk != text:
            atomic_write(path, text, fsync=False)
            out.written.append(rel)
    final = dict(phase1) if partial else {rel: phase1[rel] for rel in phase1 if rel in files}
    final.update({rel: [_hash(text)] for rel, text in todo.items()})
    _save_manifest(directory, final)
    return out


def write(store: Store, rtws: Path, task: str) -> Written:
    """Rewrite the task's projections from the store (after a commit; at `mindloop run`)."""
    directory = workspace_dir(rtws, task)
    if not directory.parent.is_dir():
        return Written()  # the package is gone: nothing to project into
    directory.mkdir(exist_ok=True)
    with _locked(directory):
        _clean_temps(directory)
        state = repo.load(store, task)
        if not state.exists:
            return Written()
        return write_files(directory, render(state, repo.log(store, task)))


def write_changed(store: Store, rtws: Path, task: str, dirty: Dirty) -> Written:
    """Rewrite the files `dirty` names from the store (after commits)."""
    if dirty.full:
        return write(store, rtws, task)
    directory = workspace_dir(rtws, task)
    if not dirty or not directory.parent.is_dir():
        return Written()
    directory.mkdir(exist_ok=True)
    with _locked(directory):
        state = repo.load(store, task)
        if not state.exists:
            return Written()
        files = render_changed(state, dirty, lambda nid: repo.node_log(store, task, nid))
        return write_files(directory, files, partial=True)


def _clean_temps(directory: Path) -> None:
    """Temp files an interrupted write left (the atomic writes' own)."""
    for path in [directory, *directory.glob("nodes/*")]:
        with contextlib.suppress(OSError):
            for entry in path.iterdir():
                if entry.name.startswith(TEMP_PREFIX) and entry.name.endswith(TEMP_SUFFIX):
                    entry.unlink()


def problems(store: Store, rtws: Path, task: str) -> list[str]:
    """What `mindloop check` reports: files edited by hand (their hash is not what
    mindloop wrote), hand edits kept beside a rewritten file, and files that disagree
    with the store (a write that did not happen yet, e.g. after a crash). Read only."""
    directory = workspace_dir(rtws, task)
    shown = f"{task}/{WORKSPACE_DIR}"
    state = repo.load(store, task)
    if not state.exists:
        return []
    files = render(state, repo.log(store, task))
    manifest = _manifest(directory)
    out: list[str] = []
    for rel, text in files.items():
        disk = read_text_or_none(directory / rel)
        if disk is None:
            out.append(f"{shown}/{rel}: missing; `mindloop run` writes it from the store")
        elif disk != text:
            if _hash(disk) in manifest.get(rel, []):
                out.append(
                    f"{shown}/{rel}: disagrees with the store (not rewritten since a change); "
                    "`mindloop run` rewrites it"
                )
            else:
                out.append(
                    f"{shown}/{rel}: edited by hand (the store is authoritative: change the "
                    "workspace with the CLI or the tools; the edit is kept beside the file "
                    "when it is next rewritten)"
                )
    for kept in sorted(directory.rglob(f"*{EDITED_MARK}*")) if directory.is_dir() else []:
        out.append(
            f"{shown}/{kept.relative_to(directory).as_posix()}: a hand edit kept when the file "
            "beside it was rewritten; merge what you need through the CLI, then delete it"
        )
    return out
