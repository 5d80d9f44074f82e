"""Turn a single-file markdown Taskdoc into a `*.tsk` package, or refuse without writing.

The file's top-level headings (the shallowest ATX heading level used outside fenced code)
must each be Goals / Constraints / Progress (English or Chinese: 目标 / 约束 / 进展 or
进度), at most once each, with nothing but blank lines before the first. Deeper headings
stay inside their section's body, and bodies are copied verbatim (only the blank lines
around them are dropped). A file that is not UTF-8 is refused with the line. Anything else could not be mapped without loss, so it
is refused with the reason. The package is assembled in a hidden temp directory and
renamed into place, so a failure leaves nothing behind. The source file is left as is.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

from mindloop.errors import MindloopError, TaskPathError
from mindloop.taskdoc import fsio
from mindloop.taskdoc.package import PACKAGE_SUFFIX, TaskPackage
from mindloop.taskdoc.sections import SECTION_SUFFIX, TOP_LEVEL

HEADING_ALIASES: dict[str, str] = {
    "goals": "goals",
    "goal": "goals",
    "目标": "goals",
    "constraints": "constraints",
    "constraint": "constraints",
    "约束": "constraints",
    "progress": "progress",
    "进展": "progress",
    "进度": "progress",
}

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class MigrationError(MindloopError):
    """The single-file Taskdoc cannot be turned into a package without loss."""


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, text) of ATX headings outside fenced code blocks."""
    out: list[tuple[int, int, str]] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        m = _FENCE_RE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        h = _HEADING_RE.match(line)
        if h:
            out.append((i, len(h.group(1)), (h.group(2) or "").strip()))
    return out


def _section_body(lines: list[str]) -> str:
    """The lines between two headings, verbatim but for surrounding blank lines (the
    indentation of the first line is kept: it can be meaning, e.g. an indented code
    block), with one final newline."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "".join(f"{line}\n" for line in lines[start:end])


def _read_utf8(src: Path, source: str) -> str:
    data = src.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise MigrationError(
            f"{source}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02x}); convert the "
            "file to UTF-8 first"
        ) from None


def split_sections(text: str, source: str = "<text>") -> dict[str, str]:
    """Map a single-file Taskdoc to {goals, constraints, progress} bodies, or refuse."""
    lines = text.splitlines()
    heads = _headings(lines)
    if not heads:
        raise MigrationError(f"{source}: no Goals/Constraints/Progress headings found")
    top = min(level for _, level, _ in heads)
    tops = [(i, t) for i, level, t in heads if level == top]
    first = tops[0][0]
    stray = next((n for n, line in enumerate(lines[:first]) if line.strip()), None)
    if stray is not None:
        raise MigrationError(
            f"{source}:{stray + 1}: content before the first heading cannot be mapped to a section"
        )
    bodies: dict[str, str] = {}
    for n, (i, title) in enumerate(tops):
        key = HEADING_ALIASES.get(title.rstrip(":：").strip().casefold())
        if key is None:
            raise MigrationError(
                f"{source}:{i + 1}: unknown top-level heading {title!r} "
                "(expected Goals/Constraints/Progress or 目标/约束/进展)"
            )
        if key in bodies:
            raise MigrationError(f"{source}:{i + 1}: duplicate section {title!r} ({key})")
        end = tops[n + 1][0] if n + 1 < len(tops) else len(lines)
        bodies[key] = _section_body(lines[i + 1 : end])
    return {s: bodies.get(s, "") for s in TOP_LEVEL}


def migrate_single_file(
    rtws: Path | str, md_path: Path | str, dest: Path | str | None = None
) -> TaskPackage:
    """Create `dest` (default: `<file stem>.tsk` next to the file) from `md_path`."""
    root = Path(rtws).resolve()
    src = Path(md_path)
    src = (src if src.is_absolute() else root / src).resolve()
    try:
        src_rel = src.relative_to(root).as_posix()
    except ValueError:
        raise TaskPathError(f"{md_path}: the file to migrate must be inside the rtws") from None
    if not src.is_file():
        raise MigrationError(f"{src_rel}: not a file")
    if any(p.lower().endswith(PACKAGE_SUFFIX) for p in Path(src_rel).parts[:-1]):
        raise MigrationError(f"{src_rel}: is inside a Taskdoc package already")
    target = dest if dest is not None else Path(src_rel).with_suffix(PACKAGE_SUFFIX)
    pkg = TaskPackage(root, target)
    if os.path.lexists(pkg.path):
        raise MigrationError(f"{pkg.rel_path} already exists; choose another --dest")
    bodies = split_sections(_read_utf8(src, src_rel), src_rel)
    pkg.path.parent.mkdir(parents=True, exist_ok=True)
    staging = pkg.path.parent / f".{pkg.path.name}.{uuid.uuid4().hex}.migrating"
    try:
        staging.mkdir()
        for section, body in bodies.items():
            fsio.atomic_write(staging / f"{section}{SECTION_SUFFIX}", body)
        os.rename(staging, pkg.path)
        fsio.fsync_dir(pkg.path.parent)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return pkg
