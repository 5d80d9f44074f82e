"""`service.message_task`: a message to a task's work loop without driving it (what the web
UI's task composer sends; `run_task(message=…)` posts the same way), then `run` on the
loop root runs the loop — also after the task ended DONE, as new scope (PLAN)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop import service
from mindloop.errors import MindloopError
from mindloop.rtws import init_rtws
from mindloop.store import STATE_DIR
from mindloop.testing import ScriptedModel

TASK = "tasks/example.tsk"


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    init_rtws(root, provider="mock")
    return root


def _project(rtws: Path, *turns: str) -> service.Project:
    return service.open_project(rtws, providers={"mock": ScriptedModel(list(turns))})


async def test_a_refused_message_writes_nothing(rtws: Path) -> None:
    async with _project(rtws) as project:
        refusals = [
            ((TASK, " \n"), "the message is empty"),
            (("tasks/nope.tsk", "go"), "tasks/nope.tsk does not exist"),
            (("  ", "go"), "the task is empty"),
        ]
        for (task, message), says in refusals:
            with pytest.raises(MindloopError, match=says):
                service.message_task(project, task, message)
        with pytest.raises(MindloopError, match="unknown member 'ghost'"):
            service.message_task(project, TASK, "go", member="ghost")
    assert not (rtws / STATE_DIR).exists()


async def test_the_message_goes_to_the_loop_root_and_run_runs_the_loop_also_after_done(
    rtws: Path,
) -> None:
    async with _project(rtws, "planned one", "reviewed one", "planned two", "two") as project:
        posted = service.message_task(project, f"./{TASK}/", "first scope")
        root = posted.dialog
        store = project.runtime.store
        task = store.task_by_path(TASK)
        assert task is not None and task.root_id == root.id  # the loop root, made now
        assert store.get_dialog(root.id).needs_drive  # nothing driven yet
        assert posted.message is not None and posted.message.data["text"] == "first scope"

        report = await service.run(project, root_id=root.id)  # the web's driver's call
        assert report.outcome is service.Outcome.DONE
        assert store.task_by_path(TASK).status == "DONE"  # type: ignore[union-attr]

        again = service.message_task(project, TASK, "second scope")
        assert again.dialog.id == root.id  # one loop root per task
        report = await service.run(project, root_id=root.id)
        assert report.outcome is service.Outcome.DONE
        texts = [
            str(m.data.get("text", "")).split("\n")[0]
            for m in store.load_history(root.id)
            if m.kind == "user"
        ]
    assert texts == [
        "first scope",
        "[work loop] Phase PLAN (entry 1).",
        "[work loop] Phase SELF_IMPROVE (entry 2).",
        "second scope",
        "[work loop] Phase PLAN (entry 3).",  # new scope after DONE: planned again
        "[work loop] Phase SELF_IMPROVE (entry 4).",
    ]


async def test_a_message_answers_the_tasks_only_open_question_and_goes_to_the_loop_otherwise(
    rtws: Path,
) -> None:
    """agent-loop §6.2: with exactly one question of the task's tree open, a plain message
    (`run TASK -m …`, the web's task composer) is its answer; with two, it guesses
    neither and goes to the loop as a message."""
    from mindloop.testing import Turn
    from tests.loop.loop_util import create, end

    model = ScriptedModel(
        [
            Turn(text="!?@human Which changelog format?\n"),  # PLAN asks
            Turn(tool_calls=[create("a"), end("DO")]),
            Turn(text="done"),
        ]
    )
    async with service.open_project(rtws, providers={"mock": model}) as project:
        report = await service.run_task(project, TASK, message="start")
        assert report.outcome is service.Outcome.WAITING
        [q] = project.runtime.store.open_questions()
        posted = service.message_task(project, TASK, "Keep a Changelog")
        assert posted.answered == q.id and posted.message is None
        answered = project.runtime.store.get_question(q.id)
        assert answered.status == "answered" and answered.answer == "Keep a Changelog"
        store = project.runtime.store
        for headline in ("one?", "two?"):  # two open: the message answers neither
            store.add_question(q.model_copy(update={"id": f"q4h-{headline}", "status": "open"}))
        posted = service.message_task(project, TASK, "a message")
        assert posted.answered is None and posted.message is not None
        assert len(store.open_questions()) == 2
