"""`mindloop demo`: run the offline demo scenario."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from mindloop.cli.common import INTERRUPTED_EXIT, console, err_console


def demo(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Create the demo rtws here (default: a temp dir).")
    ] = None,
) -> None:
    """Run a short scripted scenario offline and show where its state lives."""
    from mindloop.demo import run_demo

    try:
        report = asyncio.run(run_demo(directory, console))
    except KeyboardInterrupt:
        err_console.print("demo interrupted", markup=False)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    if report.result.reason != "done":
        console.print(f"[red]demo stopped: {report.result.reason} {report.result.error or ''}[/]")
        raise typer.Exit(1)
