"""A node's check report (agent-loop §5.4: "check failed, report attached"; §7.3: the
result of one node is its conclusion and `check_report_ref`).

The report is the worklog row of CHECK's verdict — the transition to DONE or
CHECK_FAILED (the rows with `Effect.REPORT`), which holds who checked, the verdict, its
reason, the checker's evidence and, for a pass, the workspace ref it passed at. The
worklog is never compacted and its rows are never changed, so the row is the report
without a copy: `check_report_ref` names it (`worklog:<row id>`, set when the row is
written, `repo.write`), and `node show` and `status` print it (`report_text`).
"""

from __future__ import annotations

from collections.abc import Iterable

from mindloop.workspace.models import LogEntry, Node

PREFIX = "worklog:"


def report_ref(row_id: int) -> str:
    """The `check_report_ref` of the worklog row `row_id`."""
    return f"{PREFIX}{row_id}"


def report_row_id(ref: str | None) -> int | None:
    """The worklog row a `check_report_ref` names (None: no report, or not a row)."""
    if not ref or not ref.startswith(PREFIX):
        return None
    tail = ref[len(PREFIX) :]
    return int(tail) if tail.isdigit() else None


def is_report(data: dict[str, object]) -> bool:
    """Whether a log row's data marks it as a check report (`moves.Moves._move`)."""
    return data.get("report") is True


def find_report(node: Node, entries: Iterable[LogEntry]) -> LogEntry | None:
    """The row `node.check_report_ref` names, among `entries` (the node's log)."""
    row_id = report_row_id(node.check_report_ref)
    if row_id is None:
        return None
    return next((e for e in entries if e.id == row_id), None)


def report_text(entry: LogEntry) -> str:
    """The report in one line: `FROM → TO by ACTOR: reason (evidence: …; ref …)`."""
    d = entry.data
    head = f"{d.get('from', '?')} → {d.get('to', '?')} by {d.get('by', '?')}: {d.get('reason', '')}"
    extra = []
    if d.get("evidence"):
        extra.append(f"evidence: {d['evidence']}")
    if d.get("ref"):
        extra.append(f"ref {d['ref']}")
    return head + (f" ({'; '.join(extra)})" if extra else "")
