"""Turn a single-file markdown Taskdoc into a `*.tsk` package, or refuse without writing.

The file's section headings are its shallowest ATX heading level used outside fenced
code — below a leading title, if the file starts with one: a heading of a higher level
that is the file's first line with text and its only heading of that level (`# Login`
above `## Goals`). The title, and any text under it before the first section, open
goals.md (the title as a bold line), so nothing of it is lost.

Each section heading maps to a section file:
- Goals / Constraints / Progress (English or Chinese: 目标 / 约束 / 进展 or 进度), at most
  once each, to the top-level sections; at least one of them must be present;
- Contracts / Acceptance / Grants / Runbook / Decisions / Risks to `bearinmind/<name>.md`;
- any other heading to an extra section `extra/<slug>.md` (a slug of the heading; the
  heading itself opens the file when the slug cannot spell it, e.g. Chinese text).
Deeper headings stay inside their section's body, and bodies are copied verbatim (only
the blank lines around them are dropped). Without a title, text before the first heading
is refused with its line, as is a file that is not UTF-8. The package is assembled in a
hidden temp directory and renamed into place, so a failure leaves nothing behind. The
source file is left as is.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

from pydantic import BaseModel

from mindloop.errors import MindloopError, TaskPathError
from mindloop.taskdoc import fsio
from mindloop.taskdoc.package import PACKAGE_SUFFIX, TaskPackage
from mindloop.taskdoc.sections import (
    BEARINMIND,
    BEARINMIND_DIR,
    SECTION_SUFFIX,
    TOP_LEVEL,
    is_identifier,
)

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

# The category of sections whose heading names no known section.
EXTRA_CATEGORY = "extra"

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


class MappedSection(BaseModel):
    """Where one heading of the file went."""

    heading: str
    line: int  # 1-based line of the heading in the file
    section: str  # package-relative file, e.g. `constraints.md`, `extra/notes.md`


class MigrationPlan(BaseModel):
    """A single-file Taskdoc split into section files (package-relative path -> text)."""

    title: str | None = None
    files: dict[str, str]
    mapped: list[MappedSection]

    @property
    def extra(self) -> list[MappedSection]:
        """Sections that are neither top-level nor bearinmind ones."""
        return [m for m in self.mapped if m.section.startswith(f"{EXTRA_CATEGORY}/")]


def _key(title: str) -> str:
    return title.rstrip(":：").strip().casefold()


def _slug(title: str) -> str:
    """A section selector spelling `title` (`Open questions!` -> `open-questions`), or ""."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.casefold()).strip("-")
    slug = re.sub(r"^[^a-z]+", "", slug)[:64].strip("-")
    return slug if slug and is_identifier(slug) else ""


def _section_for(title: str, taken: set[str]) -> tuple[str, bool]:
    """The file for a section heading, and whether the heading must open its body (the
    file name cannot spell it)."""
    key = _key(title)
    top = HEADING_ALIASES.get(key)
    if top is not None:
        return f"{top}{SECTION_SUFFIX}", False
    if key in BEARINMIND:
        return f"{BEARINMIND_DIR}/{key}{SECTION_SUFFIX}", False
    slug = _slug(title)
    lossy = not slug or slug.replace("-", " ") != " ".join(re.findall(r"[a-z0-9]+", key))
    base = slug or "section"
    name, n = base, 1
    while f"{EXTRA_CATEGORY}/{name}{SECTION_SUFFIX}" in taken:
        n += 1
        name = f"{base}-{n}"
    return f"{EXTRA_CATEGORY}/{name}{SECTION_SUFFIX}", lossy


def _leading_title(
    lines: list[str], heads: list[tuple[int, int, str]]
) -> tuple[int, int, str] | None:
    """The file's title heading, if it has one (see the module doc)."""
    first_text = next((n for n, line in enumerate(lines) if line.strip()), None)
    i, level, title = heads[0]
    if first_text != i or len(heads) < 2 or _key(title) in HEADING_ALIASES:
        return None
    if any(lv <= level for _, lv, _ in heads[1:]):
        return None
    return heads[0]


