"""Dialog-control tools: reminders and `clear_mind` (course control).

Reminders belong to one dialog, survive new courses, and are rendered just before the
last user message of every generation. `clear_mind` starts a new course once the current
tool calls have finished: the history is cleared (and open questions of this dialog are
discarded) while reminders, the Taskdoc and the session registry stay.
"""

from __future__ import annotations

from pydantic import Field

from mindloop.i18n import Lang
from mindloop.store import Store
from mindloop.taskdoc import tool_description
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs


class AddReminderArgs(ToolArgs):
    content: str = Field(description="The reminder text.")
    position: int = Field(
        0, ge=0, description="1-based position to insert at; 0 or omitted appends."
    )


class UpdateReminderArgs(ToolArgs):
    reminder_no: int = Field(ge=1, description="The 1-based number of the reminder.")
    content: str = Field(description="The new text.")


class DeleteReminderArgs(ToolArgs):
    reminder_no: int = Field(ge=1, description="The 1-based number of the reminder.")


class ClearMindArgs(ToolArgs):
    reminder_content: str | None = Field(
        None,
        description="Optional continuation package kept as a reminder in the new course.",
    )


def _store(ctx: ToolContext) -> Store:
    return ctx.services["store"]  # type: ignore[no-any-return]


def _listing(store: Store, dialog_id: str) -> str:
    items = store.reminders(dialog_id)
    if not items:
        return "no reminders"
    return "reminders:\n" + "\n".join(f"{r.position}. {r.content}" for r in items)


async def _add(args: AddReminderArgs, ctx: ToolContext) -> ToolOutput:
    if not args.content.strip():
        return ToolOutput("Error: reminder content is required (content).", is_error=True)
    store = _store(ctx)
    contents = [r.content for r in store.reminders(ctx.dialog_id)]
    if args.position > len(contents) + 1:
        return ToolOutput(
            f"Error: position {args.position} is out of range: there are {len(contents)} "
            f"reminder(s); use 1..{len(contents) + 1}, or 0 to append. Nothing was added.",
            is_error=True,
        )
    pos = args.position or len(contents) + 1
    contents.insert(pos - 1, args.content.strip())
    store.set_reminders(ctx.dialog_id, contents)
    return ToolOutput(f"added reminder {pos}\n" + _listing(store, ctx.dialog_id))


async def _update(args: UpdateReminderArgs, ctx: ToolContext) -> ToolOutput:
    store = _store(ctx)
    contents = [r.content for r in store.reminders(ctx.dialog_id)]
    if args.reminder_no > len(contents):
        return ToolOutput(
            f"Error: no reminder {args.reminder_no} (there are {len(contents)}).", is_error=True
        )
    if not args.content.strip():
        return ToolOutput("Error: reminder content is required (content).", is_error=True)
    contents[args.reminder_no - 1] = args.content.strip()
    store.set_reminders(ctx.dialog_id, contents)
    return ToolOutput(f"updated reminder {args.reminder_no}\n" + _listing(store, ctx.dialog_id))


async def _delete(args: DeleteReminderArgs, ctx: ToolContext) -> ToolOutput:
    store = _store(ctx)
    contents = [r.content for r in store.reminders(ctx.dialog_id)]
    if args.reminder_no > len(contents):
        return ToolOutput(
            f"Error: no reminder {args.reminder_no} (there are {len(contents)}).", is_error=True
        )
    del contents[args.reminder_no - 1]
    store.set_reminders(ctx.dialog_id, contents)
    return ToolOutput(f"deleted reminder {args.reminder_no}\n" + _listing(store, ctx.dialog_id))


async def _clear_mind(args: ClearMindArgs, ctx: ToolContext) -> ToolOutput:
    runtime = ctx.services.get("runtime")
    if runtime is None:
        return ToolOutput("Error: clear_mind needs a running dialog engine.", is_error=True)
    runtime.request_new_course(ctx.dialog_id, (args.reminder_content or "").strip() or None)
    return ToolOutput(
        "A new course starts after this step: the conversation history is cleared; "
        "reminders, the Taskdoc and your side-dialog sessions are kept."
    )


# The tools that change a dialog's reminders (clear_mind may add its continuation): the
# engine reloads the reminders it renders after a step that called one of them.
REMINDER_TOOLS = frozenset({"add_reminder", "update_reminder", "delete_reminder", "clear_mind"})


def control_tools(lang: Lang = "en") -> list[Tool]:
    return [
        Tool(
            "add_reminder",
            "Add a reminder: short text shown to you before every reply, kept across courses.",
            AddReminderArgs,
            _add,  # type: ignore[arg-type]
            "control",
        ),
        Tool(
            "update_reminder",
            "Replace the text of reminder number reminder_no.",
            UpdateReminderArgs,
            _update,  # type: ignore[arg-type]
            "control",
        ),
        Tool(
            "delete_reminder",
            "Delete reminder number reminder_no.",
            DeleteReminderArgs,
            _delete,  # type: ignore[arg-type]
            "control",
        ),
        Tool(
            "clear_mind",
            tool_description("clear_mind", lang),
            ClearMindArgs,
            _clear_mind,  # type: ignore[arg-type]
            "control",
        ),
    ]
