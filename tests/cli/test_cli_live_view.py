"""Feedback while it works: who is working on which model and for how long (a live status
line on a terminal, side dialogs too), every provider retry as it happens, and a
`run --watch` that says it started, tags every line with its dialog and member, and says
when it is idle."""

from __future__ import annotations

import asyncio
import io
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from rich.console import Console

from mindloop import service
from mindloop.cli.render import TranscriptRenderer
from mindloop.cli.status import WorkingStatus, elapsed
from mindloop.events.types import (
    DialogCreated,
    DriveEnded,
    DriveStarted,
    GenerationEnded,
    GenerationStarted,
    ProviderRetried,
    TextChunk,
    ThinkingChunk,
)
from tests.scenario_util import ml, state_env, write_script

TASK = "tasks/example.tsk"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_elapsed() -> None:
    assert [elapsed(s) for s in (0, 7.9, 59, 60, 123, 3599, 3600, 7322)] == [
        "0s",
        "7s",
        "59s",
        "1m 00s",
        "2m 03s",
        "59m 59s",
        "1h 00m",
        "2h 02m",
    ]


def test_status_lines_follow_the_generations() -> None:
    clock = Clock()
    renderer = TranscriptRenderer(
        Console(file=io.StringIO()), status=WorkingStatus(Console(file=io.StringIO()), clock=clock)
    )
    status = renderer.status
    renderer.set_dialog("root", "dev")
    renderer.handle(DialogCreated(dialog_id="side", member="qa", kind="side", parent_id="root"))
    renderer.handle(GenerationStarted(dialog_id="root", member="dev", model="gpt-x"))
    clock.now += 75
    renderer.handle(GenerationStarted(dialog_id="side", member="qa", model="local"))
    clock.now += 3
    assert status.lines() == ["@dev is working · gpt-x · 1m 18s", "  @qa is working · local · 3s"]
    renderer.handle(ThinkingChunk(dialog_id="side", text="hmm"))  # thinking not shown
    renderer.handle(
        ProviderRetried(
            dialog_id="root",
            member="dev",
            provider="openai",
            model="gpt-x",
            host="127.0.0.1:8000",
            attempt=2,
            max_attempts=5,
            status=503,
            error="openai: 503 busy",
            delay=1.5,
        )
    )
    assert status.lines() == [
        "@dev waits to retry (2 of 5, in 2s) · gpt-x · 1m 18s",
        "  @qa is thinking · local · 3s",
    ]
    clock.now += 2
    renderer.handle(TextChunk(dialog_id="side", text="done"))  # it produced something
    assert status.lines() == ["@dev is working (attempt 2 of 5) · gpt-x · 1m 20s"]
    renderer.handle(GenerationEnded(dialog_id="root", finish_reason="stop"))
    assert status.lines() == []
    renderer.close()


def test_on_a_terminal_the_status_is_drawn_then_erased_for_the_transcript() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    renderer = TranscriptRenderer(console, out=out)
    renderer.set_dialog("root", "dev")
    renderer.handle(GenerationStarted(dialog_id="root", member="dev", model="gpt-x"))
    assert renderer.status._live is not None  # drawing
    renderer.handle(TextChunk(dialog_id="root", text="Hello"))
    assert renderer.status._live is None  # erased before the text
    renderer.close()
    text = ANSI.sub("", out.getvalue())
    assert "@dev is working · gpt-x · 0s" in text
    assert text.index("@dev is working") < text.index("@dev: Hello")


def test_not_on_a_terminal_nothing_is_drawn() -> None:
    out = io.StringIO()
    renderer = TranscriptRenderer(Console(file=out), out=out)
    renderer.handle(GenerationStarted(dialog_id="root", member="dev", model="gpt-x"))
    assert renderer.status._live is None and "working" not in out.getvalue()


