"""The task start scan (seed 003, "任务启动时"): on the first use of a task's workspace,
look at the rtws's top level — its layout, a README, doc folders — record the structure
in the workspace log, and offer the docs found to the planner. Nothing is dispatched: a
doc reaches a node only when the planner gives it (explicit dispatch).

Bounded like everything the runtime does unasked: the top level only, doc folders two
levels deep, at most `MAX_OFFERED` docs; `.gitignore` at the top is honoured, hidden
entries and encapsulated state (`*.tsk/`, `.minds/`, `.mindloop/`) are skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from mindloop.tools.pathguard import is_encapsulated
from mindloop.workspace.models import DocRef

DOC_DIRS = frozenset({"docs", "doc", "documentation", "wiki", "design", "specs", "spec", "adr"})
DOC_SUFFIXES = frozenset({".md", ".rst", ".txt", ".adoc"})
MAX_OFFERED = 20
MAX_LISTED = 40


@dataclass
class Scan:
    dirs: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    readme: str | None = None
    doc_dirs: list[str] = field(default_factory=list)
    docs: list[DocRef] = field(default_factory=list)

    def text(self) -> str:
        """The structure, as the workspace log records it."""
        dirs = ", ".join(f"{d}/" for d in self.dirs[:MAX_LISTED]) or "(none)"
        files = ", ".join(self.files[:MAX_LISTED]) or "(none)"
        more = (
            len(self.dirs)
            + len(self.files)
            - len(self.dirs[:MAX_LISTED])
            - len(self.files[:MAX_LISTED])
        )
        lines = [
            "start scan of the rtws top level",
            f"directories: {dirs}",
            f"files: {files}" + (f" (+{more} more)" if more > 0 else ""),
            f"README: {self.readme or 'none'}",
            f"doc folders: {', '.join(f'{d}/' for d in self.doc_dirs) or 'none'}",
            f"docs offered to the planner: {', '.join(d.path for d in self.docs) or 'none'}",
        ]
        return "\n".join(lines)


def _ignore(rtws: Path) -> pathspec.GitIgnoreSpec:
    try:
        lines = (rtws / ".gitignore").read_text("utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _skip(name: str, rel: str, is_dir: bool, spec: pathspec.GitIgnoreSpec) -> bool:
    return (
        name.startswith(".")
        or is_encapsulated(rel)
        or spec.match_file(rel + ("/" if is_dir else ""))
    )


def scan(rtws: Path | str) -> Scan:
    root = Path(rtws)
    spec = _ignore(root)
    out = Scan()
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return out
    for e in entries:
        is_dir = e.is_dir(follow_symlinks=False)
        if _skip(e.name, e.name, is_dir, spec):
            continue
        (out.dirs if is_dir else out.files).append(e.name)
    readmes = [f for f in out.files if f.lower().startswith("readme")]
    out.readme = readmes[0] if readmes else None
    offered: list[DocRef] = []
    if out.readme:
        offered.append(DocRef(path=out.readme, description="README"))
    for f in out.files:
        if f != out.readme and Path(f).suffix.lower() in DOC_SUFFIXES:
            offered.append(DocRef(path=f, description="top-level doc"))
    out.doc_dirs = [d for d in out.dirs if d.lower() in DOC_DIRS]
    for d in out.doc_dirs:
        for rel in _docs_under(root, d, spec):
            offered.append(DocRef(path=rel, description=f"in {d}/"))
    out.docs = offered[:MAX_OFFERED]
    return out


def _docs_under(root: Path, top: str, spec: pathspec.GitIgnoreSpec) -> list[str]:
    found: list[str] = []
    stack = [(top, 0)]
    while stack and len(found) < MAX_OFFERED:
        rel_dir, depth = stack.pop(0)
        try:
            entries = sorted(os.scandir(root / rel_dir), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            rel = f"{rel_dir}/{e.name}"
            is_dir = e.is_dir(follow_symlinks=False)
            if _skip(e.name, rel, is_dir, spec):
                continue
            if is_dir and depth < 1:
                stack.append((rel, depth + 1))
            elif e.is_file(follow_symlinks=False) and Path(e.name).suffix.lower() in DOC_SUFFIXES:
                found.append(rel)
    return found
