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
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mindloop.store import Store
from mindloop.taskdoc.fsio import TEMP_PREFIX, TEMP_SUFFIX, read_text_or_none
from mindloop.workspace import markdown, repo, unique
from mindloop.workspace.commands import Change
from mindloop.workspace.models import LogEntry, Node
from mindloop.workspace.repo import LogLine
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
    return _pretty(data) + "\n"


def _pretty(value: Any) -> str:
    """`json.dumps(value, indent=2, ensure_ascii=False)` of graph.json's shapes (text,
    ints, bools, None, lists, dicts with text keys: no floats, which orjson writes in
    another form) by orjson's encoder, whose 2-space indent writes the same text (an indent
    takes `json`'s pure-Python encoder, ten times as dear); what orjson refuses (an int
    beyond 64 bits, a lone surrogate) is written by `json.dumps`."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value, indent=2, ensure_ascii=False)


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
    return _render(state, [(e.node_id, e.at, e.actor, e.text) for e in log])


def _render(state: WorkspaceState, log: Sequence[LogLine]) -> dict[str, str]:
    lang = state.lang
    own: list[tuple[float, str, str]] = []
    by_node: dict[str, list[tuple[float, str, str]]] = {}
    for node_id, at, actor, text in log:
        if node_id is None:
            own.append((at, actor, text))
        else:
            by_node.setdefault(node_id, []).append((at, actor, text))
    files = {
        "Workspace.md": workspace_md(state),
        "graph.json": graph_json(state),
        "Log.md": markdown.log_lines_md(own, lang),
    }
    nodes = list(state.view().values())
    for node, info in zip(nodes, markdown.info_mds(nodes, lang), strict=True):
        base = node_base(node)
        files[f"{base}/Info.md"] = info
        files[f"{base}/Log.md"] = markdown.log_lines_md(by_node.get(node.id, ()), lang)
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
        dirty = cls()
        dirty.add(change)
        return dirty

    def add(self, change: Change) -> None:
        """Add what `change` touched (`merge` of `Dirty.of(change)`, without making it:
        every commit stages its change)."""
        before, after = change.before, change.after
        if not before.exists or before.lang != after.lang:
            self.full = True
            return
        nodes = change.changed_nodes
        self.workspace = self.workspace or (
            (
                after.rules is not before.rules
                and [r.text for r in before.rules] != [r.text for r in after.rules]
            )
            or (after.index is not before.index and before.index != after.index)
            or (after.offered is not before.offered and before.offered != after.offered)
        )
        self.graph = self.graph or bool(nodes) or before.focus != after.focus
        self.nodes.update(nodes)
        self.logs.update(e.node_id for e in change.log)

    def merge(self, other: Dirty) -> None:
        self.full = self.full or other.full
        self.workspace = self.workspace or other.workspace
        self.graph = self.graph or other.graph
        self.nodes |= other.nodes
        self.logs |= other.logs

    def __bool__(self) -> bool:
        return self.full or self.workspace or self.graph or bool(self.nodes or self.logs)


def render_changed(
    state: WorkspaceState, dirty: Dirty, log_of: Callable[[str | None], Sequence[LogLine]]
) -> dict[str, str]:
    """The files `dirty` names, from the store's value; `log_of(node_id)` gives one log's
    lines (None: the workspace's own), so only the logs that got rows are read."""
    lang = state.lang
    files: dict[str, str] = {}
    if dirty.workspace:
        files["Workspace.md"] = workspace_md(state)
    if dirty.graph:
        files["graph.json"] = graph_json(state)
    for nid in dirty.logs:
        node = state.nodes.get(nid) if nid is not None else None
        if nid is None:
            files["Log.md"] = markdown.log_lines_md(_shown(log_of(None)), lang)
        elif node is not None:
            files[f"{node_base(node)}/Log.md"] = markdown.log_lines_md(_shown(log_of(nid)), lang)
    nodes = [node for nid in dirty.nodes if (node := state.nodes.get(nid)) is not None]
    for node, info in zip(nodes, markdown.info_mds(nodes, lang), strict=True):
        files[f"{node_base(node)}/Info.md"] = info
    return files


def _shown(log: Sequence[LogLine]) -> list[tuple[float, str, str]]:
    return [(at, actor, text) for _, at, actor, text in log]


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
    _replace(f"{os.fspath(directory)}/{MANIFEST}", text)


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
    base = os.fspath(directory)
    todo: dict[str, tuple[str, str]] = {}  # rel → (text, its hash)
    for rel, text in files.items():
        new = _hash(text)
        if manifest.get(rel) == [new] and os.path.isfile(f"{base}/{rel}"):
            continue  # unchanged since mindloop wrote it (a hand edit is for `check`)
        todo[rel] = (text, new)
    if not todo:
        return out
    phase1 = dict(manifest)
    for rel, (_, new) in todo.items():
        phase1[rel] = sorted({*manifest.get(rel, []), new})
    _save_manifest(directory, phase1)
    stamp = time.time() if now is None else now
    made: dict[str, bool] = {}  # parent directory → made by this write (so empty)
    for rel, (text, _) in todo.items():
        target = f"{base}/{rel}"
        parent = os.path.dirname(target)
        fresh = made.get(parent)
        if fresh is None:  # a file written before: its directory is there (else made below)
            fresh = made[parent] = False if rel in manifest else _made_dir(parent)
        disk = None if fresh else _read(target)
        if disk is not None and disk != text and _hash(disk) not in manifest.get(rel, []):
            path = Path(target)
            kept = _kept_name(path, stamp)
            os.replace(path, kept)
            out.kept.append(kept.relative_to(directory).as_posix())
        if disk != text:
            try:
                _replace(target, text)
            except FileNotFoundError:  # its directory is gone: made again
                _made_dir(parent)
                _replace(target, text)
            out.written.append(rel)
    final = dict(phase1) if partial else {rel: phase1[rel] for rel in phase1 if rel in files}
    final.update({rel: [new] for rel, (_, new) in todo.items()})
    _save_manifest(directory, final)
    return out


def _made_dir(path: str) -> bool:
    """Make the directory (and its parents) if missing: True when this call made it."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return False
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            os.mkdir(path)
        except FileExistsError:
            return False
    return True


def _read(target: str) -> str | None:
    """`read_text_or_none(Path(target))` (a regular file's text, universal newlines,
    undecodable bytes replaced; None if absent or not a regular file) without its Path
    and text-mode file objects: a projection write reads back every file it replaces."""
    try:
        if not stat.S_ISREG(os.lstat(target).st_mode):
            return None
        fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    text = b"".join(chunks).decode("utf-8", "replace")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _replace(target: str, text: str) -> None:
    """`atomic_write(target, text, fsync=False)` (the same temp name, so `_clean_temps`
    finds what a crash left) in four system calls: a projection write replaces every file
    a commit touched, and at a run's end all of them."""
    tmp = f"{os.path.dirname(target)}/{TEMP_PREFIX}{unique.token()}{TEMP_SUFFIX}"
    data = text.encode("utf-8")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
        return write_files(directory, _render(state, repo.log_lines(store, task)))


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
        files = render_changed(state, dirty, lambda nid: repo.log_lines(store, task, nid))
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
    files = _render(state, repo.log_lines(store, task))
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
