"""What every CLI command shares: the rtws option, the console, error exits."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from mindloop.errors import NotFoundError, RtwsError
from mindloop.store import Store
from mindloop.store.store import STATE_DIR, STATE_FILE

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


INTERRUPTED_EXIT = 130


def run_async(main: Coroutine[Any, Any, int], rtws: Path | None = None) -> int:
    """Run a command's coroutine; Ctrl-C ends it cleanly (the runtime has saved the
    interrupted dialogs, marked to be resumed) with exit code 130 and a note saying so."""
    try:
        return asyncio.run(main)
    except KeyboardInterrupt:
        where = f" -C {rtws}" if rtws is not None else ""
        err_console.print(
            f"interrupted; state is saved: `mindloop run{where}` resumes the interrupted dialogs",
            markup=False,
        )
        return INTERRUPTED_EXIT


def get_rtws(ctx: typer.Context, *, must_exist: bool = True) -> Path:
    """The rtws chosen with the global `-C/--rtws` option (default: current directory)."""
    root = ctx.find_root()
    raw = (root.obj or {}).get("rtws") if isinstance(root.obj, dict) else None
    path = Path(raw or ".").resolve()
    if must_exist and not path.is_dir():
        raise RtwsError(f"rtws {path} does not exist (create it with `mindloop init {raw}`)")
    return path


def open_state(rtws: Path) -> Store | None:
    """The rtws's store for commands that only read it, or None when nothing was run yet.

    Reading never creates state: a directory that is no rtws at all is an error (and stays
    untouched), an initialised rtws without state simply has no dialogs and questions.
    Whatever else is at the state path (a directory, a damaged file) is the store's to
    refuse."""
    if (rtws / STATE_DIR / STATE_FILE).exists():
        return Store.for_rtws(rtws)
    if not (rtws / ".minds").is_dir():
        raise RtwsError(
            f"{rtws} is not a mindloop rtws (no .minds/ and no {STATE_DIR}/{STATE_FILE}); "
            f"create one with `mindloop init` or choose one with -C DIR"
        )
    return None


def no_dialog(ref: str) -> NotFoundError:
    return NotFoundError(f"no dialog with id {ref!r} (see `mindloop dialogs list`)")


def task_key(rtws: Path, raw: str) -> str:
    """A task path as the store records it (rtws-relative, posix): users also type
    `./tasks/x.tsk/`, `tasks\\x.tsk` or an absolute path inside the rtws."""
    path = Path(raw.replace("\\", "/"))
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(rtws)
        except ValueError:
            return raw
    return os.path.normpath(path.as_posix()).replace(os.sep, "/")
