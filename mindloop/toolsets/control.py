"""Dialog-control tools: reminders and `clear_mind` (course control).

Reminders belong to one dialog, survive new courses, and are rendered just before the
last user message of every generation. `clear_mind` starts a new course once the current
tool calls have finished: the history is cleared (and open questions of this dialog are
discarded) while reminders, the Taskdoc and the session registry stay.

The tools reach the dialog only through the context's typed services: `reminders` (this
dialog's list) and `course` (a request the engine reads after the step's tools). The
store-backed reminder service and the course switch the engine hands in live here too, so
the engine needs nothing but these names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from mindloop.i18n import Lang
from mindloop.store import Store
from mindloop.taskdoc import tool_description
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs

# The tools that change a dialog's reminders (clear_mind may add its continuation): the
# engine reloads the reminders it renders after a step that called one of them.
REMINDER_TOOLS = frozenset({"add_reminder", "update_reminder", "delete_reminder", "clear_mind"})


@dataclass(frozen=True)
class StoreReminders:
    """`ReminderService` of one dialog, kept in the store."""

    store: Store
    dialog_id: str

    def contents(self) -> list[str]:
        return [r.content for r in self.store.reminders(self.dialog_id)]

    def replace(self, contents: Sequence[str]) -> list[str]:
        return [r.content for r in self.store.set_reminders(self.dialog_id, contents)]


@dataclass
class CourseSwitch:
    """`CourseControl` of one dialog: `clear_mind` records its request here and the engine
    starts the new course once the step's tool calls have finished (`take`)."""

    # None: no new course requested; otherwise the reminder to keep ("" for none).
    pending: str | None = None

    def request_new_course(self, reminder: str | None) -> None:
        self.pending = (reminder or "").strip()

    def take(self) -> str | None:
        """The pending request (then cleared), or None."""
        pending, self.pending = self.pending, None
        return pending


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


_NO_REMINDERS = ToolOutput("Error: reminders are not available in this context.", is_error=True)


def _listing(contents: list[str]) -> str:
    if not contents:
        return "no reminders"
    return "reminders:\n" + "\n".join(f"{i}. {c}" for i, c in enumerate(contents, start=1))


async def _add(args: AddReminderArgs, ctx: ToolContext) -> ToolOutput:
    service = ctx.reminders
    if service is None:
        return _NO_REMINDERS
    if not args.content.strip():
        return ToolOutput("Error: reminder content is required (content).", is_error=True)
    contents = service.contents()
    if args.position > len(contents) + 1:
        return ToolOutput(
            f"Error: position {args.position} is out of range: there are {len(contents)} "
            f"reminder(s); use 1..{len(contents) + 1}, or 0 to append. Nothing was added.",
            is_error=True,
        )
    pos = args.position or len(contents) + 1
    contents.insert(pos - 1, args.content.strip())
    return ToolOutput(f"added reminder {pos}\n" + _listing(service.replace(contents)))


async def _update(args: UpdateReminderArgs, ctx: ToolContext) -> ToolOutput:
    service = ctx.reminders
    if service is None:
        return _NO_REMINDERS
    contents = service.contents()
    if args.reminder_no > len(contents):
        return ToolOutput(
            f"Error: no reminder {args.reminder_no} (there are {len(contents)}).", is_error=True
        )
    if not args.content.strip():
        return ToolOutput("Error: reminder content is required (content).", is_error=True)
    contents[args.reminder_no - 1] = args.content.strip()
    return ToolOutput(
        f"updated reminder {args.reminder_no}\n" + _listing(service.replace(contents))
    )


async def _delete(args: DeleteReminderArgs, ctx: ToolContext) -> ToolOutput:
    service = ctx.reminders
    if service is None:
        return _NO_REMINDERS
    contents = service.contents()
    if args.reminder_no > len(contents):
        return ToolOutput(
            f"Error: no reminder {args.reminder_no} (there are {len(contents)}).", is_error=True
        )
    del contents[args.reminder_no - 1]
    return ToolOutput(
        f"deleted reminder {args.reminder_no}\n" + _listing(service.replace(contents))
    )


async def _clear_mind(args: ClearMindArgs, ctx: ToolContext) -> ToolOutput:
    if ctx.course is None:
        return ToolOutput("Error: clear_mind needs a running dialog engine.", is_error=True)
    ctx.course.request_new_course((args.reminder_content or "").strip() or None)
    return ToolOutput(
        "A new course starts after this step: the conversation history is cleared; "
        "reminders, the Taskdoc and your side-dialog sessions are kept."
    )


def control_tools(lang: Lang = "en") -> list[Tool[Any]]:
    return [
        Tool(
            "add_reminder",
            "Add a reminder: short text shown to you before every reply, kept across courses.",
            AddReminderArgs,
            _add,
            "control",
        ),
        Tool(
            "update_reminder",
            "Replace the text of reminder number reminder_no.",
            UpdateReminderArgs,
            _update,
            "control",
        ),
        Tool(
            "delete_reminder",
            "Delete reminder number reminder_no.",
            DeleteReminderArgs,
            _delete,
            "control",
        ),
        Tool(
            "clear_mind",
            tool_description("clear_mind", lang),
            ClearMindArgs,
            _clear_mind,
            "control",
        ),
    ]