def test_chat_on_a_terminal_shows_who_works_and_every_retry(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(
        proj,
        [
            {"match": "go", "error": {"status": 503, "times": 1, "retry_after": 0.5}},
            {"match": "go", "response": "done waiting", "delay_ms": 1500},
        ],
    )
    out = ml("chat", "-C", str(proj), "-t", TASK, "go", cwd=tmp_path, env={"FORCE_COLOR": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    text = ANSI.sub("", out.stdout)
    assert re.search(r"@dev waits to retry \(2 of 5, in 1s\) · mock-model · 0s", text), text
    assert re.search(r"@dev is working \(attempt 2 of 5\) · mock-model · 1s", text), text
    assert "↻ retry 2 of 5 in " in text and "· provider mock · HTTP 503 · injected" in text
    assert "@dev: done waiting" in text


def test_retries_show_in_a_plain_transcript_too(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(
        proj,
        [
            {"match": "go", "error": {"status": 429, "times": 2, "retry_after": 0}},
            {"match": "go", "response": "ok"},
        ],
    )
    out = ml("chat", "-C", str(proj), "-t", TASK, "go", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("↻")]
    assert [line.split(" in ")[0] for line in lines] == ["↻ retry 2 of 5", "↻ retry 3 of 5"]
    assert all("HTTP 429" in line for line in lines)
    assert "working" not in out.stdout  # no status line off a terminal


def _reader(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _until(lines: queue.Queue[str], want: str, seen: list[str], timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        if want in line:
            return line
    raise AssertionError(f"no {want!r} in:\n" + "\n".join(seen))


def test_watch_says_it_started_tags_every_line_and_says_when_idle(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(
        proj,
        [
            {"match": "look", "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
            {"role": "tool", "response": "I looked.\nTwo lines."},
        ],
    )
    watch = subprocess.Popen(
        [sys.executable, "-m", "mindloop.cli.app", "run", "--watch", "-C", str(proj)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(tmp_path), **state_env()},
    )
    seen: list[str] = []
    try:
        lines = _reader(watch)
        assert "Ctrl-C stops" in _until(lines, f"watching {proj}", seen)
        _until(lines, "idle since", seen)  # alive, and quiet: one line per quiet spell

        async def post() -> str:  # work written by another process
            async with service.open_project(proj) as project:
                return service.start_chat(project, "look", task=TASK).dialog.id

        did = asyncio.run(post())
        tool = _until(lines, "⚙ list_dir", seen)
        assert tool.startswith(f"{did} @dev: ")
        first = _until(lines, "I looked.", seen)
        assert first == f"{did} @dev: I looked."
        assert _until(lines, "Two lines.", seen) == f"{did} @dev: Two lines."
        _until(lines, "idle since", seen)
        assert sum("idle since" in line for line in seen) == 2
    finally:
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=60)
    assert watch.returncode == 130 and "Traceback" not in err


def test_drive_events_alone_do_not_make_watch_idle_early() -> None:
    """Idle is said only once nothing has run for a while (not between a side dialog's
    reply and its caller's next drive)."""
    out = io.StringIO()
    renderer = TranscriptRenderer(Console(file=out), out=out, tag_lines=True)
    renderer.handle(DriveStarted(dialog_id="a", member="dev"))
    renderer.tick(now=time.monotonic() + 60)
    assert "idle" not in out.getvalue()  # still driving
    renderer.handle(DriveEnded(dialog_id="a", reason="done"))
    renderer.tick()
    assert "idle" not in out.getvalue()  # just ended
    renderer.tick(now=time.monotonic() + 3)
    renderer.tick(now=time.monotonic() + 9)
    assert out.getvalue().count("idle since") == 1


def test_the_status_comes_back_once_a_streamed_answer_is_complete() -> None:
    out = io.StringIO()
    renderer = TranscriptRenderer(Console(file=out, force_terminal=True, width=100), out=out)
    renderer.set_dialog("a", "dev")
    renderer.set_dialog("b", "qa")
    renderer.handle(GenerationStarted(dialog_id="a", member="dev", model="m"))
    renderer.handle(GenerationStarted(dialog_id="b", member="qa", model="m"))
    renderer.handle(TextChunk(dialog_id="a", text="partial"))
    assert renderer.status._live is None  # not over a half-written line
    renderer.handle(GenerationEnded(dialog_id="a", finish_reason="stop"))
    assert renderer.status._live is not None  # @qa still works: shown again
    assert renderer.status.lines() == ["@qa is working · m · 0s"]
    renderer.close()
    assert "@dev: partial\n" in ANSI.sub("", out.getvalue())
