"""Checks of the values written into a workspace: sizes, titles, section-safe text.

The limits are data (one table, used by the commands and by the tools' JSON schemas).
Multi-line fields end up as sections of `Info.md` (`## Requirement` …), whose body runs
to the next line starting `## `: such a line would split the section, so it is refused
(`###` and deeper headings are the way to structure a field, and are accepted). Titles
are single lines without path separators (they name the node's directory).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mindloop.workspace.errors import WorkspaceError

LIMITS: dict[str, int] = {
    "title": 100,
    "requirement": 5000,
    "notes": 5000,
    "conclusion": 5000,
    "reason": 1000,
    "evidence": 2000,
    "description": 200,
    "path": 500,
    "rule": 500,
    "quote": 2000,
    "query": 200,
    "skill": 60,
    "blocker": 500,
    "criterion_text": 500,
    "list": 50,  # entries of any list argument (deps, docs, criteria, artifacts …)
}

TITLE_FORBIDDEN = set('/\\:*?"<>|')
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
SECTION_BREAK = re.compile(r"^## ", re.MULTILINE)


def check_size(arg: str, value: str, limit_key: str) -> None:
    limit = LIMITS[limit_key]
    if len(value) > limit:
        raise WorkspaceError(
            "TOO_LONG", f"{len(value)} characters, at most {limit} are allowed", arg=arg
        )


def check_list(arg: str, values: Sequence[object]) -> None:
    if len(values) > LIMITS["list"]:
        raise WorkspaceError(
            "TOO_MANY", f"{len(values)} entries, at most {LIMITS['list']} are allowed", arg=arg
        )


def line(arg: str, value: str, limit_key: str, *, required: bool = True) -> str:
    """A single-line text field, stripped; control characters and newlines refused."""
    value = value.strip()
    if required and not value:
        raise WorkspaceError("EMPTY", "must not be empty", arg=arg)
    if "\n" in value or "\r" in value or _CONTROL.search(value):
        raise WorkspaceError("INVALID_TEXT", "must be a single line of text", arg=arg)
    check_size(arg, value, limit_key)
    return value


def title(arg: str, value: str) -> str:
    value = " ".join(value.split())
    if not value:
        raise WorkspaceError("INVALID_TITLE", "a title must not be empty", arg=arg)
    bad = sorted(TITLE_FORBIDDEN.intersection(value))
    if bad:
        raise WorkspaceError(
            "INVALID_TITLE",
            f"a title names the node's directory and may not contain {' '.join(bad)} "
            f"(none of {''.join(sorted(TITLE_FORBIDDEN))})",
            arg=arg,
        )
    if _CONTROL.search(value):
        raise WorkspaceError("INVALID_TITLE", "control characters are not allowed", arg=arg)
    check_size(arg, value, "title")
    return value


def text(arg: str, value: str, limit_key: str) -> str:
    """A multi-line text field (requirement, notes, conclusion): leading and trailing
    blank lines dropped, line ends normalised, a literal `\\n` read as a newline (what
    models write in JSON by mistake), no line starting `## `."""
    value = value.replace("\r\n", "\n").replace("\r", "\n").replace("\\n", "\n")
    value = value.strip("\n")
    if value.strip() == "":
        value = ""
    if _CONTROL.search(value.replace("\t", "")):
        raise WorkspaceError("INVALID_TEXT", "control characters are not allowed", arg=arg)
    m = SECTION_BREAK.search(value)
    if m:
        lineno = value.count("\n", 0, m.start()) + 1
        raise WorkspaceError(
            "INVALID_CONTENT",
            f"line {lineno} starts with '## ', which would end the section in Info.md; "
            "use '###' for a sub-heading",
            arg=arg,
        )
    check_size(arg, value, limit_key)
    return value
