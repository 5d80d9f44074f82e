"""A human edits one Taskdoc section (`mindloop taskdoc edit`): in `$EDITOR` or from
`--content`/stdin/`--file`, recorded in the section's audit history with the actor
`human` through the same audited write as `change_mind`; an edit that raced another
change is refused and kept as a draft, never lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.scenario_util import ml

EDITOR = """\
import os, pathlib, sys
path = pathlib.Path(sys.argv[1])
pathlib.Path(os.environ["SEEN"]).write_text(path.name + "\\n" + path.read_text())
if os.environ.get("ALSO_WRITE"):
    target, text = os.environ["ALSO_WRITE"].split("=", 1)
    pathlib.Path(target).write_text(text)
if "NEW_TEXT" in os.environ:
    path.write_text(os.environ["NEW_TEXT"])
sys.exit(int(os.environ.get("EDITOR_EXIT", "0")))
"""


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    assert ml("-C", str(proj), "task", "new", "login", "--constraint", "MUST hash").returncode == 0
    (tmp_path / "editor.py").write_text(EDITOR)
    return proj


def _editor_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "EDITOR": f"{sys.executable} {tmp_path / 'editor.py'}",
        "SEEN": str(tmp_path / "seen"),
        **extra,
    }


def _history(proj: Path, section: str) -> list[dict[str, object]]:
    out = ml("-C", str(proj), "taskdoc", "show", "tasks/login.tsk", "--history", section, "--json")
    return list(json.loads(out.stdout)["versions"])


def test_edit_in_the_editor_is_audited_as_the_human(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    env = _editor_env(tmp_path, NEW_TEXT="- MUST hash\n- MUST rate-limit\n")
    out = ml("-C", str(proj), "taskdoc", "edit", "tasks/login.tsk", "constraints", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("tasks/login.tsk/constraints.md replaced by human")
    assert (tmp_path / "seen").read_text() == "constraints.md\n- MUST hash\n"  # it saw the text
    pkg = proj / "tasks" / "login.tsk"
    assert (pkg / "constraints.md").read_text() == "- MUST hash\n- MUST rate-limit\n"
    newest, created = _history(proj, "constraints")
    assert newest["actor_member"] == "human" and newest["actor_dialog"] is None
    assert newest["content_after"] == "- MUST hash\n- MUST rate-limit\n"
    assert "+- MUST rate-limit" in str(newest["diff"]) and created["created"]
    # Saving the text unchanged changes nothing; a failing editor changes nothing.
    same = ml(
        "-C",
        str(proj),
        "taskdoc",
        "edit",
        "tasks/login.tsk",
        "constraints",
        env=_editor_env(tmp_path),
    )
    assert same.returncode == 0 and "unchanged" in same.stdout
    failed = ml(
        "-C",
        str(proj),
        "taskdoc",
        "edit",
        "tasks/login.tsk",
        "constraints",
        env=_editor_env(tmp_path, NEW_TEXT="x\n", EDITOR_EXIT="3"),
    )
    assert failed.returncode == 1 and "exited with status 3; nothing was changed" in failed.stderr
    assert len(_history(proj, "constraints")) == 2


def test_content_stdin_and_file_and_new_sections(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj), "taskdoc", "edit", "tasks/login.tsk")
    assert ml(*c, "progress", "--content", "- started").returncode == 0
    piped = subprocess.run(
        [sys.executable, "-m", "mindloop.cli.app", *c, "bearinmind/risks", "--content", "-"],
        input="- the DB may be slow\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.returncode == 0, piped.stderr
    draft = tmp_path / "ux.md"
    draft.write_text("- check the form\n")
    assert ml(*c, "ux/checklist", "--file", str(draft)).returncode == 0
    pkg = proj / "tasks" / "login.tsk"
    assert (pkg / "progress.md").read_text() == "- started\n"
    assert (pkg / "bearinmind" / "risks.md").read_text() == "- the DB may be slow\n"
    assert (pkg / "ux" / "checklist.md").read_text() == "- check the form\n"
    for section in ("progress", "bearinmind/risks", "ux/checklist"):
        assert _history(proj, section)[0]["actor_member"] == "human", section


def test_refusals_write_nothing(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj), "taskdoc", "edit", "tasks/login.tsk")
    blank = ml(*c, "goals", "--content", "  \n")
    assert blank.returncode == 1 and "Taskdoc content is required" in blank.stderr
    bad = ml(*c, "ux/goals", "--content", "x")
    assert bad.returncode == 1 and "section 'ux/goals': Selector 'goals' is reserved" in bad.stderr
    no_editor = ml(*c, "goals")
    assert no_editor.returncode == 1 and "set $EDITOR" in no_editor.stderr
    assert len(_history(proj, "goals")) == 1


def test_an_edit_that_raced_another_change_is_kept_as_a_draft(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    section = proj / "tasks" / "login.tsk" / "constraints.md"
    env = _editor_env(tmp_path, NEW_TEXT="- mine\n", ALSO_WRITE=f"{section}=- theirs\n")
    out = ml("-C", str(proj), "taskdoc", "edit", "tasks/login.tsk", "constraints", env=env)
    assert out.returncode == 1 and "changed while you edited it; nothing was written" in out.stderr
    assert section.read_text() == "- theirs\n"
    [draft] = (proj / ".mindloop" / "drafts").iterdir()
    assert draft.read_text() == "- mine\n" and str(draft) in out.stderr.replace("\n", "")
