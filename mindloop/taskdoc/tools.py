"""`change_mind` and `recall_taskdoc` as mindloop function tools.

Services the dialog layer provides in `ToolContext.services`:
- `task_path` (required): rtws-relative path of the dialog tree's `*.tsk` package;
- `store` (required for `change_mind`): the `Store`, for the audit record;
- `root_member` (optional): the maintainer named in the side-dialog error;
- `work_language` (optional, "en"|"zh"): language of the texts;
- `on_taskdoc_changed` (optional): called with the `ChangeResult` after a successful
  change (sync or async), so the engine can publish an event.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel, Field

from mindloop.errors import MindloopError
from mindloop.i18n import Lang
from mindloop.store import Store
from mindloop.taskdoc.copy import tool_description
from mindloop.taskdoc.mind import change_mind, recall_taskdoc
from mindloop.taskdoc.package import TaskPackage
from mindloop.taskdoc.sections import SectionError
from mindloop.tools.base import Tool, ToolContext, ToolOutput

ROOT_ONLY_TOOLS: frozenset[str] = frozenset({"change_mind"})
TOOLSET = "taskdoc"


class ChangeMindArgs(BaseModel):
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


class RecallTaskdocArgs(BaseModel):
    category: str = Field(description='Category directory, e.g. "bearinmind" or "ux".')
    selector: str = Field(description='Section selector in that category, e.g. "risks".')


def _lang(ctx: ToolContext) -> Lang:
    return "zh" if ctx.services.get("work_language") == "zh" else "en"


def _package(ctx: ToolContext) -> TaskPackage:
    task_path = ctx.services.get("task_path")
    if not task_path:
        raise MindloopError("Error: No Taskdoc is bound to this dialog (no task path).")
    return TaskPackage(ctx.rtws, task_path)


async def _run_change_mind(args: BaseModel, ctx: ToolContext) -> ToolOutput:
    assert isinstance(args, ChangeMindArgs)
    lang = _lang(ctx)
    maintainer = ctx.services.get("root_member") or ctx.member
    try:
        pkg = _package(ctx)
    except MindloopError as exc:
        return ToolOutput(str(exc), is_error=True)
    store = ctx.services.get("store")
    if not isinstance(store, Store):
        return ToolOutput("Error: the Taskdoc audit store is not available.", is_error=True)
    result = change_mind(
        pkg,
        selector=args.selector,
        content=args.content,
        category=args.category,
        actor_member=ctx.member,
        actor_dialog=ctx.dialog_id,
        is_root=ctx.is_root,
        store=store,
        maintainer=maintainer,
        lang=lang,
    )
    if not result.ok:
        return ToolOutput(result.text, is_error=True)
    hook: Any = ctx.services.get("on_taskdoc_changed")
    if hook is not None:
        ret = hook(result)
        if inspect.isawaitable(ret):
            await ret
    return ToolOutput(result.text)


async def _run_recall_taskdoc(args: BaseModel, ctx: ToolContext) -> ToolOutput:
    assert isinstance(args, RecallTaskdocArgs)
    try:
        pkg = _package(ctx)
        text = recall_taskdoc(
            pkg,
            category=args.category,
            selector=args.selector,
            lang=_lang(ctx),
            is_root=ctx.is_root,
            maintainer=ctx.services.get("root_member") or ctx.member,
        )
    except SectionError as exc:
        return ToolOutput(exc.text, is_error=True)
    except MindloopError as exc:
        return ToolOutput(str(exc), is_error=True)
    return ToolOutput(text)


def taskdoc_tools(lang: Lang = "en") -> list[Tool]:
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
