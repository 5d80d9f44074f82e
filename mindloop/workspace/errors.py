"""The workspace's errors: a stable code, the argument at fault, a sentence saying what to do.

A workspace error is raised before anything is written (the command checks, then
changes), so every one of them "changes nothing". Tools return the text to the model;
the CLI prints it on one line. `ILLEGAL_TRANSITION{from, to, by}` is the reference's
error for a transition outside the table.
"""

from __future__ import annotations

from mindloop.errors import MindloopError


class WorkspaceError(MindloopError):
    """A refused workspace command; `arg` names the argument at fault (if one is)."""

    def __init__(self, code: str, message: str, *, arg: str | None = None) -> None:
        self.code = code
        self.arg = arg
        self.message = message
        where = f"{arg}: " if arg else ""
        super().__init__(f"{code}: {where}{message}")


class IllegalTransition(WorkspaceError):
    def __init__(self, source: str, target: str, by: str, why: str) -> None:
        self.source, self.target, self.by = source, target, by
        super().__init__(
            "ILLEGAL_TRANSITION",
            f"{{from: {source}, to: {target}, by: {by}}}: {why}",
            arg="to",
        )


class StaleVersion(WorkspaceError):
    def __init__(self, node_id: str, expected: int, actual: int) -> None:
        self.expected, self.actual = expected, actual
        super().__init__(
            "STALE_VERSION",
            f"node {node_id} is at version {actual}, the write expected {expected}; "
            "read it again (node_get) and retry",
            arg="expected_version",
        )


class WriteConflict(MindloopError):
    """A node row moved on under a write that the session checked in the same
    transaction: not the caller's mistake but a race the transaction must not commit
    (it is rolled back whole). Deliberately not a `WorkspaceError`: nothing may catch it
    and go on writing in that transaction."""

    def __init__(self, node_id: str, expected: int) -> None:
        self.node_id, self.expected = node_id, expected
        super().__init__(
            f"WRITE_CONFLICT: node {node_id} is no longer at version {expected}; "
            "the transaction was rolled back"
        )