def plan_migration(text: str, source: str = "<text>") -> MigrationPlan:
    """Map a single-file Taskdoc to section files, or refuse (`MigrationError`)."""
    lines = text.splitlines()
    heads = _headings(lines)
    if not heads:
        raise MigrationError(f"{source}: no Goals/Constraints/Progress headings found")
    title = _leading_title(lines, heads)
    body_heads = heads[1:] if title is not None else heads
    top = min(level for _, level, _ in body_heads)
    tops = [(i, t) for i, level, t in body_heads if level == top]
    first = tops[0][0]
    intro = ""
    if title is None:
        stray = next((n for n, line in enumerate(lines[:first]) if line.strip()), None)
        if stray is not None:
            raise MigrationError(
                f"{source}:{stray + 1}: content before the first heading cannot be mapped to "
                "a section (a title heading above the sections can)"
            )
    else:
        intro = _section_body(lines[title[0] + 1 : first])
    files: dict[str, str] = {}
    mapped: list[MappedSection] = []
    for n, (i, heading) in enumerate(tops):
        rel, lossy = _section_for(heading, set(files))
        if rel in files:
            raise MigrationError(f"{source}:{i + 1}: duplicate section {heading!r} ({rel})")
        end = tops[n + 1][0] if n + 1 < len(tops) else len(lines)
        body = _section_body(lines[i + 1 : end])
        if lossy:  # the file name cannot spell the heading: it opens the body
            body = f"# {heading}\n" + (f"\n{body}" if body else "")
        files[rel] = body
        mapped.append(MappedSection(heading=heading, line=i + 1, section=rel))
    present = [s for s in TOP_LEVEL if f"{s}{SECTION_SUFFIX}" in files]
    if not present:
        raise MigrationError(
            f"{source}: no Goals/Constraints/Progress section found (headings: "
            f"{', '.join(repr(t) for _, t in tops)})"
        )
    for s in TOP_LEVEL:
        files.setdefault(f"{s}{SECTION_SUFFIX}", "")
    if title is not None:
        goals = f"{TOP_LEVEL[0]}{SECTION_SUFFIX}"
        opening = f"**{title[2]}**\n" + (f"\n{intro}" if intro else "")
        files[goals] = opening + (f"\n{files[goals]}" if files[goals] else "")
    return MigrationPlan(title=title[2] if title else None, files=files, mapped=mapped)


def split_sections(text: str, source: str = "<text>") -> dict[str, str]:
    """The goals, constraints and progress bodies of a single-file Taskdoc, or refuse."""
    files = plan_migration(text, source).files
    return {s: files[f"{s}{SECTION_SUFFIX}"] for s in TOP_LEVEL}


def migrate_single_file(
    rtws: Path | str, md_path: Path | str, dest: Path | str | None = None
) -> TaskPackage:
    """Create `dest` (default: `<file stem>.tsk` next to the file) from `md_path`."""
    return migrate_file(rtws, md_path, dest)[0]


def migrate_file(
    rtws: Path | str, md_path: Path | str, dest: Path | str | None = None
) -> tuple[TaskPackage, MigrationPlan]:
    """`migrate_single_file`, also returning where each heading went."""
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
    plan = plan_migration(_read_utf8(src, src_rel), src_rel)
    pkg.path.parent.mkdir(parents=True, exist_ok=True)
    staging = pkg.path.parent / f".{pkg.path.name}.{uuid.uuid4().hex}.migrating"
    try:
        staging.mkdir()
        for rel, body in plan.files.items():
            (staging / rel).parent.mkdir(exist_ok=True)
            fsio.atomic_write(staging / rel, body)
        os.rename(staging, pkg.path)
        fsio.fsync_dir(pkg.path.parent)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return pkg, plan
