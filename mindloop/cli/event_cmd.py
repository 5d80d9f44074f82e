"""`mindloop event TYPE [--key K] [--payload JSON]`: a system event from outside (a deploy
finished, a build broke, a file arrived), for the dialogs that wait for it with
`wait_for{event_type, filter}` (agent-loop §6.2 WAIT_SYSTEM_EVENT).

The event resolves the open waits of its type whose filter it matches; the one dialog
tree it woke is driven on as `answer` drives a tree (a task's loop as `run TASK` shows
it), unless `--no-drive`. An event no wait is open for yet is kept, and matched when one
opens (agent-loop §6.3).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mindloop.cli.chat_cmd import JSON_HELP, settle_and_drive
from mindloop.cli.common import drives, get_rtws, global_option, run_async

if TYPE_CHECKING:
    from mindloop import service


@drives
def event(
    ctx: typer.Context,
    event_type: Annotated[
        str, typer.Argument(help="The event's type: what `wait_for` names as event_type.")
    ],
    key: Annotated[
        str | None, typer.Option("--key", "-k", help="Its key (a wait's filter may ask for it).")
    ] = None,
    payload: Annotated[
        str | None,
        typer.Option(
            "--payload", "-p", help='What it carries: a JSON object, e.g. \'{"env": "prod"}\'.'
        ),
    ] = None,
    no_drive: Annotated[
        bool,
        typer.Option("--no-drive", help="Deliver only; `mindloop run` drives what it woke."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Deliver a system event: it resolves the `wait_for` waits of its type whose filter it
    matches, and the dialog tree that waited (a task's work loop) is driven on; with no
    such wait open yet it is kept until one opens."""
    from mindloop import service

    rtws = get_rtws(ctx)
    data = service.event_payload(payload)  # refused before anything is written
    verbose = bool(global_option(ctx, "verbose"))
    code = run_async(_event(rtws, event_type, key, data, no_drive, as_json, verbose), rtws)
    raise typer.Exit(code)


async def _event(
    rtws: Path,
    event_type: str,
    key: str | None,
    payload: dict[str, object],
    no_drive: bool,
    as_json: bool,
    verbose: bool,
) -> int:
    from mindloop import service

    def settle(project: service.Project) -> tuple[service.Delivered, str]:
        done = service.deliver_event(project, event_type, key=key, payload=payload)
        what = f"event {done.event_type}" + (f" (key {done.key})" if done.key else "")
        if done.kept is not None:
            return done, f"{what}: no wait for it is open; kept until one opens"
        line = f"{what}: resolved {len(done.resolved)} wait(s) of {', '.join(done.dialogs)}"
        if len(done.root_ids) > 1:
            line += f"; {len(done.root_ids)} dialog trees woke: `mindloop run` drives them"
        return done, line

    return await settle_and_drive(
        rtws, "delivered", settle, no_drive=no_drive, as_json=as_json, verbose=verbose
    )
