"""The `mindloop` command line (typer + rich).

User mistakes (missing rtws, bad config, unknown ids) print one line and exit non-zero;
a traceback only with `--debug`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import sqlalchemy.exc
import typer

from mindloop.cli import dialogs_cmds
from mindloop.cli.chat_cmd import chat, run
from mindloop.cli.common import console, err_console, get_rtws
from mindloop.cli.demo_cmd import demo
from mindloop.cli.probe import print_servers
from mindloop.cli.questions_cmds import answer, questions
from mindloop.cli.taskdoc_cmds import task_app, taskdoc_app, tasks_command
from mindloop.config import check_config
from mindloop.errors import MindloopError
from mindloop.rtws import init_rtws
from mindloop.store.store import STATE_DIR, STATE_FILE

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
    directory: Annotated[
        Path | None, typer.Argument(help="Where to create it (default: the rtws).")
    ] = None,
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
def check(
    ctx: typer.Context,
    probe: Annotated[
        bool,
        typer.Option(
            "--probe", help="Also start every MCP server of .minds/mcp.yaml and list its tools."
        ),
    ] = False,
) -> None:
    """Validate .minds/ configuration and Taskdoc packages; exit 1 with file:line errors."""
    from mindloop.rtws.checks import inspect_rtws, rtws_warnings

    rtws = get_rtws(ctx)
    found = inspect_rtws(rtws, probe=probe)
    problems = [str(p) for p in check_config(rtws)] + found.problems
    for line in rtws_warnings(rtws):
        err_console.print(f"warning: {line}", markup=False, soft_wrap=True)
    if probe:
        print_servers(found.servers)
    if problems:
        for line in problems:
            err_console.print(line, markup=False, soft_wrap=True)
        err_console.print(f"{len(problems)} problem(s) found")
        raise typer.Exit(1)
    console.print("configuration OK")


app.command()(chat)
app.command()(run)
app.command()(questions)
app.command()(answer)
app.command()(demo)
app.add_typer(dialogs_cmds.app, name="dialogs", help="Inspect dialogs.")
app.add_typer(task_app, name="task", help="Create tasks (Taskdoc packages).")
app.add_typer(taskdoc_app, name="taskdoc", help="Show, audit and migrate Taskdocs.")
app.command("tasks")(tasks_command)


GLOBAL_FLAGS = ("--debug",)
GLOBAL_VALUE_OPTIONS = ("-C", "--rtws")


def hoist_global_options(args: list[str]) -> list[str]:
    """Let `-C DIR`, `--rtws DIR` and `--debug` stand anywhere on the line (as in
    `mindloop chat -C proj …`): move them in front of the subcommand. `--` ends options."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":
            rest.extend(args[i:])
            break
        if tok in GLOBAL_VALUE_OPTIONS and i + 1 < len(args):
            front += [tok, args[i + 1]]
            i += 2
            continue
        if tok.startswith("--rtws=") or tok in GLOBAL_FLAGS:
            front.append(tok)
        else:
            rest.append(tok)
        i += 1
    return front + rest


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    args = hoist_global_options(sys.argv[1:] if argv is None else list(argv))
    debug = "--debug" in args
    try:
        rv = app(args=args, prog_name="mindloop", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: unknown option, missing argument …
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err_console.print(f"error: {exc.format_message()}", markup=False)
        sys.exit(exc.exit_code)
    except MindloopError as exc:
        if debug:
            raise
        err_console.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted; state is saved")
        sys.exit(130)
    # A damaged or foreign state file is a StoreError (above); this is the fallback for
    # database failures mid-command (e.g. a disk full, a lock held past busy_timeout).
    except sqlalchemy.exc.SQLAlchemyError as exc:
        if debug:
            raise
        cause = getattr(exc, "orig", None) or exc
        err_console.print(
            f"error: the runtime state {STATE_DIR}/{STATE_FILE} cannot be used: {cause} "
            "(--debug shows the details)",
            markup=False,
        )
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
