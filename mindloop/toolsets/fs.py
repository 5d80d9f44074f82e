"""Toolset `fs`: read, write, list, search, move and delete files inside the rtws.

Every path goes through the path guard (`resolve_agent_path`, or `resolve_entry` for the
entry a move or delete acts on) with the mode the operation needs, so the rtws boundary,
the member's ACLs and the encapsulation of `.minds/`, `.mindloop/` and `*.tsk` packages
hold for every tool; acting on a directory as a whole is refused when anything beneath it
would be refused on its own (`guard_subtree`). Listings and search additionally filter
what they walk, so a directory walk never reveals encapsulated content either. File
contents are read and written through `files` (no blocking on special files, reads under
a deadline, crash-atomic writes).
"""

from __future__ import annotations

import errno
import io
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import Field

from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.pathguard import (
    acl_allows,
    guard_subtree,
    is_encapsulated,
    relative_to_rtws,
    resolve_agent_path,
    resolve_entry,
    rtws_root,
    scrub_rtws,
    shown_path,
)
from mindloop.tools.registry import ToolArgs
from mindloop.toolsets import files
from mindloop.toolsets.search import BINARY_SNIFF_BYTES, SearchArgs, search

READ_CAP_CHARS = 100_000
LIST_CAP_ENTRIES = 1000

ENCAPSULATION_NOTE = (
    "Paths under `.minds/`, `.mindloop/` and any `*.tsk` Taskdoc package are refused: the "
    "Taskdoc (goals, constraints, bear-in-mind, progress) is already injected into your "
    "context on every generation; change a section with `change_mind`, read an extra "
    "section with `recall_taskdoc`."
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _err(text: str) -> ToolOutput:
    return ToolOutput(text, is_error=True)


def _shown(ctx: ToolContext, raw: str) -> str:
    """An agent path as tool texts repeat it: an absolute path inside the rtws comes back
    rtws-relative."""
    return scrub_rtws(raw, ctx.rtws) or "."


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
    shown = _shown(ctx, args.path)
    if not path.exists():
        return _err(f"not found: `{shown}`")
    if path.is_dir():
        return _err(f"`{shown}` is a directory; use list_dir to see its entries")
    if args.start_line and args.end_line and args.end_line < args.start_line:
        return _err(f"end_line ({args.end_line}) is before start_line ({args.start_line})")
    # Stay under the registry's output cap so our own "how to read the rest" note survives.
    cap = max(1_000, min(READ_CAP_CHARS, ctx.output_cap - 500))

    def read() -> ToolOutput:
        return files.read_text_file(path, lambda fh: _read_range(fh, shown, args, cap))

    try:
        return await files.off_loop(read, deadline=files.READ_DEADLINE_S)
    except files.NotRegularFile as err:
        return files.not_regular_output(shown, err.kind)
    except TimeoutError:
        return files.too_slow_output(shown)


def _read_range(fh: BinaryIO, shown: str, args: ReadFileArgs, cap: int) -> ToolOutput:
    if b"\x00" in fh.read(BINARY_SNIFF_BYTES):
        return _err(f"`{shown}` is a binary file; read_file shows text files only")
    fh.seek(0)
    start = args.start_line or 1
    end = args.end_line
    chunks: list[str] = []
    size = 0
    total = 0
    last_shown = start - 1
    truncated = False
    text = io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline="")
    for total, line in enumerate(text, start=1):
        if total < start or (end is not None and total > end) or truncated:
            continue
        if size + len(line) > cap and chunks:
            truncated = True
            continue
        chunks.append(line)
        size += len(line)
        last_shown = total
    text.detach()
    if total == 0:
        return ToolOutput(f"{shown} (empty file)")
    if start > total:
        return _err(f"start_line {start} is past the end of `{shown}` ({total} lines)")
    body = "".join(chunks)
    header = f"{shown} (lines {start}-{last_shown} of {total})"
    if len(body) > cap:  # a single line longer than the cap
        return ToolOutput(
            f"{header}\n{body[:cap]}\n[truncated: line {last_shown} alone is {len(body)} "
            f"characters; only its first {cap} are shown]"
        )
    out = f"{header}\n{body}"
    if truncated:
        out += (
            f"\n[truncated at {cap} characters: call read_file with "
            f"start_line={last_shown + 1} to read the rest]"
        )
    return ToolOutput(out)


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
    shown = _shown(ctx, args.path)
    bad = _SURROGATE.search(args.content)
    if bad is not None:
        return _err(
            f"content has a lone surrogate (U+{ord(bad.group()):04X}) at character "
            f"{bad.start()}: it is not valid Unicode text and cannot be stored as UTF-8; "
            f"nothing was written to `{shown}`"
        )
    if path.is_dir():
        return _err(f"`{shown}` is a directory; give a file path")
    data = args.content.encode("utf-8")
    try:
        existed = await files.off_loop(
            lambda: files.write_atomically(path, data, args.mode), deadline=None
        )
    except files.NotRegularFile as err:
        return files.not_regular_output(shown, err.kind)
    except (FileExistsError, NotADirectoryError) as err:
        if err.filename == str(path):
            return _err(f"`{shown}` already exists; use mode=overwrite or append")
        blocker = shown_path(err.filename, ctx.rtws)
        return _err(f"cannot write `{shown}`: `{blocker}` is not a directory")
    verb = {"overwrite": "overwrote" if existed else "created", "create": "created"}.get(
        args.mode, "appended to"
    )
    return ToolOutput(f"{verb} `{shown}` ({len(args.content)} characters written)")


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
    shown = _shown(ctx, args.path)
    if not path.exists():
        return _err(f"not found: `{shown}`")
    if not path.is_dir():
        return _err(f"`{shown}` is a file, not a directory; use read_file")
    listing = _Listing(lines=[], cap=LIST_CAP_ENTRIES)
    try:
        await files.off_loop(
            lambda: _walk_listing(ctx, path, args.depth, 0, listing),
            deadline=files.READ_DEADLINE_S,
        )
    except TimeoutError:
        return files.too_slow_output(shown)
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
# move / delete


