"""The `mindloop` command line (typer + rich).

User mistakes (missing rtws, bad config, unknown ids) print one line and exit non-zero;
a traceback only with `--debug`.

Start-up is kept cheap (`mindloop --help` must answer at once): this module and the
command modules import only typer and the standard library at import time; the engine,
the store (SQLAlchemy), pydantic models and the provider SDKs are imported inside the
commands that use them.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from mindloop.cli import dialogs_cmds, self_cmds, workspace_cmds
from mindloop.cli.approvals_cmds import approve, reject
from mindloop.cli.ask_cmd import ask
from mindloop.cli.chat_cmd import chat, run
from mindloop.cli.common import err_console
from mindloop.cli.demo_cmd import demo
from mindloop.cli.event_cmd import event
from mindloop.cli.loop_cmds import status
from mindloop.cli.questions_cmds import answer, questions
from mindloop.cli.setup_cmds import check, init, schema
from mindloop.cli.taskdoc_cmds import task_app, taskdoc_app, tasks_command
from mindloop.cli.web_cmd import web
from mindloop.cli.worker_cmds import worker, workers
from mindloop.errors import MindloopError

app = typer.Typer(
    name="mindloop",
    help="A local-first runtime for teams of LLM agents.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

GLOBAL_PANEL = "Global options"


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"mindloop {version('mindloop')}")
        except PackageNotFoundError:  # pragma: no cover - run from a source tree
            typer.echo("mindloop (not installed)")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    rtws: Annotated[
        Path | None,
        typer.Option(
            "-C", "--rtws", help="The runtime workspace (default: .).", rich_help_panel=GLOBAL_PANEL
        ),
    ] = None,
    debug: Annotated[
        bool,
        typer.Option("--debug", help="Show tracebacks on errors.", rich_help_panel=GLOBAL_PANEL),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Also write the log (.mindloop/logs/) to stderr.",
            rich_help_panel=GLOBAL_PANEL,
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_version
        ),
    ] = False,
) -> None:
    ctx.obj = {"rtws": str(rtws) if rtws else None, "debug": debug, "verbose": verbose}


app.command()(init)
app.command()(check)
app.command()(schema)
app.command()(chat)
app.command()(ask)
app.command()(run)
app.command()(questions)
app.command()(answer)
app.command()(approve)
app.command()(reject)
app.command()(event)
app.command()(demo)
app.command()(status)
app.command()(web)
app.add_typer(dialogs_cmds.app, name="dialogs", help="Inspect, archive and delete dialogs.")
app.add_typer(task_app, name="task", help="Create tasks (Taskdoc packages).")
app.add_typer(self_cmds.app, name="self", help="A member's self.md: its history and reverts.")
app.add_typer(taskdoc_app, name="taskdoc", help="Show, edit, audit and migrate Taskdocs.")
app.command("tasks")(tasks_command)
app.command()(worker)
app.command()(workers)
for _name, _sub, _help in workspace_cmds.GROUPS:
    app.add_typer(_sub, name=_name, help=_help)


GLOBAL_FLAGS = ("--debug", "--verbose")
GLOBAL_VALUE_OPTIONS = ("-C", "--rtws")


def hoist_global_options(args: list[str]) -> list[str]:
    """Let `-C DIR`, `--rtws DIR`, `--debug` and `--verbose` stand anywhere on the line (as
    in `mindloop chat -C proj …`): move them in front of the subcommand. `--` ends
    options."""
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


def _global_copy(param: Any) -> Any:
    """The root's option as every subcommand shows (and accepts) it: its value goes to
    the root context, where `get_rtws` and the error handling read it."""
    name = param.name

    def store(ctx: Any, _param: Any, value: Any) -> None:
        if value is None or value is False:
            return
        root = ctx.find_root()
        if not isinstance(root.obj, dict):
            root.obj = {}
        root.obj[name] = str(value) if name == "rtws" else value

    twin = copy.copy(param)
    twin.expose_value = False
    twin.callback = store
    return twin


def build_command() -> Any:
    """The click command tree of `app`, with the global options (`-C`, `--debug`,
    `--verbose`) shown in the help of every subcommand."""
    root = typer.main.get_command(app)
    shared = [_global_copy(p) for p in root.params if p.name in ("rtws", "debug", "verbose")]

    def add(cmd: Any) -> None:
        for sub in getattr(cmd, "commands", {}).values():
            have = {p.name for p in sub.params}
            sub.params.extend(p for p in shared if p.name not in have)
            add(sub)

    add(root)
    return root


def _database_error(exc: BaseException) -> BaseException | None:
    """The cause of a database failure, if `exc` is one (SQLAlchemy is imported only by
    commands that open the state, so it is looked up, not imported, here)."""
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is None or not isinstance(exc, sa_exc.SQLAlchemyError):
        return None
    return getattr(exc, "orig", None) or exc


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    args = hoist_global_options(sys.argv[1:] if argv is None else list(argv))
    debug = "--debug" in args
    try:
        rv = build_command().main(args=args, prog_name="mindloop", standalone_mode=False)
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
    except Exception as exc:
        cause = _database_error(exc)
        if cause is None or debug:
            raise
        from mindloop.store.location import database_url
        from mindloop.store.store import STATE_DIR, STATE_FILE

        url = database_url()
        if url is not None:
            from mindloop.store.postgres import redact

            where = redact(url)
        else:
            where = f"{STATE_DIR}/{STATE_FILE}"
        err_console.print(
            f"error: the runtime state {where} cannot be used: {cause} (--debug shows the details)",
            markup=False,
        )
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
