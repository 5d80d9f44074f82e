"""Real `mindloop` processes for the multi-process tests: start, watch, kill, reap.

Every process is `python -m mindloop.cli.app …` (the real entry point) with its output in
a log file (a pipe could fill up and stall a long-running `run --watch`). `Procs.close`
kills and reaps whatever is still running, so a failing test leaves no process behind.
State is observed through the store (`read_store`), never through fixed sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from mindloop.store import STATE_DIR, STATE_FILE, Store
from mindloop.store.location import DATABASE_URL_ENV

T = TypeVar("T")


@dataclass
class Proc:
    """A started command: its process, its log, how it ended."""

    popen: subprocess.Popen[bytes]
    args: list[str]
    log: Path
    killed: bool = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        return self.log.read_text("utf-8", "replace") if self.log.exists() else ""

    def describe(self) -> str:
        return f"`mindloop {' '.join(self.args)}` (pid {self.pid}, log {self.log.name})"


@dataclass
class Procs:
    """The processes of one test, all on one rtws."""

    rtws: Path
    logs: Path
    env: dict[str, str] = field(default_factory=dict)
    started: list[Proc] = field(default_factory=list)

    def start(self, *args: str, env: dict[str, str] | None = None) -> Proc:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"p{len(self.started) + 1:03d}-{args[0]}.log"
        with log.open("wb") as fh:
            popen = subprocess.Popen(
                [sys.executable, "-m", "mindloop.cli.app", "-C", str(self.rtws), *args],
                cwd=self.rtws,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=child_env(self.rtws, {**self.env, **(env or {})}),
            )
        proc = Proc(popen, list(args), log)
        self.started.append(proc)
        return proc

    def kill(self, proc: Proc) -> int:
        """SIGKILL (if still running) and reap; the exit status."""
        if proc.alive():
            proc.popen.send_signal(signal.SIGKILL)
            proc.killed = True
        return proc.popen.wait()

    def finish(self, proc: Proc, timeout: float) -> int:
        """Wait for the command's own end; killed (and reported) after `timeout`."""
        try:
            return proc.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill(proc)
            raise AssertionError(
                f"{proc.describe()} still running after {timeout}s\n{tail(proc)}"
            ) from None

    def close(self) -> None:
        for proc in self.started:
            self.kill(proc)


def child_env(rtws: Path, extra: dict[str, str]) -> dict[str, str]:
    """As a user runs it: no API keys, no terminal colours; the test's own settings."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(rtws),
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
    }
    if os.environ.get(DATABASE_URL_ENV):  # the suite on PostgreSQL: children share it
        env[DATABASE_URL_ENV] = os.environ[DATABASE_URL_ENV]
    return {**env, **extra}


def tail(proc: Proc, lines: int = 30) -> str:
    text = proc.output().splitlines()
    return f"--- {proc.describe()}, last {lines} lines ---\n" + "\n".join(text[-lines:])


def has_state(rtws: Path) -> bool:
    if os.environ.get(DATABASE_URL_ENV):
        return True
    return (rtws / STATE_DIR / STATE_FILE).is_file()


def read_store(rtws: Path, read: Callable[[Store], T]) -> T:
    """Open the rtws's store (it must exist), read, close."""
    store = Store.for_rtws(rtws)
    try:
        return read(store)
    finally:
        store.close()


def wait_until(cond: Callable[[], T], timeout: float, what: str, *, interval: float = 0.02) -> T:
    """Poll `cond` until it returns something truthy; that value. Fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
