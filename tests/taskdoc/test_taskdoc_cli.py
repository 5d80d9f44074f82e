"""`task new`, `tasks`, `taskdoc show [--history] [--json]`, `taskdoc migrate` via CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from taskdoc_testutil import tree_snapshot, write
from typer.testing import CliRunner

from mindloop.cli.taskdoc_cmds import task_app, taskdoc_app, tasks_command
from mindloop.errors import MindloopError
from mindloop.rtws import init_rtws
from mindloop.store import Store
from mindloop.taskdoc import TaskPackage, change_mind


def build_app(rtws: Path) -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = {"rtws": str(rtws)}

    app.add_typer(task_app, name="task")
    app.add_typer(taskdoc_app, name="taskdoc")
    app.command("tasks")(tasks_command)
    return app


def run(rtws: Path, *args: str) -> str:
    result = CliRunner().invoke(build_app(rtws), list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_task_new_and_tasks_listing(tmp_path: Path) -> None:
    out = run(
        tmp_path,
        "task",
        "new",
        "login",
        "--goal",
        "Users can log in",
        "--constraint",
        "MUST hash",
        "--constraint",
        "MUST rate-limit",
    )
    assert out.strip() == "tasks/login.tsk"
    pkg = tmp_path / "tasks" / "login.tsk"
    assert (pkg / "constraints.md").read_text() == "- MUST hash\n- MUST rate-limit\n"
    (tmp_path / "archive" / "old.tsk").mkdir(parents=True)
    write(tmp_path, ".taskdoc-ignore", "archive/\n")
    listing = run(tmp_path, "tasks")
    assert "tasks/login.tsk" in listing and "archive" not in listing
    assert "goals" in listing and "human" in listing


def test_task_new_refuses_existing(tmp_path: Path) -> None:
    run(tmp_path, "task", "new", "login")
    with pytest.raises(MindloopError, match="already exists"):
        CliRunner().invoke(build_app(tmp_path), ["task", "new", "login"], catch_exceptions=False)


def test_show_effective_and_last_updated(tmp_path: Path) -> None:
    run(tmp_path, "task", "new", "login", "--goal", "G")
    store = Store.for_rtws(tmp_path)
    pkg = TaskPackage(tmp_path, "tasks/login.tsk")
    change_mind(
        pkg,
        selector="constraints",
        content="- MUST x",
        actor_member="alice",
        actor_dialog="d-9",
        is_root=True,
        store=store,
    )
    store.close()
    model = run(tmp_path, "taskdoc", "show", "tasks/login.tsk", "--effective")
    assert "# Taskdoc (Dialog Tree)" in model and "- MUST x" in model
    assert "alice" not in model  # the model-facing text names no actor
    # The human view: each section under its file, with who changed it last and when.
    out = run(tmp_path, "taskdoc", "show", "tasks/login.tsk")
    assert "# Taskdoc (Dialog Tree)" not in out
    header = next(line for line in out.splitlines() if line.startswith("── constraints.md"))
    assert "by alice in dialog d-9" in header and "updated 20" in header
    assert out.index(header) < out.index("- MUST x") < out.index("── progress.md")
    data = json.loads(run(tmp_path, "taskdoc", "show", "tasks/login.tsk", "--json"))
    sections = {s["section"]: s for s in data["sections"]}
    assert sections["constraints.md"]["actor_member"] == "alice"
    assert sections["goals.md"]["actor_member"] == "human"
    # `task new` audits every section it creates, the empty ones too (issue part 7).
    assert sections["progress.md"]["actor_member"] == "human"
    assert sections["progress.md"]["changed_outside"] is False
    assert all(sections[f"{s}.md"]["recorded"] for s in ("goals", "constraints", "progress"))
    assert "## Constraints\n- MUST x" in data["effective"]


def test_show_history_newest_first_with_diffs(tmp_path: Path) -> None:
    run(tmp_path, "task", "new", "login")
    store = Store.for_rtws(tmp_path)
    pkg = TaskPackage(tmp_path, "tasks/login.tsk")
    for n, text in enumerate(["- a", "- a\n- b"]):
        change_mind(
            pkg,
            selector="constraints",
            content=text,
            actor_member=f"m{n}",
            actor_dialog=None,
            is_root=True,
            store=store,
        )
    (pkg.path / "constraints.md").write_text("- hand edit\n")
    change_mind(
        pkg,
        selector="constraints",
        content="- c",
        actor_member="m2",
        actor_dialog=None,
        is_root=True,
        store=store,
    )
    store.close()
    data = json.loads(
        run(tmp_path, "taskdoc", "show", "tasks/login.tsk", "--history", "constraints", "--json")
    )
    versions = data["versions"]
    # v1 is the empty file `task new` created.
    assert [v["version"] for v in versions] == [4, 3, 2, 1]
    assert [v["actor_member"] for v in versions] == ["m2", "m1", "m0", "human"]
    assert versions[3]["created"] and versions[3]["content_after"] == ""
    assert "+- b" in versions[1]["diff"] and "-- hand edit" in versions[0]["diff"]
    assert versions[0]["changed_outside_before"] and not versions[1]["changed_outside_before"]
    assert not versions[2]["changed_outside_before"]
    text = run(tmp_path, "taskdoc", "show", "tasks/login.tsk", "--history", "constraints")
    assert text.index("v4") < text.index("v3") < text.index("v2") < text.index("v1")
    assert "changed outside mindloop" in text and "(created empty)" in text


def test_show_errors(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    with pytest.raises(MindloopError, match="does not exist"):
        CliRunner().invoke(app, ["taskdoc", "show", "tasks/none.tsk"], catch_exceptions=False)
    with pytest.raises(MindloopError, match="Invalid Taskdoc path"):
        CliRunner().invoke(app, ["taskdoc", "show", "legacy.md"], catch_exceptions=False)
    run(tmp_path, "task", "new", "x")
    with pytest.raises(MindloopError, match=r"^--history 'nope': Invalid selector 'nope'"):
        CliRunner().invoke(
            app, ["taskdoc", "show", "tasks/x.tsk", "--history", "nope"], catch_exceptions=False
        )
    with pytest.raises(MindloopError, match=r"^--history 'ux/goals': Selector 'goals' is reserved"):
        CliRunner().invoke(
            app, ["taskdoc", "show", "tasks/x.tsk", "--history", "ux/goals"], catch_exceptions=False
        )
    assert not (tmp_path / "tasks" / "none.tsk").exists()


def test_migrate_command(tmp_path: Path) -> None:
    write(tmp_path, "notes/old.md", "# Goals\ng\n# Progress\np\n")
    assert (
        run(tmp_path, "taskdoc", "migrate", "notes/old.md", "--dest", "tasks/old.tsk").strip()
        == "tasks/old.tsk"
    )
    assert (tmp_path / "tasks/old.tsk/progress.md").read_text() == "p\n"
    write(tmp_path, "bad.md", "# Other\n")
    with pytest.raises(MindloopError, match="no Goals/Constraints/Progress section found"):
        CliRunner().invoke(
            build_app(tmp_path), ["taskdoc", "migrate", "bad.md"], catch_exceptions=False
        )
    assert not (tmp_path / "bad.tsk").exists()


def test_show_package_written_by_hand(tmp_path: Path) -> None:
    """No audit record: said so (not "changed outside"); nothing is created by reading; the
    maintainer shown is who a new dialog would start with (the team's default responder)."""
    init_rtws(tmp_path, provider="mock")
    write(tmp_path, "tasks/hand.tsk/goals.md", "G\n")
    before = tree_snapshot(tmp_path)
    out = run(tmp_path, "taskdoc", "show", "tasks/hand.tsk", "--effective")
    assert "Taskdoc maintainer (runs `change_mind`): @dev" in out
    human = run(tmp_path, "taskdoc", "show", "tasks/hand.tsk")
    assert "maintainer @dev" in human and "changed outside" not in human
    assert "── goals.md updated" in human and "by human/unknown · no audit record" in human
    assert "── constraints.md missing" in human
    assert tree_snapshot(tmp_path) == before  # no .mindloop/, no section created
    data = json.loads(run(tmp_path, "taskdoc", "show", "tasks/hand.tsk", "--json"))
    goals = {s["section"]: s for s in data["sections"]}["goals.md"]
    assert goals["recorded"] is False and goals["actor_member"] == "human/unknown"


def test_commands_through_the_real_mindloop_process(tmp_path: Path) -> None:
    """The issue's user story, as typed: the commands are wired into `mindloop`."""

    def ml(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mindloop.cli.app", "-C", str(tmp_path), *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(tmp_path)},
        )

    new = ml("task", "new", "login", "--goal", "Users can log in with email and password")
    assert new.returncode == 0 and new.stdout.strip() == "tasks/login.tsk", new.stderr
    listed = ml("tasks")
    assert listed.returncode == 0 and "tasks/login.tsk" in listed.stdout
    shown = ml("taskdoc", "show", "tasks/login.tsk", "--effective")
    assert shown.returncode == 0
    assert "## Goals\nUsers can log in with email and password\n" in shown.stdout
    history = ml("taskdoc", "show", "tasks/login.tsk", "--history", "goals")
    assert history.returncode == 0 and "v1" in history.stdout and "by human" in history.stdout
    write(tmp_path, "notes/old-task.md", "# Goals\ng\n# Constraints\n- c\n# Progress\np\n")
    migrated = ml("taskdoc", "migrate", "notes/old-task.md")
    assert migrated.returncode == 0 and migrated.stdout.strip() == "notes/old-task.tsk"
    bad = ml("taskdoc", "show", "tasks/login.tsk", "--history", "nope")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("error: --history 'nope': Invalid selector 'nope'")
