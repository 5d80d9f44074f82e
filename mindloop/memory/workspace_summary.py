"""The workspace summary: deliverable layout, build and test commands, the last green
`checked_ref` (agent-loop §7.3), written by PLAN (on entry, trigger 4) and CHECK (on a
pass, trigger 5) to `summaries(kind=workspace)`, read as the P3 section.

Typed, so its trim rule can keep the layout list (pinned) and drop detail first. The
runtime writes it from what it knows, no model call: on PLAN entry the layout is the
artifacts the task's nodes recorded and the commands their criteria verify with; on a
CHECK pass it records the workspace ref the nodes passed at and the shell commands CHECK
ran. A summary that would not change is not written again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from mindloop.memory.sections import Part, Section, SectionKind
from mindloop.memory.writeback import Fact, may_write
from mindloop.store import MessageRecord, Store
from mindloop.store.memo import MISS
from mindloop.store.schema import summaries as _summaries_table
from mindloop.store.summaries import Summaries, SummaryKind, SummaryRecord
from mindloop.workspace.models import NodeKind, NodeStatus
from mindloop.workspace.state import WorkspaceState

COMMANDS_KEPT = 12  # the newest distinct commands a summary lists
LAYOUT_KEPT = 60  # deliverable paths listed at most
COMMAND_CHARS = 300  # of one command line
SHELL_TOOL = "run_shell"
_SUMMARIES = _summaries_table.name  # the table the kept summary comes from


class WorkspaceSummary(BaseModel):
    # frozen: the value read is kept and shared (`workspace_summary`); change a copy
    model_config = ConfigDict(extra="forbid", frozen=True)

    layout: list[str] = Field(default_factory=list)  # deliverable paths and what they are
    commands: list[str] = Field(default_factory=list)  # build and test commands
    checked_ref: str | None = None  # the last ref CHECK found green
    detail: list[str] = Field(default_factory=list)  # anything else, dropped first

    def text(self) -> str:
        lines = [f"layout: {', '.join(self.layout)}"] if self.layout else []
        lines += [f"command: {c}" for c in self.commands]
        if self.checked_ref:
            lines.append(f"last green checked_ref: {self.checked_ref}")
        return "\n".join([*lines, *self.detail])

    def section(self) -> Section:
        parts = []
        if self.layout:
            parts.append(Part(id="layout", text=f"layout: {', '.join(self.layout)}", pinned=True))
        if self.commands or self.checked_ref:
            lines = [f"command: {c}" for c in self.commands]
            if self.checked_ref:
                lines.append(f"last green checked_ref: {self.checked_ref}")
            parts.append(Part(id="commands", text="\n".join(lines), pinned=True))
        parts += [Part(id=f"detail-{i}", text=d) for i, d in enumerate(self.detail)]
        return Section(kind=SectionKind.WORKSPACE_SUMMARY, parts=tuple(parts))


def save_workspace_summary(
    store: Store, task_path: str, summary: WorkspaceSummary, *, writer: str
) -> SummaryRecord:
    """Append the task's workspace summary (joining the caller's transaction); only PLAN
    and CHECK write it."""
    refused = may_write(Fact.WORKSPACE_FACTS, writer)
    if refused is not None:
        raise PermissionError(refused)
    rec = SummaryRecord(
        task_path=task_path,
        kind=SummaryKind.WORKSPACE,
        writer=writer,
        text=summary.text(),
        data=summary.model_dump(mode="json"),
    )
    return Summaries(store).add(rec)


def workspace_summary(store: Store, task_path: str) -> WorkspaceSummary | None:
    """The task's newest workspace summary, or None. Kept while nothing wrote a summary
    (`Store.memo_get`): read at every phase entry's request and every CHECK pass, it
    changes only on a PLAN entry or a CHECK pass. Shared (a frozen value)."""
    key = (_SUMMARIES, "workspace", task_path)
    held = store.memo_get(key)
    if held is MISS:
        found = Summaries(store).latest(SummaryKind.WORKSPACE, task_path=task_path)
        held = None if found is None else WorkspaceSummary.model_validate(found.data)
        store.memo_put(key, held)
    return held  # type: ignore[no-any-return]


def _distinct(items: Iterable[str], keep: int) -> list[str]:
    """`items` without repeats (the last occurrence kept), the newest `keep`."""
    out: dict[str, None] = {}
    for item in items:
        item = " ".join(item.split())[:COMMAND_CHARS]
        if item:
            out.pop(item, None)
            out[item] = None
    return list(out)[-keep:]


def planned(ws: WorkspaceState, prior: WorkspaceSummary | None) -> WorkspaceSummary:
    """The summary PLAN's entry refreshes (trigger 4): the deliverables the task's nodes
    recorded as artifacts, the commands their criteria verify with (after those CHECK
    used), the last green ref kept."""
    prior = prior or WorkspaceSummary()
    nodes = [
        n
        for n, _ in ws.walk()
        if n.kind is NodeKind.EXECUTION and n.status is not NodeStatus.CANCELLED
    ]
    layout = _distinct((a for n in nodes for a in n.artifacts), LAYOUT_KEPT)
    verify = (c.verify for n in nodes for c in n.acceptance_criteria if c.verify)
    commands = _distinct([*prior.commands, *verify], COMMANDS_KEPT)
    return prior.model_copy(update={"layout": sorted(layout), "commands": commands})


def shell_commands(messages: Sequence[MessageRecord]) -> list[str]:
    """The shell commands among `messages`' tool calls, in order."""
    out = []
    for m in messages:
        if m.kind != "tool_call" or m.data.get("name") != SHELL_TOOL:
            continue
        try:
            args = json.loads(str(m.data.get("arguments") or "{}"))
        except ValueError:
            continue
        command = args.get("command") if isinstance(args, dict) else None
        if isinstance(command, str):
            out.append(command)
    return out


def checked(prior: WorkspaceSummary | None, ref: str, commands: Sequence[str]) -> WorkspaceSummary:
    """The summary a CHECK pass records (trigger 5): the ref its nodes passed at and the
    commands it ran."""
    prior = prior or WorkspaceSummary()
    merged = _distinct([*prior.commands, *commands], COMMANDS_KEPT)
    if prior.checked_ref == ref and merged == prior.commands:
        return prior  # (frozen: the same value, no copy; a pass at the same ref is usual)
    return prior.model_copy(update={"checked_ref": ref, "commands": merged})


def refresh_on_plan(store: Store, task_path: str, ws: WorkspaceState) -> SummaryRecord | None:
    """Trigger 4 (joins the caller's transaction): the written record, None when nothing
    changed (or there is nothing to say yet)."""
    prior = workspace_summary(store, task_path)
    new = planned(ws, prior)
    if new == (prior or WorkspaceSummary()):
        return None
    return save_workspace_summary(store, task_path, new, writer="PLAN")


def record_check_pass(
    store: Store, task_path: str, ref: str, messages: Sequence[MessageRecord]
) -> SummaryRecord | None:
    """Trigger 5 (joins the caller's transaction): the written record, None when nothing
    changed."""
    prior = workspace_summary(store, task_path)
    new = checked(prior, ref, shell_commands(messages))
    if new == (prior or WorkspaceSummary()):
        return None
    return save_workspace_summary(store, task_path, new, writer="CHECK")
