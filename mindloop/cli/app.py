"""The `mindloop` command line (typer + rich).

User mistakes (missing rtws, bad config, unknown ids) print one line and exit non-zero;
a traceback only with `--debug`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import click
import typer

from mindloop.cli import dialogs_cmds
from mindloop.cli.chat_cmd import chat
from mindloop.cli.common import console, err_console, get_rtws
from mindloop.cli.demo_cmd import demo
from mindloop.cli.taskdoc_cmds import task_app, taskdoc_app, tasks_command
from mindloop.config import check_config
from mindloop.errors import MindloopError
from mindloop.rtws import init_rtws

app = typer.Typer(
    name="mindloop",
    help="A local-first runtime for teams of LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    rtws: Annotated[
        Path | None, typer.Option("-C", "--rtws", help="The runtime workspace (default: .).")
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    ctx.obj = {"rtws": str(rtws) if rtws else None, "debug": debug}


@app.command()
def init(
    ctx: typer.Context,
    directory: Annotated[Path | None, typer.Argument(help="Where to create it (default: the rtws).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    provider: Annotated[
        str, typer.Option(help="auto | mock | openai | anthropic (auto picks from the env).")
    ] = "auto",
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server URL (vLLM, llama.cpp, Ollama…).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name for the chosen provider.")] = None,
) -> None:
    """Scaffold .minds/ and tasks/example.tsk/ (idempotent; never overwrites without --force)."""
    target = directory if directory is not None else get_rtws(ctx, must_exist=False)
    report = init_rtws(target, force=force, provider=provider, base_url=base_url, model=model)
    for rel in report.created:
        console.print(f"[green]created[/] {rel}")
    for rel in report.skipped:
        console.print(f"[dim]kept    {rel} (exists; --force to overwrite)[/]")
    console.print(f"rtws {report.rtws} ready; provider: [bold]{report.provider}[/]")
    console.print(
        f'next: mindloop chat -C {target} --task tasks/example.tsk "list the files and summarise README.md"'
    )


@app.command()
def check(ctx: typer.Context) -> None:
    """Validate .minds/ configuration and Taskdoc packages; exit 1 with file:line errors."""
    from mindloop.rtws.checks import check_rtws

    rtws = get_rtws(ctx)
    problems = [str(p) for p in check_config(rtws)] + check_rtws(rtws)
    if problems:
        for line in problems:
            err_console.print(line, markup=False)
        err_console.print(f"{len(problems)} problem(s) found")
        raise typer.Exit(1)
    console.print("configuration OK")


app.command()(chat)
app.command()(demo)
app.add_typer(dialogs_cmds.app, name="dialogs", help="Inspect dialogs.")
app.add_typer(task_app, name="task", help="Create tasks (Taskdoc packages).")
app.add_typer(taskdoc_app, name="taskdoc", help="Show, audit and migrate Taskdocs.")
app.command("tasks")(tasks_command)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        rv = app(args=args, prog_name="mindloop", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except MindloopError as exc:
        if debug:
            raise
        err_console.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted; state is saved")
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
