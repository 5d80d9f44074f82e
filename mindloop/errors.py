"""Error types shared across mindloop.

Every user-facing error carries enough location to act on it (file, line, key path or
argument); the CLI prints `str(err)` on one line and exits non-zero.
"""

from __future__ import annotations


class MindloopError(Exception):
    """Base class for errors that are the user's to fix (printed without a traceback)."""

    exit_code = 1


class RtwsError(MindloopError):
    """The runtime workspace is missing or not initialised."""


class TaskPathError(MindloopError):
    """A task path is not a `*.tsk` directory inside the rtws."""


class NotFoundError(MindloopError):
    """A dialog, question or other record id does not exist."""
