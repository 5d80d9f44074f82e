"""Doc paths: what may be referenced (decision 8, statement 68).

A doc is an `http(s)` URL or a file inside the rtws. A file path is normalised (posix,
rtws-relative, no `.` parts) and must exist; it may not leave the rtws (`..`, an absolute
path, a symlink out) nor point into encapsulated state (`*.tsk/`, `.minds/`, `.mindloop/`),
which the path guard of the file tools decides, the same way for both. Anything else is
an error naming the argument and the path, and nothing is written.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from pathlib import Path

from mindloop.tools.base import Acl
from mindloop.tools.pathguard import AccessDenied, is_encapsulated, resolve_agent_path
from mindloop.workspace import fields
from mindloop.workspace.errors import WorkspaceError

URL = re.compile(r"^https?://[^\s<>]+$", re.IGNORECASE)

# (argument name, raw path) -> normalised path; raises WorkspaceError.
DocCheck = Callable[[str, str], str]


def is_url(path: str) -> bool:
    return URL.match(path) is not None


def normalise(arg: str, raw: str) -> str:
    """The syntactic check (no file system): what any doc path must look like."""
    value = fields.line(arg, raw, "path")
    if is_url(value):
        return value
    if "://" in value:
        raise WorkspaceError(
            "INVALID_DOC_PATH", f"{value!r}: only http(s) URLs are accepted", arg=arg
        )
    if "<" in value or ">" in value:
        raise WorkspaceError(
            "INVALID_DOC_PATH", f"{value!r}: a doc path may not contain '<' or '>'", arg=arg
        )
    if "\\" in value:
        raise WorkspaceError(
            "INVALID_DOC_PATH", f"{value!r}: use '/' as the separator, not '\\'", arg=arg
        )
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        raise WorkspaceError(
            "INVALID_DOC_PATH",
            f"{value!r}: give the path relative to the rtws, not an absolute one",
            arg=arg,
        )
    norm = posixpath.normpath(value)
    if norm == "." or norm == ".." or norm.startswith("../"):
        raise WorkspaceError(
            "INVALID_DOC_PATH", f"{value!r} is outside the rtws (through '..')", arg=arg
        )
    if is_encapsulated(norm):
        raise WorkspaceError(
            "INVALID_DOC_PATH",
            f"{value!r} points into encapsulated state (*.tsk/, .minds/, .mindloop/); "
            "a doc must be a project file or an http(s) URL",
            arg=arg,
        )
    return norm


def file_check(rtws: Path | str, acl: Acl | None = None) -> DocCheck:
    """The full check: syntax, then the file itself (inside the rtws, through symlinks
    too, readable under `acl`, existing)."""
    root = rtws if isinstance(rtws, Path) else Path(rtws)  # made for every command: kept

    def check(arg: str, raw: str) -> str:
        norm = normalise(arg, raw)
        if is_url(norm):
            return norm
        try:
            resolved = resolve_agent_path(root, norm, acl or Acl(), "read")
        except AccessDenied as exc:
            raise WorkspaceError("INVALID_DOC_PATH", f"{norm!r}: {exc}", arg=arg) from None
        if not resolved.is_file():
            what = "is a directory, not a file" if resolved.is_dir() else "does not exist"
            raise WorkspaceError("DOC_NOT_FOUND", f"{norm!r} {what} in the rtws", arg=arg)
        return norm

    return check
