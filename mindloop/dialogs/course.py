"""Courses: `clear_mind` ends a dialog's course and starts a new one.

The switch happens after the step's tool calls finished: the history of the new course
starts empty but for the new-course prompt (a side dialog's assignment is restated);
reminders stay (the continuation package, if any, is appended to them), sessions and the
Taskdoc stay, and open questions of the dialog are discarded. One transaction.
"""

from __future__ import annotations

from mindloop.dialogs.formats import NEW_COURSE_PROMPT
from mindloop.dialogs.history import History
from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.wait_kinds import Resolution, WaitKind, WaitOutcome
from mindloop.events.bus import EventBus
from mindloop.events.types import NoteAdded
from mindloop.store import Store
from mindloop.store.waits import cancel_waits_of


def start_new_course(store: Store, bus: EventBus, live: LiveDialog) -> None:
    rec = live.record
    reminder = live.course.take()
    course = rec.course + 1
    prompt = NEW_COURSE_PROMPT.format(course=course)
    if rec.assignment and rec.kind != "root":
        prompt = (
            "Your assignment:\n"
            + rec.assignment.get("headline", "")
            + rec.assignment.get("body", "")
            + "\n\n"
            + prompt
        )
    with store.tx():
        store.update_dialog(rec.id, course=course)
        if store.discard_questions(rec.id):  # their timeout records go with them
            cancelled = Resolution(outcome=WaitOutcome.CANCELLED, event={"why": "clear_mind"})
            cancel_waits_of(store, rec.id, WaitKind.USER_INPUT, cancelled.model_dump(mode="json"))
        if reminder:
            contents = [r.content for r in live.reminders] + [reminder]
            live.reminders = store.set_reminders(rec.id, contents)
        # marked as the runtime's (a work loop must not take it for the human's word)
        data = {"text": prompt, "new_course": course}
        stored = store.append_message(rec.id, "user", data, course=course)
    rec.course = course
    live.history = History([stored])
    bus.publish(NoteAdded(dialog_id=rec.id, text=f"new course #{course} started (clear_mind)"))