class MoveArgs(ToolArgs):
    src: str = Field(description="Existing file or directory, rtws-relative.")
    dst: str = Field(description="New path, rtws-relative (the full target path, not a folder).")
    overwrite: bool = Field(default=False, description="Replace an existing destination file.")


async def move(args: MoveArgs, ctx: ToolContext) -> ToolOutput:
    # The source is read (its content moves on) and written (it disappears from here).
    resolve_entry(ctx, args.src, ctx.acl, "read")
    src = resolve_entry(ctx, args.src, ctx.acl, "write")
    dst = resolve_entry(ctx, args.dst, ctx.acl, "write")
    src_shown, dst_shown = _shown(ctx, args.src), _shown(ctx, args.dst)
    if not src.exists() and not src.is_symlink():
        return _err(f"not found: `{src_shown}`")
    if src == rtws_root(ctx):
        return _err("cannot move the rtws root")
    if dst == src or src in dst.parents:
        return _err(f"cannot move `{src_shown}` into itself (`{dst_shown}`)")
    src_is_dir = src.is_dir() and not src.is_symlink()
    if dst.exists() or dst.is_symlink():
        if not args.overwrite:
            return _err(f"`{dst_shown}` already exists; pass overwrite=true to replace it")
        if dst.is_dir() and not dst.is_symlink():
            return _err(f"`{dst_shown}` is an existing directory; delete it first or pick a path")
        if src_is_dir:
            return _err(f"cannot replace file `{dst_shown}` with directory `{src_shown}`")
    if src_is_dir:
        guard_subtree(ctx, args.src, src, ctx.acl, ("read", "write"), action="moved", landing=dst)

    await files.off_loop(lambda: _move_entry(src, dst), deadline=None)
    return ToolOutput(f"moved `{src_shown}` to `{dst_shown}`")


def _move_entry(src: Path, dst: Path) -> None:
    """Rename `src` to exactly `dst` (a file or link at `dst` is replaced; the caller has
    refused every other existing destination). Never "into" a directory `dst` points to,
    which `shutil.move` would do: that place was not the one the guard checked."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(src, dst)
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
        if dst.is_symlink() or dst.exists():  # across file systems: replace, then copy over
            dst.unlink()
        shutil.move(str(src), str(dst))


class DeleteArgs(ToolArgs):
    path: str = Field(description="File or directory to delete, rtws-relative.")
    recursive: bool = Field(
        default=False, description="Required to delete a directory and everything in it."
    )


async def delete(args: DeleteArgs, ctx: ToolContext) -> ToolOutput:
    path = resolve_entry(ctx, args.path, ctx.acl, "write")
    shown = _shown(ctx, args.path)
    if path == rtws_root(ctx):
        return _err("cannot delete the rtws root")
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
        return ToolOutput(f"deleted `{shown}`")
    if not path.exists():
        return _err(f"not found: `{shown}`")
    if not args.recursive:
        return _err(f"`{shown}` is a directory; pass recursive=true to delete it")
    guard_subtree(ctx, args.path, path, ctx.acl, ("write",), action="deleted")
    await files.off_loop(lambda: shutil.rmtree(path), deadline=None)
    return ToolOutput(f"deleted directory `{shown}` and its contents")


def fs_tools() -> list[Tool[Any]]:
    """Fresh Tool objects for the `fs` toolset."""
    return [
        Tool(
            "read_file",
            "Read a text file in the rtws, optionally a 1-based inclusive line range. "
            f"Output is capped at {READ_CAP_CHARS} characters. {ENCAPSULATION_NOTE}",
            ReadFileArgs,
            read_file,
        ),
        Tool(
            "write_file",
            "Write a text file in the rtws (overwrite, create or append); creates parent "
            "directories. The file is replaced whole or not at all. " + ENCAPSULATION_NOTE,
            WriteFileArgs,
            write_file,
        ),
        Tool(
            "list_dir",
            "List a directory of the rtws (sorted; directories end with /), up to 5 levels "
            f"deep. Taskdoc packages are shown but not entered. {ENCAPSULATION_NOTE}",
            ListDirArgs,
            list_dir,
        ),
        Tool(
            "search",
            "Search text files of the rtws with a regular expression; honours .gitignore, "
            f"skips binary files and .git. Results are `path:line: text`. {ENCAPSULATION_NOTE}",
            SearchArgs,
            search,
        ),
        Tool(
            "move",
            f"Move or rename a file or directory inside the rtws. {ENCAPSULATION_NOTE}",
            MoveArgs,
            move,
        ),
        Tool(
            "delete",
            "Delete a file, or a directory with recursive=true. " + ENCAPSULATION_NOTE,
            DeleteArgs,
            delete,
        ),
    ]
