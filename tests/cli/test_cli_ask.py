"""`mindloop ask MESSAGE` end to end (DESIGN.md §8.6, §8.8): the Router picks a task or
creates one, its decision is printed and recorded, the message goes to that task's loop
root (one per task, across processes) and the task's work loop runs on it, with chat's
exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mindloop.store import Store
from tests.dialogs.procs import Procs, read_store
from tests.loop.router_util import route
from tests.scenario_util import ml, write_script

EXAMPLE = "tasks/example.tsk"


def _project(tmp_path: Path, extra: list[dict[str, Any]] | None = None) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(
        proj,
        [
            *(extra or []),
            route(
                match="login",
                create_new_task=True,
                new_task_slug="login",
                new_task_topic="Users can log in",
                quick_reply="Starting a login task.",
            ),
            route(match="readme", target_task_id=EXAMPLE, reason="The example task is the README."),
            route(
                match="which colour",
                target_task_id=EXAMPLE,
                should_reply_user=False,
                quick_reply="x",
            ),
            {"contains": "login", "response": "Login form drafted."},
            {"contains": "readme", "response": "README checked."},
            {"contains": "which colour", "response": "!?@human Which colour?\n"},
            # a message that arrives while another phase runs gets a PLAN entry of its own,
            # after that phase's answer (its text is then not in the request's last message)
            {"contains": "a new message from the user", "response": "README checked."},
        ],
    )
    return proj


def _json(*args: str, cwd: Path, code: int = 0) -> Any:
    out = ml(*args, "--json", cwd=cwd)
    assert out.returncode == code, out.stdout[-3000:] + out.stderr
    return json.loads(out.stdout)


def _decisions(proj: Path) -> list[Any]:
    return read_store(proj, lambda s: s.router_decisions())


def test_ask_creates_a_task_then_continues_existing_ones(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    out = ml("ask", *c, "build the login page", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "router: new task tasks/login.tsk — Users can log in" in out.stdout
    assert "@router: Starting a login task." in out.stdout
    assert "@dev: Login form drafted." in out.stdout
    goals = (proj / "tasks" / "login.tsk" / "goals.md").read_text()
    assert goals.startswith("# Users can log in") and "build the login page" in goals

    again = _json("ask", *c, "more login work please", cwd=tmp_path)  # creates login-2
    assert again["created_task"] == "tasks/login-2.tsk" and again["answer"] == "Login form drafted."

    readme = _json("ask", *c, "check the readme", cwd=tmp_path)
    assert readme["outcome"] == "done" and readme["exit_code"] == 0
    assert readme["created_task"] is None and readme["task"]["task_path"] == EXAMPLE
    assert readme["routing"]["decision"]["reason"] == "The example task is the README."
    assert readme["reply"] is None and readme["answer"] == "README checked."
    loop_root = readme["task"]["root_id"]
    assert readme["root_id"] == loop_root

    second = _json("ask", *c, "check the readme again", cwd=tmp_path)
    assert second["root_id"] == loop_root  # one loop root per task

    # every run recorded with its input, candidates, decision and usage
    first, _more, rd, rd2 = _decisions(proj)
    assert (
        first.status == "accepted" and first.created_task and first.task_path == "tasks/login.tsk"
    )
    assert [c.task for c in first.candidates] == [EXAMPLE]
    assert first.decision.new_task_slug == "login" and first.input_tokens
    assert {c.task for c in rd.candidates} == {EXAMPLE, "tasks/login.tsk", "tasks/login-2.tsk"}
    assert (rd.task_path, rd.root_id, rd.created_task) == (EXAMPLE, loop_root, False)
    assert rd2.candidates[0].task == EXAMPLE  # the most recently active task comes first

    # `chat --task` still opens a free root beside the loop root
    chat = _json("chat", *c, "-t", EXAMPLE, "check the readme", cwd=tmp_path)
    assert chat["root_id"] != loop_root
    tasks = read_store(proj, lambda s: {t.task_path: t.root_id for t in s.iter_tasks()})
    assert tasks[EXAMPLE] == loop_root
    # the task's work loop ran on its loop root: the user's messages, each planned
    history = read_store(proj, lambda s: s.load_history(loop_root))
    said = [m.data["text"] for m in history if m.kind == "user" and "loop" not in m.data]
    assert said == ["check the readme", "check the readme again"]
    phases = [m.data["loop"]["phase"] for m in history if "loop" in m.data]
    assert phases == ["PLAN", "SELF_IMPROVE", "PLAN", "SELF_IMPROVE"]
    assert "README checked." in [m.data.get("text") for m in history if m.kind == "assistant"]


def test_ask_exits_4_when_the_task_waits_on_the_human(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    out = ml("ask", "-C", str(proj), "which colour should we use", cwd=tmp_path)
    assert out.returncode == 4, out.stdout + out.stderr
    assert "@router:" not in out.stdout  # should_reply_user: false
    assert (
        "router: task tasks/example.tsk" in out.stdout
        and "answer with: mindloop answer" in out.stdout
    )


def test_a_router_that_keeps_guessing_fails_and_posts_nothing(tmp_path: Path) -> None:
    proj = _project(tmp_path, [route(match="guess", target_task_id="tasks/guessed.tsk")])
    out = ml("ask", "-C", str(proj), "guess the task", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.startswith("error: the Router gave no acceptable decision in 3 call(s)")
    assert "'tasks/guessed.tsk' is not the id of a listed task" in out.stderr
    assert "nothing was posted" in out.stderr and "Traceback" not in out.stderr
    [failed] = _decisions(proj)
    assert failed.status == "failed" and failed.decision is None and len(failed.attempts) == 3
    assert read_store(proj, lambda s: (s.list_dialogs(), list(s.iter_tasks()))) == ([], [])


def test_refused_input_writes_nothing(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    out = ml("ask", "-C", str(proj), "  ", cwd=tmp_path)
    assert out.returncode == 1 and "the message is empty" in out.stderr
    team = proj / ".minds" / "team.yaml"
    team.write_text(team.read_text() + "loop:\n  router: {member: ghost}\n")
    out = ml("ask", "-C", str(proj), "build the login page", cwd=tmp_path)
    assert out.returncode == 1 and "loop.router.member: 'ghost' is not a member" in out.stderr
    assert not (proj / ".mindloop").exists()


def test_two_processes_asking_about_one_task_share_its_loop_root(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    procs = Procs(proj, tmp_path / "logs")
    try:
        started = [procs.start("ask", f"check the readme ({i})") for i in range(2)]
        for p in started:
            assert procs.finish(p, 120) == 0, p.output()
    finally:
        procs.close()

    def read(s: Store) -> tuple[list[str], list[str | None]]:
        [task] = list(s.iter_tasks())
        roots = [d.id for d in s.list_dialogs() if d.kind == "root"]
        history = s.load_history(task.root_id)
        return roots, [
            m.data.get("text") for m in history if m.kind == "user" and "loop" not in m.data
        ]

    roots, asked = read_store(proj, read)
    assert len(roots) == 1
    assert sorted(asked) == ["check the readme (0)", "check the readme (1)"]  # type: ignore[type-var]
