"""Structured logs: a command that works on an rtws writes JSON lines to
`.mindloop/logs/mindloop.log` (rotated), the runtime's events and every provider retry
among them; `--verbose` writes the same to stderr; a refused command writes no log."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from mindloop.cli import logs
from tests.scenario_util import ml, write_script

TASK = "tasks/example.tsk"


def _records(proj: Path) -> list[dict[str, Any]]:
    text = (proj / ".mindloop" / "logs" / "mindloop.log").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_chat_logs_json_lines_with_events_and_retries(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(
        proj,
        [
            {"match": "go", "error": {"status": 503, "times": 1, "retry_after": 0}},
            {"match": "go", "response": "fine"},
        ],
    )
    out = ml("chat", "-C", str(proj), "-t", TASK, "go", cwd=tmp_path)
    assert out.returncode == 0 and out.stderr == ""  # the log is not on the console
    records = _records(proj)
    did = next(r["dialog_id"] for r in records if r.get("event") == "generation_start")
    assert {"ts", "time", "level", "logger", "msg"} <= set(records[0])
    started = [r for r in records if r["logger"] == "mindloop.cli"]
    assert started[0]["msg"] == f"chat: started dialog {did} (@dev)"
    [retry] = [r for r in records if r.get("event") == "provider_retry"]
    assert retry["level"] == "WARNING" and retry["dialog_id"] == did
    assert retry["data"]["attempt"] == 2 and retry["data"]["status"] == 503
    [pool] = [r for r in records if r["logger"] == "mindloop.providers.pool"]
    assert pool["retry"]["caller"] == did
    kinds = [r.get("event") for r in records if r.get("dialog_id") == did]
    assert kinds.index("drive_start") < kinds.index("generation_start") < kinds.index("drive_end")
    assert not any(r.get("event") == "text_chunk" for r in records)  # chunks are not logged
    assert records[-1]["msg"].startswith("run ended: done")


def test_verbose_writes_the_log_to_stderr_too(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    example = "list the files and summarise README.md"
    out = ml("chat", "--verbose", "-C", str(proj), "-t", TASK, example, cwd=tmp_path)
    assert out.returncode == 0
    assert "INFO mindloop.events: tool_call" in out.stderr
    assert "INFO mindloop.service: run ended: done" in out.stderr


def test_a_refused_command_writes_no_log(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    out = ml("chat", "-C", str(proj), "-t", "tasks/nope.tsk", "hi", cwd=tmp_path)
    assert out.returncode == 1 and not (proj / ".mindloop").exists()


def test_the_log_rotates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_BYTES", 2000)
    path = logs.setup_logging(tmp_path)
    log = logging.getLogger("mindloop.test")
    try:
        for i in range(200):
            log.info("record %d", i, extra={"n": i})
    finally:
        logs.stop_logging()
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["mindloop.log", *(f"mindloop.log.{n}" for n in range(1, logs.BACKUPS + 1))]
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["msg"] == "record 199" and last["n"] == 199
    assert all(p.stat().st_size <= 2000 for p in path.parent.iterdir())


def test_a_log_that_cannot_be_written_is_one_warning_and_the_command_works(
    tmp_path: Path,
) -> None:
    # (e.g. a read-only rtws whose state is in PostgreSQL: the store is fine, the log is not)
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(proj, [{"match": "hi", "response": "hello"}])
    (proj / ".mindloop").mkdir(exist_ok=True)
    (proj / ".mindloop" / "logs").write_text("not a directory\n", "utf-8")
    out = ml("chat", "-C", str(proj), "-t", TASK, "hi", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "@dev: hello" in out.stdout
    assert "Traceback" not in out.stderr
    warning = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and "cannot write the log" in warning[0], out.stderr
    assert str(proj / ".mindloop" / "logs") in warning[0]
