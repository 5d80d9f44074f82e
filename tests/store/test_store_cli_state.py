"""The state file through the CLI, as a user meets it: a damaged or foreign state file and
a read-only project each give one line on stderr (no traceback) and change nothing;
reading commands keep working on a read-only project that has state."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.scenario_util import ml, write_script, write_team
from tests.store.readonly import make_read_only

# The state file itself (damaged, foreign, a directory, read-only): SQLite's, by nature.
pytestmark = pytest.mark.sqlite_only

QUESTION = "Which database should we use?"


def _one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _init(base: Path) -> Path:
    proj = base / "p"
    assert ml("init", str(proj), cwd=base).returncode == 0
    return proj


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


# ---------------------------------------------------------------------- damaged state


def test_a_directory_at_the_state_path_is_one_line_not_no_dialogs_yet(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    (proj / ".mindloop" / "state.sqlite").mkdir(parents=True)
    before = _files(proj)
    for cmd in (["dialogs", "list"], ["questions"], ["chat", "hi"], ["run"]):
        out = ml(*cmd, "-C", str(proj), cwd=tmp_path)
        _one_line_error(out, "state.sqlite: is a directory")
    assert _files(proj) == before


@pytest.mark.parametrize("kind", ["empty", "foreign"])
def test_an_unusable_state_file_is_one_line_and_left_alone(tmp_path: Path, kind: str) -> None:
    proj = _init(tmp_path)
    db = proj / ".mindloop" / "state.sqlite"
    db.parent.mkdir()
    if kind == "empty":
        db.write_bytes(b"")
    else:
        import sqlite3

        con = sqlite3.connect(db)
        con.execute("CREATE TABLE dialogs (id INTEGER PRIMARY KEY, speaker TEXT)")
        con.commit()
        con.close()
    before = _files(proj)
    for cmd in (["dialogs", "list"], ["chat", "hi"]):
        _one_line_error(ml(*cmd, "-C", str(proj), cwd=tmp_path), str(db))
    assert _files(proj) == before


# ---------------------------------------------------------------------- read-only


def test_a_write_in_a_read_only_project_without_state_is_one_line(
    readonly_base: tuple[Path, int | None],
) -> None:
    base, user = readonly_base
    proj = _init(base)
    make_read_only(proj)
    out = ml("chat", "-C", str(proj), "hi", cwd=base, user=user)
    _one_line_error(out, f"cannot create {proj / '.mindloop'}", f"{proj} is read-only")
    assert not (proj / ".mindloop").exists()
    listed = ml("dialogs", "list", "-C", str(proj), cwd=base, user=user)
    assert listed.returncode == 0 and listed.stdout.strip() == "no dialogs yet"


def test_a_read_only_project_with_state_reads_and_refuses_writes_in_one_line(
    readonly_base: tuple[Path, int | None],
) -> None:
    base, user = readonly_base
    proj = _init(base)
    write_team(proj, {"dev": {"toolsets": []}})
    write_script(proj, [{"member": "dev", "match": "go", "response": f"!?@human {QUESTION}\n"}])
    asked = ml("chat", "-C", str(proj), "go", cwd=base)
    assert asked.returncode in (0, 4), asked.stderr  # 4: waiting on the human (DESIGN §8.6)
    make_read_only(proj)
    before = _files(proj)

    listed = ml("dialogs", "list", "--json", "-C", str(proj), cwd=base, user=user)
    assert listed.returncode == 0, listed.stderr
    (dialog,) = json.loads(listed.stdout)
    shown = ml("dialogs", "show", dialog["id"], "-C", str(proj), cwd=base, user=user)
    assert shown.returncode == 0 and QUESTION in shown.stdout, shown.stderr
    questions = ml("questions", "--json", "-C", str(proj), cwd=base, user=user)
    assert questions.returncode == 0, questions.stderr
    (question,) = json.loads(questions.stdout)
    assert QUESTION in question["headline"]

    db = proj / ".mindloop" / "state.sqlite"
    for cmd in (["chat", "go"], ["answer", question["id"], "SQLite"], ["run"]):
        out = ml(*cmd, "-C", str(proj), cwd=base, user=user)
        _one_line_error(out, f"cannot write {db}", "is read-only")
    assert _files(proj) == before
