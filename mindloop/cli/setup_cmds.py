"""`mindloop init`, `mindloop check` and `mindloop schema`: set a project up and check it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mindloop.cli.common import console, err_console, get_rtws, print_json
from mindloop.errors import MindloopError


def init(
    ctx: typer.Context,
    directory: Annotated[
        Path | None, typer.Argument(help="Where to create it (default: the rtws).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    provider: Annotated[
        str, typer.Option(help="auto | mock | openai | anthropic (auto picks from the env).")
    ] = "auto",
    base_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI-compatible server URL (vLLM, llama.cpp, Ollama…); a local one "
            "needs no API key variable."
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name for the chosen provider.")] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="The environment variable holding the OpenAI-compatible server's key "
            "(default: OPENAI_API_KEY, none for a local --base-url; '' for none)."
        ),
    ] = None,
) -> None:
    """Scaffold .minds/ and tasks/example.tsk/ (idempotent; never overwrites without --force)."""
    from mindloop.rtws import init_rtws

    target = directory if directory is not None else get_rtws(ctx, must_exist=False)
    report = init_rtws(
        target,
        force=force,
        provider=provider,
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
    )
    for rel in report.created:
        console.print(f"[green]created[/] {rel}")
    for rel in report.skipped:
        console.print(f"[dim]kept    {rel} (exists; --force to overwrite)[/]")
    if report.not_applied:
        console.print(
            f"[yellow]not applied: {', '.join(report.not_applied)} (the files they shape were "
            "kept; --force to overwrite them)[/]"
        )
    if not report.team_kept:
        console.print(f"rtws {report.rtws} ready; provider: [bold]{report.provider}[/]")
    elif report.provider:
        console.print(
            f"rtws {report.rtws} ready; provider unchanged: [bold]{report.provider}[/] "
            "(from the kept .minds/team.yaml)"
        )
    else:
        console.print(
            f"rtws {report.rtws} ready; provider unchanged (the kept .minds/team.yaml sets "
            "no member_defaults.provider)"
        )
    for i, line in enumerate(NEXT_STEPS):
        lead = "next: " if i == 0 else "      "
        console.print(lead + line.format(rtws=target), markup=False, soft_wrap=True)


# What a new user runs after `init` (each works offline on the scaffolded mock script).
NEXT_STEPS = (
    "mindloop run -C {rtws} tasks/example.tsk    (the example task's work loop, to DONE)",
    'mindloop chat -C {rtws} --task tasks/example.tsk "list the files and summarise README.md"',
    "mindloop demo    (a whole team's task, offline)",
)


def _problem(p: Any) -> dict[str, Any]:
    """A problem for `check --json`: its fields when it has them, and its one line."""
    if hasattr(p, "model_dump"):
        return {**p.model_dump(), "text": str(p)}
    return {"text": str(p)}


def check(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    probe: Annotated[
        bool,
        typer.Option(
            "--probe", help="Also start every MCP server of .minds/mcp.yaml and list its tools."
        ),
    ] = False,
) -> None:
    """Validate .minds/ configuration and Taskdoc packages; exit 1 with file:line errors."""
    from mindloop.cli.probe import print_servers
    from mindloop.config import check_config
    from mindloop.rtws.checks import inspect_rtws, rtws_warnings

    rtws = get_rtws(ctx)
    found = inspect_rtws(rtws, probe=probe)
    problems: list[Any] = [*check_config(rtws), *found.problems]
    warnings = rtws_warnings(rtws)
    if as_json:
        print_json(
            {
                "ok": not problems,
                "problems": [_problem(p) for p in problems],
                "warnings": warnings,
                "servers": [
                    {
                        "server": r.server,
                        "toolset": r.toolset,
                        "started": r.started,
                        "tools": [t.name for t in r.tools],
                        "notes": r.notes,
                    }
                    for r in found.servers
                ],
            }
        )
        if problems:
            raise typer.Exit(1)
        return
    for line in warnings:
        err_console.print(f"warning: {line}", markup=False, soft_wrap=True)
    if probe:
        print_servers(found.servers)
    if problems:
        for p in problems:
            err_console.print(str(p), markup=False, soft_wrap=True)
        err_console.print(f"{len(problems)} problem(s) found")
        raise typer.Exit(1)
    console.print("configuration OK")


def schema(
    name: Annotated[
        str | None,
        typer.Argument(
            help="team | llm | mcp (default: all three, keyed by file).", show_default=False
        ),
    ] = None,
) -> None:
    """Print the JSON Schema of .minds/team.yaml, .minds/llm.yaml or .minds/mcp.yaml, for
    editors."""
    from mindloop.config.schema import SCHEMA_FILES, json_schema

    if name is None:
        print_json({file: json_schema(key) for key, (file, _) in SCHEMA_FILES.items()})
        return
    key = name.removeprefix(".minds/").removesuffix(".yaml")
    if key not in SCHEMA_FILES:
        raise MindloopError(f"no schema for {name!r}: choose one of {', '.join(SCHEMA_FILES)}")
    print_json(json_schema(key))
