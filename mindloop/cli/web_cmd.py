"""`mindloop web`: the browser UI of an rtws, served on this machine.

Thin like every command: the configuration is checked (`service.open_project`) before the
server starts, the server is `mindloop.web.server`; here the options are read and the
address printed. The web modules (Starlette, uvicorn) are imported when the command
runs: they are an optional extra (`pip install 'mindloop[web]'`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from mindloop.cli.common import console, err_console, get_rtws, global_option, run_async
from mindloop.errors import MindloopError

if TYPE_CHECKING:
    from pathlib import Path

    from mindloop.web.server import Serving


def web(
    ctx: typer.Context,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free port).")] = 0,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Allow a --host that is not a loopback address (prints a warning).",
        ),
    ] = False,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the address in the default browser.")
    ] = False,
    drive: Annotated[
        bool,
        typer.Option(
            help="Drive what the browser starts in this process (--no-drive: leave it to a "
            "`mindloop run --watch`)."
        ),
    ] = True,
    stream_lifetime: Annotated[
        float,
        typer.Option(
            min=0.5,
            help="Seconds a live event stream lasts before the browser reconnects and resumes it.",
        ),
    ] = 600.0,
) -> None:
    """Serve the web UI: tasks, Taskdocs, dialog trees streaming live, questions.

    Prints the address with this run's token; every request needs it. Ctrl-C stops the
    server (drives under way are saved; `mindloop run` resumes them)."""
    try:
        import mindloop.web.server  # noqa: F401
    except ImportError as exc:
        raise MindloopError(
            f"the web UI needs its extra: pip install 'mindloop[web]' ({exc.name} is missing)"
        ) from None
    rtws = get_rtws(ctx)
    verbose = bool(global_option(ctx, "verbose"))
    code = run_async(
        _web(rtws, host, port, allow_remote, open_browser, drive, stream_lifetime, verbose), rtws
    )
    raise typer.Exit(code)


async def _web(
    rtws: Path,
    host: str,
    port: int,
    allow_remote: bool,
    open_browser: bool,
    drive: bool,
    stream_lifetime: float,
    verbose: bool,
) -> int:
    from mindloop import service
    from mindloop.cli.chat_cmd import start_logging
    from mindloop.web.server import listen, refuse_remote, remote_warning, serve

    # Everything that can be refused is, before anything is written (state, logs).
    refuse_remote(host, allow_remote)
    project = service.open_project(rtws)
    try:
        sock = listen(host, port)
    except BaseException:
        await project.aclose()
        raise
    warning = remote_warning(host)
    if warning is not None:
        err_console.print(warning, markup=False, soft_wrap=True)

    def announce(serving: Serving) -> None:
        console.print(f"mindloop web: {rtws}", markup=False)
        console.print(f"  {serving.url}", markup=False, soft_wrap=True)
        how = "" if drive else " · not driving (--no-drive)"
        console.print(
            f"open it in a browser (the token is this run's){how}; Ctrl-C stops the server",
            markup=False,
        )

    try:
        start_logging(project, verbose)
        await serve(
            project,
            sock,
            host=host,
            open_browser=open_browser,
            drive=drive,
            stream_lifetime=stream_lifetime,
            announce=announce,
        )
    finally:
        await project.aclose()
    return 0
