"""Refused input writes nothing (issue 10 item 18): `chat` validates the task, the member,
the dialog and the member's provider before it opens the state database, so a refusal
leaves no `.mindloop/` behind and no dialog in `error`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scenario_util import ml, write_script

EXAMPLE = "list the files and summarise README.md"  # the scaffolded mock script answers it


def _init(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    (proj / "notes.txt").write_text("a plain file\n")
    return proj


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--task", "tasks/missing.tsk"], "task package tasks/missing.tsk does not exist"),
        (["--task", "../x.tsk"], "Invalid Taskdoc path '../x.tsk'"),
        (["--task", "/etc"], "Invalid Taskdoc path '/etc'"),
        (["--task", "notes.txt"], "Invalid Taskdoc path 'notes.txt'"),
        (["--task", "tasks/example.tsk", "--member", "ghost"], "unknown member 'ghost'"),
        (["--dialog", "d-nope"], "no dialog with id 'd-nope'"),
    ],
)
def test_refused_chat_input_creates_no_state(tmp_path: Path, args: list[str], says: str) -> None:
    proj = _init(tmp_path)
    out = ml("chat", "-C", str(proj), *args, "hi", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.startswith("error: ") and says in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (proj / ".mindloop").exists()


def test_an_unknown_dialog_is_refused_when_state_exists_and_nothing_is_added(
    tmp_path: Path,
) -> None:
    proj = _init(tmp_path)
    assert ml("chat", "-C", str(proj), "-t", "tasks/example.tsk", EXAMPLE, cwd=tmp_path).stdout
    listed = ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout
    before = json.loads(listed)
    out = ml("chat", "-C", str(proj), "--dialog", "d-nope", "hi", cwd=tmp_path)
    assert out.returncode == 1 and "no dialog with id 'd-nope'" in out.stderr
    assert json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout) == (
        before
    )


def _use_openai(proj: Path) -> None:
    team = proj / ".minds" / "team.yaml"
    team.write_text(
        team.read_text()
        .replace("provider: mock", "provider: openai")
        .replace("model: mock-model", "model: gpt-4o-mini")
    )


def test_a_missing_api_key_is_refused_before_any_dialog_exists(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    _use_openai(proj)
    out = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "hi", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    assert out.stderr.strip().splitlines() == [
        "error: provider 'openai' needs an API key: set the environment variable "
        "OPENAI_API_KEY (named by api_key_env in .minds/llm.yaml)"
    ]
    assert not (proj / ".mindloop").exists()


def test_a_missing_api_key_for_a_continued_dialog_leaves_it_as_it_was(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    first = ml("chat", "-C", str(proj), "-t", "tasks/example.tsk", EXAMPLE, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    [dialog] = json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    _use_openai(proj)
    llm = proj / ".minds" / "llm.yaml"
    # The dialog's member keeps its name; only its provider changes (to one without a key).
    assert "OPENAI_API_KEY" in llm.read_text()
    out = ml("chat", "-C", str(proj), "--dialog", dialog["id"], "more", cwd=tmp_path)
    assert out.returncode == 1 and "OPENAI_API_KEY" in out.stderr
    [after] = json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    assert (after["status"], after["messages"]) == (dialog["status"], dialog["messages"])


def test_a_broken_mock_script_is_refused_with_file_line_problems_on_stderr(
    tmp_path: Path,
) -> None:
    proj = _init(tmp_path)
    (proj / ".minds" / "mock" / "mock-model.yaml").write_text(
        "responses:\n  - mtch: hi\n    response: yo\n"
    )
    out = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "hi", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "error: .minds/mock/mock-model.yaml:2: responses[0]: unknown key 'mtch' "
        "(did you mean 'match'?)"
    ]
    assert not (proj / ".mindloop").exists()


def test_a_missing_api_key_is_refused_before_an_answer_is_recorded(tmp_path: Path) -> None:
    """`answer` drives the asking dialog on: its provider must be usable first. With
    `--no-drive` (another process, with the key, drives it) the answer is recorded."""
    proj = _init(tmp_path)
    write_script(proj, [{"match": "go", "response": "!?@human Which?\n"}])
    asked = ml("chat", "-C", str(proj), "-t", "tasks/example.tsk", "go", cwd=tmp_path)
    assert asked.returncode == 4, asked.stdout + asked.stderr
    [q] = json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    _use_openai(proj)
    out = ml("answer", "-C", str(proj), q["id"], "this one", cwd=tmp_path)
    assert out.returncode == 1 and "needs an API key" in out.stderr
    assert json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout) == [q]
    later = ml("answer", "--no-drive", "-C", str(proj), q["id"], "this one", cwd=tmp_path)
    assert later.returncode == 0, later.stderr
    assert json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout) == []
