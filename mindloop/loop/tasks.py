"""Tasks as the loop sees them: one loop root per `*.tsk` package (DESIGN.md §8.7).

`loop_root` binds a package to the root dialog its loop drives, creating that root on
first use, exactly once across processes: the read and the insert run in one write
transaction (SQLite holds the write lock from its start), and the unique constraints of
`tasks` turn a lost race on other databases into `TaskAlreadyBound`, after which the
winner's row is read. `post_to_task` does the same and stores the message in that
transaction too, so a new task's root never exists without the message it was made for.

Root dialogs opened with `mindloop chat --task` are untouched by any of this: they stay
free dialogs on the same package.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection
from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.errors import TaskPathError
from mindloop.store import MessageRecord, RouterCandidate, Store, TaskRecord, new_id
from mindloop.store.tasks import TaskAlreadyBound
from mindloop.taskdoc import TaskPackage, discover_packages
from mindloop.taskdoc.mind import record_created
from mindloop.taskdoc.package import DEFAULT_TASKS_DIR, PACKAGE_SUFFIX, slug_from_text

TOPIC_CHARS = 120
_GOALS = "goals.md"


def one_line(text: str, limit: int = TOPIC_CHARS) -> str:
    """The first non-empty line of `text`, without markdown heading marks, cut to
    `limit` characters."""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
    return ""


def package_topic(pkg: TaskPackage) -> str:
    """A task's topic as its package states it: the first line of goals.md, else the
    package's name."""
    goals = pkg.read_section_or_none(_GOALS) or ""
    return one_line(goals) or Path(pkg.rel_path).name.removesuffix(".tsk")


def loop_root(
    rt: DialogRuntime, task_path: str, *, member: str | None = None, topic: str | None = None
) -> TaskRecord:
    """The task of the package `task_path`, its loop root created (with `member`,
    default the team's default responder, and `topic`, default the package's) if it
    has none. Inside a caller's transaction it joins it; a lost race (possible only on a
    database without SQLite's write lock at the start of every transaction) then
    reaches the caller as `TaskAlreadyBound`, to retry in a new transaction."""
    pkg = rt.context.package(task_path)
    found = rt.store.task_by_path(pkg.rel_path)
    if found is not None:
        return found
    try:
        with rt.store.tx():
            return _bind(rt, pkg, member, topic)
    except TaskAlreadyBound:
        return _winner(rt.store, pkg)


def post_to_task(
    rt: DialogRuntime,
    task_path: str,
    text: str,
    *,
    member: str | None = None,
    topic: str | None = None,
    also: Callable[[TaskRecord, MessageRecord], None] | None = None,
) -> tuple[TaskRecord, MessageRecord]:
    """Post `text` to the loop root of `task_path` (created as `loop_root` does) and mark
    it to be driven. Root, binding, message and whatever `also` writes (e.g. the Router's
    decision) commit in one transaction, which must be the outermost: after a lost race
    it is rolled back and run again on the winner's root."""
    pkg = rt.context.package(task_path)
    for attempt in range(2):
        try:
            with rt.store.tx():
                task = rt.store.task_by_path(pkg.rel_path)
                if task is None:
                    task = _bind(rt, pkg, member, topic)
                else:
                    rt.store.touch_task(task.id)  # the most recently active, for the Router
                message = rt.post_user_message(task.root_id, text)
                if also is not None:
                    also(task, message)
            return task, message
        except TaskAlreadyBound:
            if attempt:  # the winner's row is read in the next transaction: not twice
                raise
    raise AssertionError("unreachable")


def _bind(rt: DialogRuntime, pkg: TaskPackage, member: str | None, topic: str | None) -> TaskRecord:
    """Under the write lock: the row, if another process made it, else a new root and
    row. `create_root_dialog` refuses a package that does not exist or an unknown
    member."""
    found = rt.store.task_by_path(pkg.rel_path)
    if found is not None:
        return found
    topic = one_line(topic or "") or package_topic(pkg)
    root = rt.create_root_dialog(pkg.rel_path, member, title=topic)
    return rt.store.insert_task(
        TaskRecord(id=new_id("t"), task_path=pkg.rel_path, root_id=root.id, topic=topic)
    )


def _winner(store: Store, pkg: TaskPackage) -> TaskRecord:
    found = store.task_by_path(pkg.rel_path)
    if found is None:  # the conflict was on the root id: cannot happen with fresh ids
        raise TaskAlreadyBound(f"{pkg.rel_path}: its loop root could not be bound")
    return found


# ---------------------------------------------------------------- choosing and creating


def task_candidates(
    store: Store, rtws: Path, *, limit: int, exclude: Collection[str] = ()
) -> list[RouterCandidate]:
    """The tasks a message may be routed to, most recently active first: every task with
    a loop root whose package still exists, and every package without one yet (its
    activity is its newest section's time), minus `exclude` (e.g. the KB's package)."""
    skip = set(exclude)
    found: list[RouterCandidate] = []
    bound: set[str] = set()
    for task in store.iter_tasks():
        bound.add(task.task_path)
        if task.task_path in skip or not (rtws / task.task_path).is_dir():
            continue
        found.append(
            RouterCandidate(
                task=task.task_path,
                topic=task.topic,
                status=task.status,
                updated_at=task.updated_at,
            )
        )
    for path in discover_packages(rtws):
        if path in bound or path in skip:
            continue
        pkg = TaskPackage(rtws, path)
        found.append(
            RouterCandidate(task=path, topic=package_topic(pkg), updated_at=_activity(pkg))
        )
    found.sort(key=lambda c: (-(c.updated_at or 0.0), c.task))
    return found[:limit]


def _activity(pkg: TaskPackage) -> float | None:
    times = [st.st_mtime for rel in (_GOALS,) if (st := pkg.section_stat(rel)) is not None]
    return max(times, default=None)


def create_task_package(
    rtws: Path,
    store: Store,
    slug: str,
    goal: str,
    *,
    actor: str,
    reserved: Collection[str] = (),
) -> TaskPackage:
    """A new package `tasks/<slug>.tsk/` with `goal` as goals.md, made as `mindloop task
    new` makes one (its sections audited as created by `actor`). The slug is reduced to
    lowercase words joined by `-`; one in use, or `reserved` (package paths kept for
    other uses, e.g. the KB's), gets the first free `-2`, `-3` … suffix."""
    base = slug_from_text(slug)
    for n in itertools.count(1):
        name = base if n == 1 else f"{base}-{n}"
        if f"{DEFAULT_TASKS_DIR}/{name}{PACKAGE_SUFFIX}" in reserved:
            continue
        try:
            pkg = TaskPackage.create(rtws, name, goal=goal)
        except TaskPathError:
            if (rtws / DEFAULT_TASKS_DIR / f"{name}{PACKAGE_SUFFIX}").exists():
                continue  # taken (perhaps just now, by another process)
            raise
        record_created(pkg, store, actor)
        return pkg
    raise AssertionError("unreachable")
