"""A Taskdoc package (`*.tsk/` directory): where it is, what it holds, what is wrong with it.

Reading never creates anything: a missing package or section reads as empty, and only
`create` (the `mindloop task new` path) and `change_mind` write. Everything that lists
the package is sorted so the effective Taskdoc built from it is deterministic.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel

from mindloop.errors import TaskPathError
from mindloop.taskdoc import fsio
from mindloop.taskdoc.sections import (
    BEARINMIND,
    BEARINMIND_DIR,
    BEARINMIND_FILES,
    RUNTIME_MANAGED_DIRS,
    SECTION_SUFFIX,
    TOP_LEVEL,
    TOP_LEVEL_FILES,
    is_identifier,
)

PACKAGE_SUFFIX = ".tsk"
DEFAULT_TASKS_DIR = "tasks"
LAYOUT_SCAN_LIMIT = 2048
EXTRA_INDEX_LIMIT = 64
_SLUG_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]*(?:\.[a-zA-Z0-9_-]+)*")
_SLUG_WORD = re.compile(r"[a-z0-9]+")


def slug_from_text(text: str, max_words: int = 5) -> str:
    """A package slug from free text: `Fix the login page!` -> `fix-the-login-page`;
    `task` when nothing is left."""
    words = _SLUG_WORD.findall(text.lower())[:max_words]
    return "-".join(words)[:48].strip("-") or "task"


ViolationKind = Literal[
    "top_level_file_under_subdir",
    "bearinmind_file_outside_bearinmind",
    "bearinmind_extra_entry",
    "bearinmind_not_directory",
    "scan_limit_exceeded",
]
BearInMindState = Literal["absent", "present", "invalid"]


class Violation(BaseModel):
    """One layout violation; fixed by a human, reported in the Taskdoc and by `check`."""

    kind: ViolationKind
    found_at: str | None = None
    filename: str | None = None
    max_entries: int | None = None


class ExtraSection(BaseModel):
    category: str
    selector: str

    @property
    def rel(self) -> str:
        return f"{self.category}/{self.selector}{SECTION_SUFFIX}"


class ExtraSectionsIndex(BaseModel):
    entries: list[ExtraSection]
    truncated: bool = False


def is_package_name(name: str) -> bool:
    """A directory name that makes a Taskdoc package (case-insensitive, like the guard)."""
    return name.lower().endswith(PACKAGE_SUFFIX) and len(name) > len(PACKAGE_SUFFIX)


def _is_runtime_entry(name: str) -> bool:
    """Top-level package entries owned by the runtime: never sections, never violations."""
    return name.startswith(".") or name in RUNTIME_MANAGED_DIRS or not is_identifier(name)


def _sorted_scandir(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


class InvalidTaskdocPath(TaskPathError):
    """A Taskdoc path that is not a `*.tsk` directory inside the rtws (anchor code
    `TASKDOC_INVALID`); nothing is created for it."""

    code = "TASKDOC_INVALID"


class TaskPackage:
    """A validated `*.tsk` package path inside an rtws (the directory may not exist yet)."""

    def __init__(self, rtws: Path | str, rel_path: str | Path) -> None:
        self.rtws = Path(rtws).resolve()
        raw = str(rel_path)
        self.rel_path = self._validate(raw)
        self.path = self.rtws / self.rel_path

    def _validate(self, raw: str) -> str:
        def bad(why: str) -> InvalidTaskdocPath:
            return InvalidTaskdocPath(
                f"Invalid Taskdoc path '{raw}' ({InvalidTaskdocPath.code}): {why}"
            )

        if not raw.strip():
            raise bad("must be a directory ending in .tsk")
        candidate = Path(raw.strip())
        absolute = candidate if candidate.is_absolute() else self.rtws / candidate
        resolved = Path(os.path.realpath(absolute))
        try:
            rel = resolved.relative_to(self.rtws)
        except ValueError:
            raise bad("must be inside the rtws") from None
        parts = PurePosixPath(rel.as_posix()).parts
        if not parts or not is_package_name(parts[-1]):
            if resolved.is_file() and resolved.suffix.lower() == ".md":
                raise bad(
                    "must be a directory ending in .tsk; single-file Taskdocs are no longer "
                    f"supported: convert it with `mindloop taskdoc migrate {rel.as_posix()}`"
                )
            raise bad("must be a directory ending in .tsk")
        if any(is_package_name(p) for p in parts[:-1]):
            raise bad("must not be inside another Taskdoc package")
        if resolved.exists() and not resolved.is_dir():
            raise bad("must be a directory ending in .tsk (it exists and is not a directory)")
        return rel.as_posix()

    def __repr__(self) -> str:
        return f"TaskPackage({self.rel_path!r})"

    # ------------------------------------------------------------------ creation

    @classmethod
    def create(
        cls,
        rtws: Path | str,
        slug: str,
        goal: str | None = None,
        constraints: Iterable[str] = (),
        *,
        exist_ok: bool = False,
    ) -> TaskPackage:
        """Create `tasks/<slug>.tsk/` with the three required files (goal/constraints as given).

        Refuses an existing package unless `exist_ok`, in which case nothing is overwritten.
        """
        name = slug.strip()
        if name.lower().endswith(PACKAGE_SUFFIX):
            name = name[: -len(PACKAGE_SUFFIX)]
        if not _SLUG_RE.fullmatch(name):
            raise TaskPathError(
                f"Invalid task slug '{slug}': use letters, digits, '-', '_' and inner dots "
                "(e.g. 'login' or 'auth.login')"
            )
        pkg = cls(rtws, f"{DEFAULT_TASKS_DIR}/{name}{PACKAGE_SUFFIX}")
        if pkg.path.exists() and not exist_ok:
            raise TaskPathError(f"Taskdoc package {pkg.rel_path} already exists")
        pkg.path.mkdir(parents=True, exist_ok=True)
        bodies = {
            "goals": normalize_content(goal or ""),
            "constraints": normalize_content(
                "\n".join(f"- {c.strip()}" for c in constraints if c.strip())
            ),
            "progress": "",
        }
        for section in TOP_LEVEL:
            target = pkg.path / f"{section}{SECTION_SUFFIX}"
            if not target.exists():
                fsio.atomic_write(target, bodies[section])
        return pkg

    # ------------------------------------------------------------------ reading

    def exists(self) -> bool:
        return self.path.is_dir()

    def section_path(self, rel: str) -> Path:
        return self.path / rel

    def _plain_dirs_to(self, rel: str) -> bool:
        """Whether the package and every directory between it and `rel` are real
        directories: a symlinked package or category (`ux -> /elsewhere`) must not make
        a file outside the package readable as a section."""
        parts = PurePosixPath(rel).parts[:-1]
        current = self.path
        for part in ("", *parts):
            current = current / part if part else current
            try:
                if not stat.S_ISDIR(os.lstat(current).st_mode):
                    return False
            except OSError:
                return False
        return True

    def section_stat(self, rel: str) -> os.stat_result | None:
        """`lstat` of a section file that is a regular file reached without any symlink."""
        if not self._plain_dirs_to(rel):
            return None
        return fsio.regular_file_stat(self.path / rel)

    def section_exists(self, rel: str) -> bool:
        return self.section_stat(rel) is not None

    def read_section_or_none(self, rel: str) -> str | None:
        """The section's text, None when missing (or reached through a symlink)."""
        if not self._plain_dirs_to(rel):
            return None
        return fsio.read_text_or_none(self.path / rel)

    def read_section(self, rel: str) -> str:
        """The section's text, "" when missing (nothing is created)."""
        return self.read_section_or_none(rel) or ""

    def bearinmind_state(self) -> tuple[BearInMindState, list[str]]:
        """(`absent`|`present`|`invalid`, non-whitelisted entries under `bearinmind/`)."""
        bdir = self.path / BEARINMIND_DIR
        try:
            st = os.lstat(bdir)
        except OSError:
            return "absent", []
        if not stat.S_ISDIR(st.st_mode):
            return "invalid", []
        allowed = set(BEARINMIND_FILES)
        extras = [
            e.name
            for e in _sorted_scandir(bdir)
            if not e.name.startswith(".")
            and (e.name not in allowed or not e.is_file(follow_symlinks=False))
        ]
        return "present", extras

    def extra_sections(self, limit: int = EXTRA_INDEX_LIMIT) -> ExtraSectionsIndex:
        """Every `<category>/<selector>.md` that is a valid extra section, sorted, capped."""
        entries: list[ExtraSection] = []
        for cat in _sorted_scandir(self.path):
            if (
                cat.name == BEARINMIND_DIR
                or _is_runtime_entry(cat.name)
                or not cat.is_dir(follow_symlinks=False)
            ):
                continue
            for f in _sorted_scandir(Path(cat.path)):
                if not f.name.endswith(SECTION_SUFFIX) or not f.is_file(follow_symlinks=False):
                    continue
                sel = f.name[: -len(SECTION_SUFFIX)]
                if not is_identifier(sel) or sel in TOP_LEVEL or sel in BEARINMIND:
                    continue
                if len(entries) >= limit:
                    return ExtraSectionsIndex(entries=entries, truncated=True)
                entries.append(ExtraSection(category=cat.name, selector=sel))
        return ExtraSectionsIndex(entries=entries, truncated=False)

    def layout_violations(self, scan_limit: int = LAYOUT_SCAN_LIMIT) -> list[Violation]:
        """Reserved files in the wrong place and foreign entries in `bearinmind/`.

        Breadth-first over sorted entries (deterministic); runtime-managed top-level
        entries are skipped; symlinks are never followed. At most `scan_limit` entries are
        looked at, after which `scan_limit_exceeded` ends the list.
        """
        found: list[Violation] = []
        seen = 0
        queue: list[tuple[Path, str]] = [(self.path, "")]
        while queue:
            abs_dir, rel_dir = queue.pop(0)
            for entry in _sorted_scandir(abs_dir):
                if rel_dir == "" and entry.name != BEARINMIND_DIR and _is_runtime_entry(entry.name):
                    continue
                seen += 1
                if seen > scan_limit:
                    found.append(Violation(kind="scan_limit_exceeded", max_entries=scan_limit))
                    return found
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                in_bim = rel_dir == BEARINMIND_DIR
                if entry.is_dir(follow_symlinks=False):
                    if in_bim:
                        found.append(Violation(kind="bearinmind_extra_entry", found_at=rel))
                    queue.append((Path(entry.path), rel))
                    continue
                if rel == BEARINMIND_DIR:
                    found.append(Violation(kind="bearinmind_not_directory", found_at=rel))
                    continue
                foreign = entry.name not in BEARINMIND_FILES or not entry.is_file(
                    follow_symlinks=False
                )
                if in_bim and foreign and not entry.name.startswith("."):
                    found.append(Violation(kind="bearinmind_extra_entry", found_at=rel))
                if entry.name in TOP_LEVEL_FILES and rel_dir:
                    found.append(
                        Violation(
                            kind="top_level_file_under_subdir", filename=entry.name, found_at=rel
                        )
                    )
                if entry.name in BEARINMIND_FILES and not in_bim:
                    found.append(
                        Violation(
                            kind="bearinmind_file_outside_bearinmind",
                            filename=entry.name,
                            found_at=rel,
                        )
                    )
        return found


def normalize_content(text: str) -> str:
    """Section content as stored: trimmed, one final newline (empty stays empty)."""
    body = text.strip()
    return f"{body}\n" if body else ""
