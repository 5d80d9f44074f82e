"""Helpers shared by the Taskdoc tests: package builders and no-side-effect snapshots."""

from __future__ import annotations

import hashlib
from pathlib import Path

from mindloop.store import Store
from mindloop.taskdoc import TaskPackage


def write(base: Path, rel: str, text: str) -> Path:
    path = base / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_package(rtws: Path, rel: str = "tasks/t.tsk", **files: str) -> TaskPackage:
    """A package with the given files (keys use `__` for `/`: `bearinmind__risks`)."""
    pkg_dir = rtws / rel
    pkg_dir.mkdir(parents=True, exist_ok=True)
    for key, text in files.items():
        write(pkg_dir, key.replace("__", "/") + ".md", text)
    return TaskPackage(rtws, rel)


def tree_snapshot(root: Path) -> dict[str, str]:
    """Every path under `root` with a content hash (dirs as 'dir'): detects any write."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def audit_snapshot(store: Store) -> list[tuple[object, ...]]:
    return [tuple(c.model_dump().values()) for c in store.taskdoc_history("tasks/t.tsk")]
