"""Find the Taskdoc packages of an rtws (`mindloop tasks`).

Recursive, never entering a package, never following directory symlinks, skipping the
runtime/VCS/dependency directories, and honouring `.taskdoc-ignore` files at any depth.
Each ignore file uses gitignore syntax scoped to its own directory (a leading `/`
anchors to that directory); deeper files override shallower ones, and an ignored
directory is not entered.
"""

from __future__ import annotations

import os
from pathlib import Path

import pathspec

from mindloop.taskdoc.package import is_package_name

SKIP_DIRS: frozenset[str] = frozenset({".git", ".minds", ".mindloop", "node_modules"})
IGNORE_FILE = ".taskdoc-ignore"

_Scope = tuple[str, pathspec.GitIgnoreSpec]  # (rtws-relative dir, "" for the root; spec)


def _load_ignore(dir_abs: Path) -> pathspec.GitIgnoreSpec | None:
    path = dir_abs / IGNORE_FILE
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored(rel: str, is_dir: bool, scopes: list[_Scope]) -> bool:
    """gitignore verdict for `rel`: the deepest scope with a matching pattern wins."""
    verdict = False
    for base, spec in scopes:
        sub = rel[len(base) + 1 :] if base else rel
        result = spec.check_file(sub + "/" if is_dir else sub)
        if result.include is not None:
            verdict = result.include
    return verdict


def discover_packages(rtws: Path | str) -> list[str]:
    """rtws-relative paths (posix, sorted) of every `*.tsk` directory that is not ignored."""
    root = Path(rtws).resolve()
    found: list[str] = []

    def walk(dir_abs: Path, rel: str, scopes: list[_Scope]) -> None:
        spec = _load_ignore(dir_abs)
        if spec is not None:
            scopes = [*scopes, (rel, spec)]
        try:
            with os.scandir(dir_abs) as it:
                entries = sorted(
                    (e for e in it if e.is_dir(follow_symlinks=False)), key=lambda e: e.name
                )
        except OSError:
            return
        for entry in entries:
            if entry.name in SKIP_DIRS:
                continue
            child = f"{rel}/{entry.name}" if rel else entry.name
            if _ignored(child, True, scopes):
                continue
            if is_package_name(entry.name):
                found.append(child)
                continue
            walk(Path(entry.path), child, scopes)

    walk(root, "", [])
    return sorted(found)
