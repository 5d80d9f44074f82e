"""`change_mind` and `recall_taskdoc` as mindloop function tools.

What they take from the `ToolContext`:
- `task_path`: rtws-relative path of the dialog tree's `*.tsk` package (required);
- `taskdoc_audit` (required for `change_mind`): applies a change with its audit record;
  the engine hands in `StoreTaskdocAudit` over its store;
- `root_member`: the maintainer named in the side-dialog error;
- `work_language`: language of the texts;
- `on_taskdoc_changed` (optional): called with the changed section after a successful
  change, so the engine can publish an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from mindloop.errors import MindloopError
from mindloop.i18n import Lang
from mindloop.store import Store
from mindloop.taskdoc import SectionError, TaskPackage, change_mind, recall_taskdoc
from mindloop.taskdoc.copy import tool_description
from mindloop.tools.base import TaskdocChangeOutcome, Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs

ROOT_ONLY_TOOLS: frozenset[str] = frozenset({"change_mind"})
TOOLSET = "taskdoc"


@dataclass(frozen=True)
class StoreTaskdocAudit:
    """`TaskdocAudit` over the store's audit log (see `mindloop.taskdoc.mind` for the
    crash-consistency order of record and file)."""

    store: Store

    def change_section(
        self,
        rtws: Path,
        task_path: str,
        *,
        selector: str,
        content: str,
        category: str | None,
        actor_member: str,
        actor_dialog: str,
        is_root: bool,
        maintainer: str,
        lang: Lang,
    ) -> TaskdocChangeOutcome:
        result = change_mind(
            TaskPackage(rtws, task_path),
            selector=selector,
            content=content,
            category=category,
            actor_member=actor_member,
            actor_dialog=actor_dialog,
            is_root=is_root,
            store=self.store,
            maintainer=maintainer,
            lang=lang,
        )
        return TaskdocChangeOutcome(ok=result.ok, text=result.text, section=result.section or "")


class ChangeMindArgs(ToolArgs):
    selector: str = Field(
        description=(
            "Target section. Top-level: goals|constraints|progress. Under "
            'category="bearinmind": contracts|acceptance|grants|runbook|decisions|risks. '
            "For other categories: any identifier."
        )
    )
    content: str = Field(description="The new, complete section content (replaces it whole).")
    category: str | None = Field(
        default=None,
        description=(
            "Optional category directory in the Taskdoc package; when present, selector "
            "targets <category>/<selector>.md."
        ),
    )


class RecallTaskdocArgs(ToolArgs):
    # Optional in the schema: a model asking for `goals` has no category to give, and the
    # answer it needs (top-level sections are always injected) must not be lost to a
    # missing-argument error; other selectors without one are told to give it.
    category: str | None = Field(
        default=None, description='Category directory, e.g. "bearinmind" or "ux".'
    )
    selector: str = Field(description='Section selector in that category, e.g. "risks".')


_NO_TASKDOC = "Error: No Taskdoc is bound to this dialog (no task path)."


async def _run_change_mind(args: ChangeMindArgs, ctx: ToolContext) -> ToolOutput:
    if not ctx.task_path:
        return ToolOutput(_NO_TASKDOC, is_error=True)
    if ctx.taskdoc_audit is None:
        return ToolOutput("Error: the Taskdoc audit store is not available.", is_error=True)
    try:
        outcome = ctx.taskdoc_audit.change_section(
            ctx.rtws,
            ctx.task_path,
            selector=args.selector,
            content=args.content,
            category=args.category,
            actor_member=ctx.member,
            actor_dialog=ctx.dialog_id,
            is_root=ctx.is_root,
            maintainer=ctx.maintainer,
            lang=ctx.work_language,
        )
    except MindloopError as exc:  # e.g. an invalid package path
        return ToolOutput(str(exc), is_error=True)
    if not outcome.ok:
        return ToolOutput(outcome.text, is_error=True)
    if ctx.on_taskdoc_changed is not None:
        ctx.on_taskdoc_changed(outcome.section)
    return ToolOutput(outcome.text)


async def _run_recall_taskdoc(args: RecallTaskdocArgs, ctx: ToolContext) -> ToolOutput:
    if not ctx.task_path:
        return ToolOutput(_NO_TASKDOC, is_error=True)
    try:
        text = recall_taskdoc(
            TaskPackage(ctx.rtws, ctx.task_path),
            category=args.category,
            selector=args.selector,
            lang=ctx.work_language,
            is_root=ctx.is_root,
            maintainer=ctx.maintainer,
        )
    except SectionError as exc:
        return ToolOutput(exc.text, is_error=True)
    except MindloopError as exc:
        return ToolOutput(str(exc), is_error=True)
    return ToolOutput(text)


def taskdoc_tools(lang: Lang = "en") -> list[Tool[Any]]:
    """The Taskdoc tools; the engine hides those in `ROOT_ONLY_TOOLS` from side dialogs."""
    return [
        Tool(
            name="change_mind",
            description=tool_description("change_mind", lang),
            args_model=ChangeMindArgs,
            run=_run_change_mind,
            toolset=TOOLSET,
        ),
        Tool(
            name="recall_taskdoc",
            description=tool_description("recall_taskdoc", lang),
            args_model=RecallTaskdocArgs,
            run=_run_recall_taskdoc,
            toolset=TOOLSET,
        ),
    ]
