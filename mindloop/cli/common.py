"""What every CLI command shares: the rtws option, the console, error exits."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from mindloop.errors import RtwsError

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def get_rtws(ctx: typer.Context, *, must_exist: bool = True) -> Path:
    """The rtws chosen with the global `-C/--rtws` option (default: current directory)."""
    root = ctx.find_root()
    raw = (root.obj or {}).get("rtws") if isinstance(root.obj, dict) else None
    path = Path(raw or ".").resolve()
    if must_exist and not path.is_dir():
        raise RtwsError(f"rtws {path} does not exist (create it with `mindloop init {raw}`)")
    return path
