"""One loop root per task (DESIGN.md §8.7): the task's loop state row and its root dialog.

`bind` returns the loop state of a `*.tsk` package, creating the loop root and the row on
first use in one transaction (SQLite takes the write lock at its start, so two processes
binding the same package at once make one root: the second finds the first's row; on
other databases the unique constraints turn the lost race into a conflict, and the
winner's row is read). Root dialogs opened with `mindloop chat --task` are untouched:
they stay free dialogs on the same package.
"""

from __future__ import annotations

import sqlalchemy as sa

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.store import loop_state as ls


def bind(rt: DialogRuntime, task_path: str, *, member: str | None = None) -> ls.LoopState:
    """The loop state of `task_path` (rtws-relative, or as users type it), its root made
    with `member` (default: the team's default responder) if it has none."""
    pkg = rt.context.package(task_path)
    found = ls.get(rt.store, pkg.rel_path)
    if found is not None:
        return found
    try:
        with rt.store.tx():
            found = ls.get(rt.store, pkg.rel_path)
            if found is not None:
                return found
            root = rt.create_root_dialog(pkg.rel_path, member, title="work loop")
            return ls.insert(rt.store, ls.LoopState(task_path=pkg.rel_path, root_id=root.id))
    except sa.exc.IntegrityError:
        won = ls.get(rt.store, pkg.rel_path)
        if won is None:
            raise
        return won
