"""The Router asks which task should continue (agent-loop §3, audit item 14): `ask` with
a message that fits two listed tasks stops with exit 4 and the question; `questions`
lists it; `answer` with an option's number or id posts the message to that task and runs
its loop as `run TASK` does; a wrong choice is refused naming the choices, and a second
answer finds the question closed."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli_loop import SCRIPT
from tests.loop.router_util import project, route
from tests.scenario_util import ml

LOGIN, OAUTH = "tasks/login.tsk", "tasks/oauth.tsk"


def test_ask_asks_which_task_and_the_answer_runs_the_chosen_tasks_loop(
    tmp_path: Path,
) -> None:
    which = route(
        match="continue the sign-in work",
        ask_which_task=True,
        question="The login page or the OAuth work?",
        options=[LOGIN, OAUTH],
        reason="both are about signing in",
    )
    proj = project(
        tmp_path, [which, *SCRIPT], {"login": "Users can log in", "oauth": "Sign in with OAuth"}
    )
    c = ("-C", str(proj))
    asked = ml("ask", "continue the sign-in work", *c, cwd=tmp_path)
    assert asked.returncode == 4, asked.stdout + asked.stderr
    assert "router: question route-" in asked.stdout
    assert "The login page or the OAuth work?" in asked.stdout
    assert f"1. {LOGIN} — Users can log in" in asked.stdout and f"2. {OAUTH}" in asked.stdout
    assert "answer with: mindloop answer" in asked.stdout
    [q] = json.loads(ml("questions", "--json", *c, cwd=tmp_path).stdout)
    assert q["kind"] == "route" and q["message"] == "continue the sign-in work"
    assert [o["task"] for o in q["options"]] == [LOGIN, OAUTH]
    table = ml("questions", *c, cwd=tmp_path, env={"COLUMNS": "80"})
    assert q["id"] in table.stdout and OAUTH in table.stdout
    for task in (LOGIN, OAUTH):  # nothing was posted yet
        assert json.loads(ml("status", task, "--json", *c, cwd=tmp_path).stdout)["bound"] is False

    wrong = ml("answer", q["id"], "tasks/nope.tsk", *c, cwd=tmp_path)
    assert wrong.returncode == 1 and f"1 {LOGIN}, 2 {OAUTH}" in wrong.stderr, wrong.stderr
    out = ml("answer", q["id"], "2", *c, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert "━━ PLAN (entry 1)" in out.stdout and f"task {OAUTH}: done" in out.stdout
    st = json.loads(ml("status", OAUTH, "--json", *c, cwd=tmp_path).stdout)
    assert st["status"] == "DONE"
    assert json.loads(ml("status", LOGIN, "--json", *c, cwd=tmp_path).stdout)["bound"] is False
    again = ml("answer", q["id"], "1", *c, cwd=tmp_path)
    assert again.returncode == 1 and "answered, not open" in again.stderr
    assert json.loads(ml("questions", "--json", *c, cwd=tmp_path).stdout) == []
