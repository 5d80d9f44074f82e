"""One loop root per task (DESIGN.md §8.7): a package's loop root is created once, also
when processes ask at the same time; a message goes in with the root it creates; free
root dialogs (`chat --task`) stay free; the Router's candidates and new packages."""

from __future__ import annotations

import multiprocessing
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.errors import MindloopError
from mindloop.loop.tasks import (
    create_task_package,
    loop_root,
    package_topic,
    post_to_task,
    task_candidates,
)
from mindloop.store import Store, TaskStatus
from mindloop.taskdoc import TaskPackage
from tests.loop import task_race

TASK = "tasks/example.tsk"


@pytest.fixture
async def rt(rtws: Path) -> AsyncIterator[DialogRuntime]:
    runtime = DialogRuntime(rtws)
    yield runtime
    await runtime.aclose()


def test_the_loop_root_is_created_once_and_then_found(rt: DialogRuntime) -> None:
    first = loop_root(rt, "./tasks/example.tsk/")
    again = loop_root(rt, TASK)
    assert again == first and first.task_path == TASK
    assert first.status is TaskStatus.ACTIVE and first.phase is None
    assert first.topic == package_topic(rt.context.package(TASK))
    root = rt.store.get_dialog(first.root_id)
    assert (root.kind, root.task_path, root.member) == ("root", TASK, "dev")
    assert root.title == first.topic
    assert rt.store.task_by_root(root.id) == first


def test_free_roots_on_the_package_stay_free(rt: DialogRuntime) -> None:
    free, _ = rt.start_root_dialog(TASK, "hello")  # what `mindloop chat --task` does
    task = loop_root(rt, TASK)
    assert task.root_id != free.id and rt.store.task_by_root(free.id) is None
    other, _ = rt.start_root_dialog(TASK, "hello again")
    assert loop_root(rt, TASK) == task and other.id not in (free.id, task.root_id)


def test_posting_creates_the_root_with_its_message(rt: DialogRuntime) -> None:
    task, msg = post_to_task(rt, TASK, "start the work", topic="My topic")
    assert task.topic == "My topic" and msg.dialog_id == task.root_id
    assert [m.data["text"] for m in rt.store.load_history(task.root_id)] == ["start the work"]
    assert rt.store.get_dialog(task.root_id).needs_drive
    again, _ = post_to_task(rt, TASK, "more")
    assert again.root_id == task.root_id
    assert len(rt.store.load_history(task.root_id)) == 2


def test_a_failed_post_leaves_no_root_behind(rt: DialogRuntime) -> None:
    def fail(*_: object) -> None:
        raise RuntimeError("crash in the transaction")

    with pytest.raises(RuntimeError):
        post_to_task(rt, TASK, "start", also=fail)
    assert rt.store.task_by_path(TASK) is None and rt.store.list_dialogs() == []
    with pytest.raises(MindloopError, match="does not exist"):
        loop_root(rt, "tasks/missing.tsk")
    with pytest.raises(MindloopError, match="unknown member"):
        loop_root(rt, TASK, member="nobody")
    assert rt.store.list_dialogs() == []


@pytest.mark.parametrize("post", [False, True], ids=["loop_root", "post_to_task"])
def test_processes_racing_for_a_loop_root_all_get_the_same_one(rtws: Path, post: bool) -> None:
    Store.for_rtws(rtws).close()  # the schema exists before the race
    ctx = multiprocessing.get_context("spawn")
    n = 4
    start, results = ctx.Barrier(n), ctx.Queue()
    procs = [
        ctx.Process(
            target=task_race.race,
            args=(str(rtws), TASK, f"message {i}" if post else None, start, results),
        )
        for i in range(n)
    ]
    for p in procs:
        p.start()
    got = {results.get(timeout=120) for _ in procs}
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(got) == 1  # one task row, one root
    [(task_id, root_id)] = got
    store = Store.for_rtws(rtws)
    try:
        assert [d.id for d in store.list_dialogs()] == [root_id]  # no loser's root left over
        assert [t.id for t in store.iter_tasks()] == [task_id]
        texts = sorted(m.data["text"] for m in store.load_history(root_id))
        assert texts == ([f"message {i}" for i in range(n)] if post else [])
    finally:
        store.close()


def test_candidates_are_tasks_and_packages_newest_first(rt: DialogRuntime, rtws: Path) -> None:
    for slug, goal in (("login", "# Users can log in\n\nwith email"), ("kb", "the KB")):
        TaskPackage.create(rtws, slug, goal=goal)
    gone = TaskPackage.create(rtws, "gone", goal="removed later")
    loop_root(rt, "tasks/gone.tsk")
    for p in gone.path.iterdir():
        p.unlink()
    gone.path.rmdir()
    login = loop_root(rt, "tasks/login.tsk")
    found = task_candidates(rt.store, rtws, limit=10, exclude=["tasks/kb.tsk"])
    assert [c.task for c in found] == ["tasks/login.tsk", "tasks/example.tsk"]
    assert (found[0].topic, found[0].status) == ("Users can log in", TaskStatus.ACTIVE)
    assert found[0].updated_at == login.updated_at
    assert found[1].status is None  # no loop root yet
    assert [c.task for c in task_candidates(rt.store, rtws, limit=1)] == ["tasks/login.tsk"]


def test_a_new_package_is_made_as_task_new_makes_it(rt: DialogRuntime, rtws: Path) -> None:
    first = create_task_package(rtws, rt.store, "Dark Mode!", "Add a dark mode", actor="router")
    assert first.rel_path == "tasks/dark-mode.tsk"
    assert first.read_section("goals.md").strip() == "Add a dark mode"
    history = rt.store.taskdoc_history(first.rel_path)
    assert {h.section for h in history} >= {"goals.md", "constraints.md", "progress.md"}
    assert {h.actor_member for h in history} == {"router"}
    second = create_task_package(rtws, rt.store, "dark-mode", "Again", actor="router")
    assert second.rel_path == "tasks/dark-mode-2.tsk"
    assert first.read_section("goals.md").strip() == "Add a dark mode"  # untouched
    kb = create_task_package(rtws, rt.store, "kb", "x", actor="router", reserved=["tasks/kb.tsk"])
    assert kb.rel_path == "tasks/kb-2.tsk" and not (rtws / "tasks" / "kb.tsk").exists()
