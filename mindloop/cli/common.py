"""What every CLI command shares: the rtws option, the console, error exits, JSON output.

Cheap to import (only rich's console beyond the standard library): `mindloop --help`
loads every command module.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console

from mindloop.errors import MindloopError, RtwsError

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


INTERRUPTED_EXIT = 130
USAGE_EXIT = 2  # click's: an unknown option, a missing argument …

# DESIGN §8.6: what a command that drives dialogs came to, as its exit code (keyed by
# `service.Outcome`'s values, so this table needs no import of the service).
OUTCOME_EXIT_CODES: dict[str, int] = {
    "done": 0,
    "error": 1,
    "step_limit": 3,
    "cap_reached": 3,
    "waiting": 4,
    "failed": 5,  # a task's work loop ended FAILED
}


# What each exit code of a command that drives dialogs means: the one list every such
# command's help ends with (and the README's).
EXIT_CODES: dict[int, str] = {
    0: "done",
    1: "error",
    USAGE_EXIT: "usage error (a bad option or argument; nothing was done)",
    3: "a cap or the step limit reached",
    4: "waiting on your answer or approval",
    5: "the task FAILED",
    INTERRUPTED_EXIT: "interrupted (state saved: `mindloop run` resumes)",
}

_F = TypeVar("_F", bound=Callable[..., Any])


def exit_codes_help() -> str:
    return "Exit codes: " + ", ".join(f"{code} {what}" for code, what in EXIT_CODES.items()) + "."


def drives(command: _F) -> _F:
    """Mark a command that drives dialogs: its help ends with the exit codes."""
    command.__doc__ = f"{inspect.cleandoc(command.__doc__ or '')}\n\n{exit_codes_help()}"
    return command


def when(ts: float, now: float | None = None) -> str:
    """A moment as people read it: local time and how far off (`2026-05-03 14:02 (in
    47h)`, `… (3 min ago)`)."""
    import time
    from datetime import datetime

    now = time.time() if now is None else now
    delta = ts - now
    span = abs(delta)
    if span < 60:
        far = f"{span:.0f}s"
    elif span < 3600:
        far = f"{span // 60:.0f} min"
    elif span < 72 * 3600:
        far = f"{span // 3600:.0f}h"
    else:
        far = f"{span // 86400:.0f} days"
    rel = f"in {far}" if delta >= 0 else f"{far} ago"
    return f"{datetime.fromtimestamp(ts).strftime('%Y-%m-%d %H:%M')} ({rel})"


def print_json(data: Any) -> None:
    """Machine-readable output of a command (`--json`): one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def run_async(main: Coroutine[Any, Any, int], rtws: Path | None = None) -> int:
    """Run a command's coroutine; Ctrl-C ends it cleanly (the runtime has saved the
    interrupted dialogs, marked to be resumed) with exit code 130 and a note saying so."""
    import asyncio

    try:
        return asyncio.run(main)
    except KeyboardInterrupt:
        where = f" -C {rtws}" if rtws is not None else ""
        err_console.print(
            f"interrupted; state is saved: `mindloop run{where}` resumes the interrupted dialogs",
            markup=False,
        )
        return INTERRUPTED_EXIT


def global_option(ctx: typer.Context, name: str) -> Any:
    """A global option's value (`rtws`, `debug`, `verbose`), wherever it was written."""
    root = ctx.find_root()
    return root.obj.get(name) if isinstance(root.obj, dict) else None


def get_rtws(ctx: typer.Context, *, must_exist: bool = True) -> Path:
    """The rtws chosen with the global `-C/--rtws` option (default: current directory)."""
    raw = global_option(ctx, "rtws")
    path = Path(raw or ".").resolve()
    if must_exist and not path.is_dir():
        raise RtwsError(f"rtws {path} does not exist (create it with `mindloop init {raw}`)")
    return path


FILE_OPTION_HELP = "Read the text from this file (UTF-8), e.g. one too long for an argument."


def read_message(arg: str | None, file: Path | None, what: str = "message") -> str:
    """The text of a `chat` message or an `answer`: the argument itself, `-` for stdin, or
    `--file PATH`, so text longer than the OS argument limit can be given too."""
    if arg is not None and file is not None:
        raise MindloopError(f"give the {what} once: as an argument, `-` (stdin) or --file")
    if file is not None:
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise MindloopError(f"--file {file}: cannot read it ({exc.strerror})") from None
        source = f"--file {file}"
    elif arg == "-":
        data = sys.stdin.buffer.read()
        source = "stdin"
    elif arg is None:
        raise MindloopError(f"no {what}: give it as an argument, `-` to read stdin, or --file PATH")
    else:
        return arg
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MindloopError(f"{source}: not UTF-8 text (byte {exc.start})") from None
