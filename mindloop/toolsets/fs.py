"""Toolset `fs`: read, write, list, search, move and delete files inside the rtws.

Every path goes through `pathguard.resolve_agent_path` with the mode the operation needs,
so the rtws boundary, the member's ACLs and the encapsulation of `.minds/`, `.mindloop/`
and `*.tsk` packages hold for every tool. Listings and search additionally filter what
they walk, so a directory walk never reveals encapsulated content either.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pathspec
from pydantic import Field

from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.pathguard import (
    AccessDenied,
    acl_allows,
    is_encapsulated,
    is_visible,
    relative_to_rtws,
    resolve_agent_path,
    rtws_root,
)
from mindloop.tools.registry import ToolArgs

READ_CAP_CHARS = 100_000
LIST_CAP_ENTRIES = 1000
SEARCH_LINE_CAP = 300
BINARY_SNIFF_BYTES = 8192
SKIPPED_DIRS = frozenset({".git"})

_ENCAPSULATION_NOTE = (
    "Paths under `.minds/`, `.mindloop/` and any `*.tsk` Taskdoc package are refused: the "
    "Taskdoc (goals, constraints, bear-in-mind, progress) is already injected into your "
    "context on every generation; change a section with `change_mind`, read an extra "
    "section with `recall_taskdoc`."
)


def _err(text: str) -> ToolOutput:
    return ToolOutput(text, is_error=True)


def _is_binary(path: Path) -> bool:
    with path.open("rb") as fh:
        return b"\x00" in fh.read(BINARY_SNIFF_BYTES)


def _operand_path(ctx: ToolContext, raw: str, resolved: Path) -> Path:
    """The path to move/delete itself: a symlink is acted on, never its target."""
    root = rtws_root(ctx)
    literal = Path(raw) if os.path.isabs(raw) else root / raw
    if literal.name in ("", ".", ".."):
        return resolved
    parent = Path(os.path.realpath(literal.parent))
    candidate = parent / literal.name
    if candidate.is_symlink() and (parent == root or root in parent.parents):
        return candidate
    return resolved


def _refuse_encapsulated_inside(ctx: ToolContext, raw: str, directory: Path) -> None:
    """Moving or deleting a directory must not carry encapsulated state with it."""
    root = rtws_root(ctx)
    for dirpath, dirnames, filenames in os.walk(directory, followlinks=False):
        for name in [*dirnames, *filenames]:
            rel = relative_to_rtws(root, Path(dirpath) / name)
            if is_encapsulated(name):
                raise AccessDenied(
                    f"ACCESS_DENIED: `{raw}` contains encapsulated state (`{rel}`), which "
                    "general file tools may not move or delete. Use `change_mind` / "
                    "`recall_taskdoc` for Taskdoc packages; leave `.minds/` and `.mindloop/` "
                    "to humans and the runtime."
                )


# ---------------------------------------------------------------------------------------
# read_file


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the rtws root.")
    start_line: int | None = Field(
        default=None, ge=1, description="First line to read (1-based, inclusive)."
    )
    end_line: int | None = Field(
        default=None, ge=1, description="Last line to read (1-based, inclusive)."
    )


async def read_file(args: ReadFileArgs, ctx: ToolContext) -> ToolOutput:
    path = resolve_agent_path(ctx, args.path, ctx.acl, "read")
    if not path.exists():
        return _err(f"not found: `{args.path}`")
    if path.is_dir():
        return _err(f"`{args.path}` is a directory; use list_dir to see its entries")
    if args.start_line and args.end_line and args.end_line < args.start_line:
        return _err(f"end_line ({args.end_line}) is before start_line ({args.start_line})")
    # Stay under the registry's output cap so our own "how to read the rest" note survives.
    cap = max(1_000, min(READ_CAP_CHARS, ctx.output_cap - 500))
    return await asyncio.to_thread(_read_range, path, args, cap)


def _read_range(path: Path, args: ReadFileArgs, cap: int) -> ToolOutput:
    if _is_binary(path):
        return _err(f"`{args.path}` is a binary file; read_file shows text files only")
    start = args.start_line or 1
    end = args.end_line
    chunks: list[str] = []
    size = 0
    total = 0
    last_shown = start - 1
    truncated = False
    with path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        for total, line in enumerate(fh, start=1):
            if total < start or (end is not None and total > end) or truncated:
                continue
            if size + len(line) > cap and chunks:
                truncated = True
                continue
            chunks.append(line)
            size += len(line)
            last_shown = total
    if total == 0:
        return ToolOutput(f"{args.path} (empty file)")
    if start > total:
        return _err(f"start_line {start} is past the end of `{args.path}` ({total} lines)")
    body = "".join(chunks)
    header = f"{args.path} (lines {start}-{last_shown} of {total})"
    if len(body) > cap:  # a single line longer than the cap
        return ToolOutput(
            f"{header}\n{body[:cap]}\n[truncated: line {last_shown} alone is {len(body)} "
            f"characters; only its first {cap} are shown]"
        )
    text = f"{header}\n{body}"
    if truncated:
        text += (
            f"\n[truncated at {cap} characters: call read_file with "
            f"start_line={last_shown + 1} to read the rest]"
        )
    return ToolOutput(text)


# ---------------------------------------------------------------------------------------
# write_file


class WriteFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the rtws root.")
    content: str = Field(description="Text to write.")
    mode: Literal["overwrite", "create", "append"] = Field(
        default="overwrite",
        description="overwrite replaces the file, create fails if it exists, append adds "
        "to the end. Parent directories are created.",
    )


async def write_file(args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
    path = resolve_agent_path(ctx, args.path, ctx.acl, "write")
    if path.is_dir():
        return _err(f"`{args.path}` is a directory; give a file path")
    existed = path.exists()
    if args.mode == "create" and existed:
        return _err(f"`{args.path}` already exists; use mode=overwrite or append")
    path.parent.mkdir(parents=True, exist_ok=True)
    flag = {"overwrite": "w", "create": "x", "append": "a"}[args.mode]
    try:
        with path.open(flag, encoding="utf-8", newline="") as fh:
            fh.write(args.content)
    except FileExistsError:
        return _err(f"`{args.path}` already exists; use mode=overwrite or append")
    verb = {"overwrite": "overwrote" if existed else "created", "create": "created"}.get(
        args.mode, "appended to"
    )
    return ToolOutput(f"{verb} `{args.path}` ({len(args.content)} characters written)")


# ---------------------------------------------------------------------------------------
# list_dir


class ListDirArgs(ToolArgs):
    path: str = Field(default=".", description="Directory relative to the rtws root.")
    depth: int = Field(default=1, ge=1, le=5, description="How many levels to descend (1-5).")


@dataclass
class _Listing:
    lines: list[str]
    cap: int
    more: int = 0

    def add(self, line: str) -> None:
        if len(self.lines) < self.cap:
            self.lines.append(line)
        else:
            self.more += 1


async def list_dir(args: ListDirArgs, ctx: ToolContext) -> ToolOutput:
    path = resolve_agent_path(ctx, args.path, ctx.acl, "list")
    if not path.exists():
        return _err(f"not found: `{args.path}`")
    if not path.is_dir():
        return _err(f"`{args.path}` is a file, not a directory; use read_file")
    listing = _Listing(lines=[], cap=LIST_CAP_ENTRIES)
    await asyncio.to_thread(_walk_listing, ctx, path, args.depth, 0, listing)
    shown = args.path if args.path.strip() else "."
    text = "\n".join([f"{shown}/", *listing.lines]) if listing.lines else f"{shown}/ (empty)"
    if listing.more:
        text += (
            f"\n[listing truncated: {LIST_CAP_ENTRIES} entries shown, {listing.more} more; "
            "list a subdirectory or use a smaller depth]"
        )
    return ToolOutput(text)


def _encapsulated_label(name: str) -> str:
    if name.lower().rstrip(" .").endswith(".tsk"):
        return "Taskdoc package: read with recall_taskdoc, change with change_mind"
    return "encapsulated: not listable"


def _walk_listing(ctx: ToolContext, directory: Path, depth: int, level: int, out: _Listing) -> None:
    root = rtws_root(ctx)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as err:
        out.add(f"{'  ' * (level + 1)}[cannot list: {err.strerror}]")
        return
    indent = "  " * (level + 1)
    for entry in entries:
        rel = relative_to_rtws(root, Path(entry.path))
        if not acl_allows(rel, ctx.acl, "list"):
            continue
        if is_encapsulated(entry.name):
            # The package's existence is useful to know; its content is not listable.
            label = _encapsulated_label(entry.name)
            suffix = "/" if entry.is_dir(follow_symlinks=False) else ""
            out.add(f"{indent}{entry.name}{suffix} [{label}]")
            continue
        if entry.is_symlink():
            kind = "/" if entry.is_dir() else ""
            out.add(f"{indent}{entry.name}{kind} (symlink)")
            continue
        if entry.is_dir():
            out.add(f"{indent}{entry.name}/")
            if level + 1 < depth:
                _walk_listing(ctx, Path(entry.path), depth, level + 1, out)
        else:
            out.add(f"{indent}{entry.name}")


# ---------------------------------------------------------------------------------------
# search


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
    gitignore = directory / ".gitignore"
    if not gitignore.is_file():
        return None
    lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
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
    """Text-search candidates under `start`, honouring .gitignore, ACLs and encapsulation."""
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
                if target is not None and target.is_file() and not _ignored(layers, path, False):
                    yield path
                continue
            is_dir = entry.is_dir()
            if _ignored(layers, path, is_dir):
                continue
            if is_dir:
                yield from walk(path, layers)
            elif acl_allows(rel, ctx.acl, "read"):
                yield path

    yield from walk(start, _gitignore_layers_above(root, start.parent))


def _safe_symlink_target(ctx: ToolContext, rel: str) -> Path | None:
    try:
        return resolve_agent_path(ctx, rel, ctx.acl, "read")
    except AccessDenied:
        return None


async def search(args: SearchArgs, ctx: ToolContext) -> ToolOutput:
    start = resolve_agent_path(ctx, args.path, ctx.acl, "search")
    try:
        regex = re.compile(args.pattern)
    except re.error as err:
        return _err(f"invalid regular expression {args.pattern!r}: {err}")
    if not start.exists():
        return _err(f"not found: `{args.path}`")
    glob_spec = pathspec.PathSpec.from_lines("gitignore", [args.glob]) if args.glob else None
    return await asyncio.to_thread(_run_search, ctx, start, regex, glob_spec, args.max_results)


def _run_search(
    ctx: ToolContext,
    start: Path,
    regex: re.Pattern[str],
    glob_spec: pathspec.PathSpec | None,
    max_results: int,
) -> ToolOutput:
    root = rtws_root(ctx)
    files = [start] if start.is_file() else _iter_search_files(ctx, start)
    hits: list[str] = []
    for path in files:
        rel = relative_to_rtws(root, path)
        if glob_spec is not None and not glob_spec.match_file(rel):
            continue
        try:
            if _is_binary(path):
                continue
            with path.open("r", encoding="utf-8", errors="replace") as fh:
                for number, line in enumerate(fh, start=1):
                    if regex.search(line):
                        text = line.rstrip("\r\n")
                        if len(text) > SEARCH_LINE_CAP:
                            text = text[:SEARCH_LINE_CAP] + "…"
                        hits.append(f"{rel}:{number}: {text}")
                        if len(hits) >= max_results:
                            hits.append(
                                f"[stopped after {max_results} matches; narrow the pattern, "
                                "path or glob]"
                            )
                            return ToolOutput("\n".join(hits))
        except OSError:
            continue
    if not hits:
        return ToolOutput(f"no matches for {regex.pattern!r}")
    return ToolOutput("\n".join(hits))


# ---------------------------------------------------------------------------------------
# move / delete


class MoveArgs(ToolArgs):
    src: str = Field(description="Existing file or directory, rtws-relative.")
    dst: str = Field(description="New path, rtws-relative (the full target path, not a folder).")
    overwrite: bool = Field(default=False, description="Replace an existing destination file.")


async def move(args: MoveArgs, ctx: ToolContext) -> ToolOutput:
    src_resolved = resolve_agent_path(ctx, args.src, ctx.acl, "read")
    resolve_agent_path(ctx, args.src, ctx.acl, "write")
    dst = resolve_agent_path(ctx, args.dst, ctx.acl, "write")
    src = _operand_path(ctx, args.src, src_resolved)
    if not src.exists() and not src.is_symlink():
        return _err(f"not found: `{args.src}`")
    root = rtws_root(ctx)
    if src == root:
        return _err("cannot move the rtws root")
    if dst == src or src in dst.parents:
        return _err(f"cannot move `{args.src}` into itself (`{args.dst}`)")
    if dst.exists():
        if not args.overwrite:
            return _err(f"`{args.dst}` already exists; pass overwrite=true to replace it")
        if dst.is_dir():
            return _err(f"`{args.dst}` is an existing directory; delete it first or pick a path")
        if src.is_dir() and not src.is_symlink():
            return _err(f"cannot replace file `{args.dst}` with directory `{args.src}`")
    if src.is_dir() and not src.is_symlink():
        _refuse_encapsulated_inside(ctx, args.src, src)
    dst.parent.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(shutil.move, str(src), str(dst))
    return ToolOutput(f"moved `{args.src}` to `{args.dst}`")


class DeleteArgs(ToolArgs):
    path: str = Field(description="File or directory to delete, rtws-relative.")
    recursive: bool = Field(
        default=False, description="Required to delete a directory and everything in it."
    )


async def delete(args: DeleteArgs, ctx: ToolContext) -> ToolOutput:
    resolved = resolve_agent_path(ctx, args.path, ctx.acl, "write")
    path = _operand_path(ctx, args.path, resolved)
    if path == rtws_root(ctx):
        return _err("cannot delete the rtws root")
    if path.is_symlink() or path.is_file():
        path.unlink()
        return ToolOutput(f"deleted `{args.path}`")
    if not path.exists():
        return _err(f"not found: `{args.path}`")
    if not args.recursive:
        return _err(f"`{args.path}` is a directory; pass recursive=true to delete it")
    _refuse_encapsulated_inside(ctx, args.path, path)
    await asyncio.to_thread(shutil.rmtree, path)
    return ToolOutput(f"deleted directory `{args.path}` and its contents")


def fs_tools() -> list[Tool[Any]]:
    """Fresh Tool objects for the `fs` toolset."""
    return [
        Tool(
            "read_file",
            "Read a text file in the rtws, optionally a 1-based inclusive line range. "
            f"Output is capped at {READ_CAP_CHARS} characters. {_ENCAPSULATION_NOTE}",
            ReadFileArgs,
            read_file,
        ),
        Tool(
            "write_file",
            "Write a text file in the rtws (overwrite, create or append); creates parent "
            f"directories. {_ENCAPSULATION_NOTE}",
            WriteFileArgs,
            write_file,
        ),
        Tool(
            "list_dir",
            "List a directory of the rtws (sorted; directories end with /), up to 5 levels "
            f"deep. Taskdoc packages are shown but not entered. {_ENCAPSULATION_NOTE}",
            ListDirArgs,
            list_dir,
        ),
        Tool(
            "search",
            "Search text files of the rtws with a regular expression; honours .gitignore, "
            f"skips binary files and .git. Results are `path:line: text`. {_ENCAPSULATION_NOTE}",
            SearchArgs,
            search,
        ),
        Tool(
            "move",
            f"Move or rename a file or directory inside the rtws. {_ENCAPSULATION_NOTE}",
            MoveArgs,
            move,
        ),
        Tool(
            "delete",
            "Delete a file, or a directory with recursive=true. " + _ENCAPSULATION_NOTE,
            DeleteArgs,
            delete,
        ),
    ]
