"""Toolset `shell`: run a command in the rtws with a timeout and an output cap.

The shell is NOT a sandbox for encapsulation: a command can read `.minds/` or a `*.tsk`
package like any process of the user could. It is a trusted-member toolset; the path
guard protects the general file tools, and members not given `shell` cannot call it
(the registry refuses tools outside a member's selection).

What it does guarantee: the command runs in its own process group which is killed as a
whole on timeout (no orphans keep running), output is bounded in memory and in the
result, and environment variables that look like secrets are not passed on, so a stray
`env` cannot leak an API key into the transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from mindloop.config import LlmConfig
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.pathguard import resolve_agent_path
from mindloop.tools.registry import ToolArgs

MAX_TIMEOUT_S = 600.0
SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET")
_READ_CHUNK = 65_536
_DRAIN_AFTER_KILL_S = 2.0


class RunShellArgs(ToolArgs):
    command: str = Field(description="Shell command line (bash syntax when bash is available).")
    timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=MAX_TIMEOUT_S,
        description="Seconds before the command and its children are killed (max 600).",
    )
    cwd: str = Field(default=".", description="Working directory, rtws-relative.")


def filtered_env(
    environ: Mapping[str, str], extra_secret_names: tuple[str, ...] = ()
) -> dict[str, str]:
    """The inherited environment minus variables whose names mark them as secrets."""
    extra = {name.upper() for name in extra_secret_names}
    return {
        name: value
        for name, value in environ.items()
        if not name.upper().endswith(SECRET_SUFFIXES) and name.upper() not in extra
    }


def llm_secret_env_names(llm: LlmConfig) -> tuple[str, ...]:
    """Variables to withhold beyond the suffix rule: every `api_key_env` of llm.yaml (a
    key may live in a variable named anything, e.g. `LLM_KEY`). The engine passes these
    as the context's `secret_env_names`."""
    names = [p.api_key_env for p in llm.providers.values() if p.api_key_env]
    return tuple(dict.fromkeys(names))


def _shell_argv(command: str) -> list[str]:
    bash = shutil.which("bash")
    return [bash, "-c", command] if bash else ["/bin/sh", "-c", command]


@dataclass
class _BoundedOutput:
    """Keeps the first and last `half` bytes of a stream and counts the rest."""

    half: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def render(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return head + tail
        return (
            f"{head}\n[output truncated: {omitted} of {self.total} bytes omitted from the "
            f"middle; first and last {self.half} bytes shown]\n{tail}"
        )


async def _pump(stream: asyncio.StreamReader, sink: _BoundedOutput) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


async def _until_done(proc: asyncio.subprocess.Process, sink: _BoundedOutput) -> None:
    """Read the output to EOF, then reap the shell. One coroutine, not a `gather`: when
    the call is cancelled (Ctrl-C), `wait_for` cancels it and waits, but never retrieves
    the CancelledError a cancelled `gather` stores as its exception, which asyncio then
    reports as "_GatheringFuture exception was never retrieved"."""
    assert proc.stdout is not None
    await _pump(proc.stdout, sink)
    await proc.wait()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _kill_and_reap(proc: asyncio.subprocess.Process, sink: _BoundedOutput) -> None:
    """Kill the group, reap the shell, and read the pipe to EOF so its transport closes.

    A process that left the group (setsid) could keep the pipe open; the drain is bounded so
    such a straggler cannot hold the tool call hostage.
    """
    _kill_group(proc.pid)
    await proc.wait()
    if proc.stdout is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_pump(proc.stdout, sink), timeout=_DRAIN_AFTER_KILL_S)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


async def run_shell(args: RunShellArgs, ctx: ToolContext) -> ToolOutput:
    cwd = resolve_agent_path(ctx, args.cwd, ctx.acl, "read")
    if not cwd.is_dir():
        return ToolOutput(f"cwd `{args.cwd}` is not an existing directory", is_error=True)
    # Leave room in the registry cap for the status line and the truncation note.
    sink = _BoundedOutput(half=max(1_000, (ctx.output_cap - 400) // 2))
    proc = await asyncio.create_subprocess_exec(
        *_shell_argv(args.command),
        cwd=cwd,
        env=filtered_env(os.environ, ctx.secret_env_names),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    timed_out = False
    try:
        # Wait for EOF as well as exit: background children holding the pipe count as
        # still running, and are killed with the group on timeout.
        await asyncio.wait_for(_until_done(proc, sink), timeout=args.timeout_s)
    except TimeoutError:
        timed_out = True
        await _kill_and_reap(proc, sink)
    except asyncio.CancelledError:
        await _kill_and_reap(proc, sink)
        raise
    if timed_out:
        status = f"timed out after {args.timeout_s:g}s; process group killed"
    elif proc.returncode is not None and proc.returncode < 0:
        status = f"killed by signal {_signal_name(-proc.returncode)}"
    else:
        status = f"exit code {proc.returncode}"
    output = sink.render()
    text = f"{status}\n{output}" if output else f"{status}\n(no output)"
    return ToolOutput(text, is_error=timed_out)


def shell_tools() -> list[Tool[Any]]:
    """Fresh Tool objects for the `shell` toolset."""
    return [
        Tool(
            "run_shell",
            "Run a shell command in the rtws (cwd rtws-relative) with a timeout; returns the "
            "exit code and combined stdout/stderr (long output keeps head and tail). Secret "
            "environment variables are removed. Do not use it to read or change `.minds/`, "
            "`.mindloop/` or `*.tsk` Taskdoc packages; use change_mind / recall_taskdoc.",
            RunShellArgs,
            run_shell,
        )
    ]
