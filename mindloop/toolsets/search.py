"""The `search` tool of the `fs` toolset: a regular expression over the rtws's text files.

It walks like git would (each `.gitignore` honoured, `.git` skipped), sees only what the
member may read and never enters encapsulated state, opens regular files only (a FIFO
in the tree is skipped, never waited on) and stops itself when its time budget is spent,
returning what it found so far.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec
from pydantic import Field

from mindloop.tools.base import ToolContext, ToolOutput
from mindloop.tools.pathguard import (
    AccessDenied,
    acl_allows,
    is_visible,
    relative_to_rtws,
    resolve_agent_path,
    rtws_root,
    scrub_rtws,
)
from mindloop.tools.registry import ToolArgs
from mindloop.toolsets import files

SEARCH_LINE_CAP = 300
BINARY_SNIFF_BYTES = 8192
SKIPPED_DIRS = frozenset({".git"})
# Beyond the walk's own budget, how long a single stuck file-system call may hold the call.
_STUCK_CALL_GRACE_S = 5.0


class SearchArgs(ToolArgs):
    pattern: str = Field(description="Python regular expression matched against each line.")
    path: str = Field(default=".", description="File or directory to search, rtws-relative.")
    glob: str | None = Field(
        default=None,
        description="Only files whose rtws-relative path matches this gitignore-style glob "
        "(e.g. `*.py`, `src/**/*.ts`).",
    )
    max_results: int = Field(default=200, ge=1, le=2000, description="Stop after this many hits.")


@dataclass
class _IgnoreLayer:
    base: Path
    spec: pathspec.GitIgnoreSpec


def _load_gitignore(directory: Path) -> _IgnoreLayer | None:
    try:
        with files.open_regular(directory / ".gitignore") as fh:
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
    except (OSError, files.NotRegularFile):
        return None
    return _IgnoreLayer(directory, pathspec.GitIgnoreSpec.from_lines(lines))


def _ignored(layers: list[_IgnoreLayer], path: Path, is_dir: bool) -> bool:
    """Git semantics: the deepest .gitignore with a matching rule (ignore or `!`) decides."""
    for layer in reversed(layers):
        rel = path.relative_to(layer.base).as_posix() + ("/" if is_dir else "")
        verdict = layer.spec.check_file(rel).include
        if verdict is not None:
            return verdict
    return False


def _gitignore_layers_above(root: Path, directory: Path) -> list[_IgnoreLayer]:
    layers = []
    for ancestor in [*reversed(directory.parents), directory]:
        if ancestor == root or root in ancestor.parents:
            layer = _load_gitignore(ancestor)
            if layer is not None:
                layers.append(layer)
    return layers


def _iter_search_files(ctx: ToolContext, start: Path) -> Iterator[Path]:
    """Regular text-search candidates under `start`, honouring .gitignore, ACLs and
    encapsulation."""
    root = rtws_root(ctx)

    def walk(directory: Path, layers: list[_IgnoreLayer]) -> Iterator[Path]:
        own = _load_gitignore(directory)
        if own is not None and own not in layers:
            layers = [*layers, own]
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            path = Path(entry.path)
            rel = relative_to_rtws(root, path)
            if entry.name in SKIPPED_DIRS or not is_visible(rel, ctx.acl):
                continue
            if entry.is_symlink():
                target = _safe_symlink_target(ctx, rel)
                readable = target is not None and files.is_regular(target)
                if readable and not _ignored(layers, path, False):
                    yield path
                continue
            is_dir = entry.is_dir()
            if _ignored(layers, path, is_dir):
                continue
            if is_dir:
                yield from walk(path, layers)
            elif entry.is_file(follow_symlinks=False) and acl_allows(rel, ctx.acl, "read"):
                yield path

    yield from walk(start, _gitignore_layers_above(root, start.parent))


def _safe_symlink_target(ctx: ToolContext, rel: str) -> Path | None:
    try:
        return resolve_agent_path(ctx, rel, ctx.acl, "read")
    except AccessDenied:
        return None


async def search(args: SearchArgs, ctx: ToolContext) -> ToolOutput:
    start = resolve_agent_path(ctx, args.path, ctx.acl, "search")
    shown = scrub_rtws(args.path, ctx.rtws) or "."
    try:
        regex = re.compile(args.pattern)
    except re.error as err:
        return ToolOutput(f"invalid regular expression {args.pattern!r}: {err}", is_error=True)
    if not start.exists():
        return ToolOutput(f"not found: `{shown}`", is_error=True)
    if not start.is_dir() and not files.is_regular(start):
        return files.not_regular_output(shown, files.kind_of(start))
    glob_spec = pathspec.PathSpec.from_lines("gitignore", [args.glob]) if args.glob else None
    budget = files.READ_DEADLINE_S
    stop_at = time.monotonic() + budget
    try:
        return await files.off_loop(
            lambda: _run_search(ctx, start, regex, glob_spec, args.max_results, stop_at),
            deadline=budget + _STUCK_CALL_GRACE_S,
        )
    except TimeoutError:
        return files.too_slow_output(shown)


def _run_search(
    ctx: ToolContext,
    start: Path,
    regex: re.Pattern[str],
    glob_spec: pathspec.PathSpec | None,
    max_results: int,
    stop_at: float,
) -> ToolOutput:
    root = rtws_root(ctx)
    candidates = [start] if not start.is_dir() else _iter_search_files(ctx, start)
    hits: list[str] = []
    for path in candidates:
        if time.monotonic() > stop_at:
            hits.append(
                f"[search stopped after {files.READ_DEADLINE_S:g} s; the matches so far are "
                "above: narrow the path or glob]"
            )
            return ToolOutput("\n".join(hits))
        rel = relative_to_rtws(root, path)
        if glob_spec is not None and not glob_spec.match_file(rel):
            continue
        try:
            with files.open_regular(path) as fh:
                if b"\x00" in fh.read(BINARY_SNIFF_BYTES):
                    continue
                fh.seek(0)
                text = io.TextIOWrapper(fh, encoding="utf-8", errors="replace")
                for number, line in enumerate(text, start=1):
                    if regex.search(line):
                        shown = line.rstrip("\r\n")
                        if len(shown) > SEARCH_LINE_CAP:
                            shown = shown[:SEARCH_LINE_CAP] + "…"
                        hits.append(f"{rel}:{number}: {shown}")
                        if len(hits) >= max_results:
                            hits.append(
                                f"[stopped after {max_results} matches; narrow the pattern, "
                                "path or glob]"
                            )
                            return ToolOutput("\n".join(hits))
        except (OSError, files.NotRegularFile):
            continue
    if not hits:
        return ToolOutput(f"no matches for {regex.pattern!r}")
    return ToolOutput("\n".join(hits))
