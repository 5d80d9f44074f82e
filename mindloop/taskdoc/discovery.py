"""Find the Taskdoc packages of an rtws (`mindloop tasks`).

Recursive, never entering a package, never following directory symlinks, skipping the
runtime/VCS/dependency directories, and honouring `.taskdoc-ignore` files at any depth.
Each ignore file uses gitignore syntax and applies to its own directory's subtree only;
as in the anchor (dominds.md §12 "Discovery"), a pattern with a leading `/` is
rtws-relative (`/projects/p1/private/` in any ignore file names that one directory), and
other patterns are relative to the ignore file's directory. Deeper files override
shallower ones, and an ignored directory is not entered.
"""

from __future__ import annotations

import os
from pathlib import Path

import pathspec

from mindloop.taskdoc.package import is_package_name

SKIP_DIRS: frozenset[str] = frozenset({".git", ".minds", ".mindloop", "node_modules"})
IGNORE_FILE = ".taskdoc-ignore"

_Scope = tuple[str, pathspec.GitIgnoreSpec]  # (rtws-relative dir, "" for the root; spec)


def _scoped_line(line: str, rel: str) -> str | None:
    """One ignore-file line of directory `rel`, rewritten for a spec matched against paths
    relative to `rel`: a leading `/` (after an optional `!`) is rtws-relative, so it is
    re-anchored below `rel`, or dropped when it names nothing inside the subtree."""
    neg = "!" if line.startswith("!") else ""
    body = line[len(neg) :]
    if not rel or not body.startswith("/"):
        return line
    prefix = f"/{rel}/"
    if not body.startswith(prefix):
        return None  # outside this file's subtree: it cannot match anything here
    return f"{neg}/{body[len(prefix) :]}"


def _load_ignore(dir_abs: Path, rel: str) -> pathspec.GitIgnoreSpec | None:
    path = dir_abs / IGNORE_FILE
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    scoped = [s for s in (_scoped_line(line.strip(), rel) for line in lines) if s is not None]
    return pathspec.GitIgnoreSpec.from_lines(scoped)


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
        spec = _load_ignore(dir_abs, rel)
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
