"""`mindloop check --probe`: what each MCP server offers, as a user reads it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.markup import escape

from mindloop.cli.common import console

if TYPE_CHECKING:
    from mindloop.toolsets.configured import ServerReport


def _first_line(text: str, limit: int = 90) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def print_servers(servers: Sequence[ServerReport]) -> None:
    """One block per server: its toolset and tools (or that it did not start; the
    problem itself is printed with the others)."""
    for server in servers:
        if not server.started:
            console.print(f"[red]{escape(server.toolset)}[/]: not started (see below)")
            continue
        console.print(f"[bold]{escape(server.toolset)}[/]: {len(server.tools)} tool(s)")
        for tool in server.tools:
            console.print(f"  {escape(tool.name)}  [dim]{escape(_first_line(tool.description))}[/]")
        for note in server.notes:
            console.print(f"  [yellow]note:[/] {escape(note)}")
