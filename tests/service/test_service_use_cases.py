"""The use cases through the Python API, on scripted models: what each checks before
anything is written, what it writes, and what the report of a run says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mindloop import service
from mindloop.errors import MindloopError, NotFoundError, RtwsError
from mindloop.rtws import init_rtws
from mindloop.taskdoc import InvalidTaskdocPath
from mindloop.testing import ScriptedModel, Turn, call
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    init_rtws(root, provider="mock")
    return root


def _project(rtws: Path, *turns: object, max_steps: int = 50) -> service.Project:
    return service.open_project(
        rtws,
        providers={"mock": ScriptedModel(list(turns))},
        max_steps=max_steps,  # type: ignore[arg-type]
    )


async def test_refused_input_writes_nothing(rtws: Path) -> None:
    project = _project(rtws)
    refusals: list[tuple[dict[str, str], type[Exception], str]] = [
        ({"task": "tasks/nope.tsk"}, MindloopError, "does not exist"),
        ({"task": "../x.tsk"}, InvalidTaskdocPath, "must be inside the rtws"),
        ({"task": "  "}, MindloopError, "the task is empty"),
        ({"task": TASK, "member": "ghost"}, MindloopError, "unknown member 'ghost'"),
    ]
    for kwargs, error, says in refusals:
        with pytest.raises(error, match=says):
            service.start_chat(project, "hi", **kwargs)
    with pytest.raises(MindloopError, match="the message is empty"):
        service.start_chat(project, " \n", task=TASK)
    with pytest.raises(NotFoundError, match="no dialog with id 'd-x'"):
        service.post(project, "d-x", "hi")
    with pytest.raises(NotFoundError, match="no question with id 'q4h-x'"):
        service.answer(project, "q4h-x", "yes")
    await project.aclose()
    assert not (rtws / ".mindloop").exists()
    assert sorted(p.name for p in (rtws / "tasks").iterdir()) == ["example.tsk"]


def test_a_directory_that_is_no_rtws_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RtwsError, match="does not exist"):
        service.open_project(tmp_path / "missing")
    with pytest.raises(RtwsError, match="is not a mindloop rtws"):
        service.list_dialogs(tmp_path)
    assert list(tmp_path.iterdir()) == []


async def test_chat_then_post_continues_the_same_root(rtws: Path) -> None:
    async with _project(rtws, "first answer", "second answer") as project:
        posted = service.start_chat(project, "one", task=TASK)
        assert posted.created_task is None and posted.tree == [posted.dialog]
        report = await service.run(project, root_id=posted.dialog.id)
        assert report.outcome is service.Outcome.DONE
        again = service.post(project, posted.dialog.id[:6], "two")
        assert again.dialog.id == posted.dialog.id
        report = await service.run(project, root_id=posted.dialog.id)
        assert report.last is not None and report.last.final_text == "second answer"
    shown = service.show_dialog(rtws, posted.dialog.id)
    assert [(m.kind, m.data.get("text")) for m in shown.messages] == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
        ("assistant", "second answer"),
    ]
    [summary] = service.list_dialogs(rtws, counts=True)
    assert (summary.id, summary.messages) == (posted.dialog.id, 4)
    assert service.list_dialogs(rtws, task="./tasks/example.tsk/")[0].messages is None


async def test_a_chat_without_a_task_gets_a_package_named_after_it(rtws: Path) -> None:
    shutil.rmtree(rtws / "tasks" / "example.tsk")
    async with _project(rtws, "ok") as project:
        posted = service.start_chat(project, "Fix the login page!")
    assert posted.created_task == "tasks/fix-the-login-page.tsk"
    assert posted.dialog.task_path == posted.created_task


async def test_posting_to_a_side_dialog_is_refused(rtws: Path) -> None:
    write_team(rtws, {"lead": {"toolsets": ["fs"]}, "helper": {"toolsets": ["fs"]}})
    model = ScriptedModel({"lead": ["!?@helper Hi.\n", "done"], "helper": ["hello"]})
    async with service.open_project(rtws, providers={"mock": model}) as project:
        posted = service.start_chat(project, "go", task=TASK)
        report = await service.run(project, root_id=posted.dialog.id)
        side = next(d for d in report.tree if d.kind == "side")
        with pytest.raises(MindloopError, match=f"{side.id} is a side dialog; chat with its root"):
            service.post(project, side.id, "psst")
    [nodes] = service.dialog_trees(rtws, side.id[:7])  # the tree holding that dialog
    assert [(n.dialog.member, n.depth, n.waiting_on) for n in nodes] == [
        ("lead", 0, 0),
        ("helper", 1, 0),
    ]
    assert service.dialog_trees(rtws, "tasks/example.tsk/") == [nodes]


async def test_a_step_limit_anywhere_in_the_tree_is_the_trees_outcome(rtws: Path) -> None:
    write_team(rtws, {"lead": {"toolsets": ["fs"]}, "worker": {"toolsets": ["fs"]}})
    looping = [Turn(tool_calls=[call("list_dir", path=".")]) for _ in range(3)]
    model = ScriptedModel({"lead": ["!?@worker Count the files.\n"], "worker": looping})
    async with service.open_project(rtws, providers={"mock": model}, max_steps=2) as project:
        posted = service.start_chat(project, "go", task=TASK)
        report = await service.run(project, root_id=posted.dialog.id)
    [limited] = report.step_limited
    assert report.member_of(limited.dialog_id) == "worker"
    assert report.last is not None and report.last.reason == "waiting"  # the root only waits
    assert report.outcome is service.Outcome.STEP_LIMIT


async def test_questions_make_the_outcome_waiting_and_answer_drives_on(rtws: Path) -> None:
    async with _project(
        rtws, "!?@human Which database?\n!?Postgres or SQLite?\n", "SQLite it is"
    ) as p:
        posted = service.start_chat(p, "go", task=TASK)
        report = await service.run(p, root_id=posted.dialog.id)
        assert report.outcome is service.Outcome.WAITING
        [q] = report.questions
        assert service.list_questions(rtws, task=TASK) == [q]
        answered = service.answer(p, q.id, "SQLite")
        assert answered == service.Answered(
            question_id=q.id, dialog_id=posted.dialog.id, root_id=posted.dialog.id
        )
        report = await service.run(p)
    assert report.outcome is service.Outcome.DONE and report.questions == []
    assert service.list_questions(rtws) == []


async def test_retry_drives_a_root_that_stopped_on_an_error_again(rtws: Path) -> None:
    from mindloop.testing import Failure

    async with _project(rtws, Turn(error=Failure(message="outage")), "recovered") as project:
        posted = service.start_chat(project, "go", task=TASK)
        report = await service.run(project, root_id=posted.dialog.id)
        assert report.outcome is service.Outcome.ERROR
        assert service.retry(project) == [posted.dialog.id]
        report = await service.run(project, root_id=posted.dialog.id)
        assert report.last is not None and report.last.final_text == "recovered"
        with pytest.raises(MindloopError, match="nothing to retry"):
            service.retry(project, posted.dialog.id)
        assert service.retry(project) == []


async def test_run_resumes_what_a_crash_left_running_once(rtws: Path) -> None:
    async with _project(rtws, "answer") as project:
        posted = service.start_chat(project, "go", task=TASK)
        store = project.runtime.store
        store.update_dialog(posted.dialog.id, status="running", needs_drive=False)  # a crash
    async with _project(rtws, "answer") as project:
        report = await service.run(project)
        assert report.resumed == [posted.dialog.id]
        assert [r.reason for r in report.drives] == ["done"]
        assert project.recover() == []  # once per project: nothing is running now
        again = await service.run(project)
        assert (again.resumed, again.drives) == ([], [])


async def test_listeners_hear_the_runtime_events(rtws: Path) -> None:
    seen: list[str] = []
    async with _project(rtws, "hi") as project:
        project.subscribe(lambda ev: seen.append(ev.type))
        posted = service.start_chat(project, "go", task=TASK)
        await service.run(project, root_id=posted.dialog.id)
    assert seen[0] == "dialog_created" and "text_chunk" in seen and seen[-1] == "drive_end"
