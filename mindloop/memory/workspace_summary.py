"""The workspace summary: deliverable layout, build and test commands, the last green
`checked_ref` (agent-loop §7.3), written by PLAN (on entry, trigger 4) and CHECK (on a
pass, trigger 5) to `summaries(kind=workspace)`, read as the P3 section.

Typed, so its trim rule can keep the layout list (pinned) and drop detail first.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mindloop.memory.sections import Part, Section, SectionKind
from mindloop.memory.writeback import Fact, may_write
from mindloop.store import Store
from mindloop.store.summaries import Summaries, SummaryKind, SummaryRecord


class WorkspaceSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

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
    """The task's newest workspace summary, or None."""
    found = Summaries(store).latest(SummaryKind.WORKSPACE, task_path=task_path)
    return None if found is None else WorkspaceSummary.model_validate(found.data)
