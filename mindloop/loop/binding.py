"""One loop root per task (DESIGN.md §8.7): the task's `tasks` row and its root dialog,
made on first use by `loop.tasks.loop_root` (get-or-create across processes), with the
loop's state of it (`store.loop_state`). Root dialogs opened with `mindloop chat --task`
are untouched: they stay free dialogs on the same package."""

from __future__ import annotations

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop.tasks import loop_root
from mindloop.store import loop_state as ls


def bind(rt: DialogRuntime, task_path: str, *, member: str | None = None) -> ls.LoopState:
    """The loop state of `task_path`, its loop root made with `member` (default: the
    team's default responder) if it has none."""
    task = loop_root(rt, task_path, member=member)
    state = ls.get(rt.store, task.task_path)
    assert state is not None  # its row exists now
    return state
