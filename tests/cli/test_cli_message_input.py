"""A message of any size can be given (issue 10 item 22): `-` reads it from stdin and
`--file PATH` from a file, for `chat` and `answer`; a message beyond the OS argument
limit (here 3 MB, over Linux's 2 MB per-argument and total limits) goes through whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.scenario_util import ml, state_env, write_script

BIG = ("0123456789abcdef" * 64 + "\n") * 3000  # ~3 MB, many lines


def _ml_stdin(*args: str, data: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mindloop.cli.app", *args],
        input=data,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(cwd), **state_env()},
    )


def _messages(proj: Path, cwd: Path) -> list[dict[str, object]]:
    [d] = json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=cwd).stdout)
    shown = ml("dialogs", "show", d["id"], "--json", "-C", str(proj), cwd=cwd).stdout
    return list(json.loads(shown)["messages"])


def _init(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(proj, [{"contains": "0123456789abcdef", "response": "got it"}])
    return proj


def test_oversized_message_cannot_be_an_argument(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    try:
        subprocess.run(
            [sys.executable, "-m", "mindloop.cli.app", "chat", "-C", str(proj), BIG],
            capture_output=True,
            timeout=60,
        )
    except OSError as exc:  # E2BIG: why `-` and --file exist
        assert exc.errno == 7
    else:  # pragma: no cover - an OS with a larger limit
        raise AssertionError("the OS took a 3 MB argument")


def test_chat_reads_the_message_from_stdin(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    out = _ml_stdin("chat", "-C", str(proj), "-t", "tasks/example.tsk", "-", data=BIG, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert "@dev: got it" in out.stdout
    first = _messages(proj, tmp_path)[0]
    assert first["kind"] == "user" and first["data"] == {"text": BIG}


def test_chat_reads_the_message_from_a_file(tmp_path: Path) -> None:
    proj = _init(tmp_path)
    msg = tmp_path / "msg.txt"
    msg.write_text(BIG, "utf-8")
    out = ml("chat", "-C", str(proj), "-t", "tasks/example.tsk", "--file", str(msg), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert _messages(proj, tmp_path)[0]["data"] == {"text": BIG}


def test_message_sources_are_exclusive_and_checked_before_anything_is_written(
    tmp_path: Path,
) -> None:
    proj = _init(tmp_path)
    msg = tmp_path / "msg.txt"
    msg.write_text("hi", "utf-8")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    cases = {
        ("-t", "tasks/example.tsk", "hi", "--file", str(msg)): "give the message once",
        ("-t", "tasks/example.tsk"): "no message",
        ("-t", "tasks/example.tsk", "--file", str(tmp_path / "nope.txt")): "--file",
        ("-t", "tasks/example.tsk", "--file", str(tmp_path)): "--file",
        ("-t", "tasks/example.tsk", "--file", str(tmp_path / "latin1.txt")): "not UTF-8",
    }
    for args, says in cases.items():
        out = ml("chat", "-C", str(proj), *args, cwd=tmp_path)
        assert out.returncode in (1, 2), (args, out.stderr)
        assert says in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)
    empty = _ml_stdin(
        "chat", "-C", str(proj), "-t", "tasks/example.tsk", "-", data="", cwd=tmp_path
    )
    assert empty.returncode == 1 and "the message is empty" in empty.stderr
    assert not (proj / ".mindloop").exists()


def test_answer_reads_the_answer_from_stdin_or_a_file(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(
        proj,
        [
            {"match": "go", "response": "!?@human Which database?\n"},
            {"role": "user", "contains": "answer from the human", "response": "noted"},
        ],
    )
    for how in ("stdin", "file"):
        asked = ml("chat", "-C", str(proj), "-t", "tasks/example.tsk", "go", cwd=tmp_path)
        assert asked.returncode == 4, asked.stdout + asked.stderr  # waits on the human
        [q] = json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout)
        if how == "stdin":
            out = _ml_stdin("answer", "-C", str(proj), q["id"], "-", data=BIG, cwd=tmp_path)
        else:
            path = tmp_path / "answer.txt"
            path.write_text(BIG, "utf-8")
            out = ml("answer", "-C", str(proj), q["id"], "--file", str(path), cwd=tmp_path)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr
        assert "@dev: noted" in out.stdout
        store_q = json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout)
        assert store_q == []
