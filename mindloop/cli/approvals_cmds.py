"""`mindloop approve` and `mindloop reject`: the human's decision on a call that waits for
approval (DESIGN §8.10). Never `answer`: an approval is decided only here (or by the same
use cases from the Python API and the web UI).

Both drive the dialog's tree on, as `answer` does, unless `--no-drive`; the exit codes are
`common.EXIT_CODES`.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mindloop.cli.chat_cmd import JSON_HELP, settle_and_drive
from mindloop.cli.common import (
    drives,
    get_rtws,
    global_option,
    run_async,
)

if TYPE_CHECKING:
    from mindloop import service

NO_DRIVE_HELP = "Record the decision only; `mindloop run` drives later."
DIGEST_HELP = (
    "Decide only if the call waiting has this digest (the one you were shown): refused, "
    "with nothing decided, if it differs."
)


@drives
def approve(
    ctx: typer.Context,
    approval_id: Annotated[str, typer.Argument(help="The approval id (apv-…).")],
    digest: Annotated[str | None, typer.Option("--digest", help=DIGEST_HELP)] = None,
    args: Annotated[
        str | None,
        typer.Option("--args", help="Approve these arguments instead (a JSON object): an edit."),
    ] = None,
    no_drive: Annotated[bool, typer.Option("--no-drive", help=NO_DRIVE_HELP)] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Approve a call that waits for approval: it runs with exactly the approved arguments
    and its dialog goes on."""
    rtws = get_rtws(ctx)
    verbose = bool(global_option(ctx, "verbose"))
    code = run_async(
        _decide(rtws, approval_id, None, digest, args, no_drive, as_json, verbose), rtws
    )
    raise typer.Exit(code)


@drives
def reject(
    ctx: typer.Context,
    approval_id: Annotated[str, typer.Argument(help="The approval id (apv-…).")],
    reason: Annotated[
        str, typer.Option("--reason", "-r", help="Why (the model reads it).", show_default=False)
    ],
    digest: Annotated[str | None, typer.Option("--digest", help=DIGEST_HELP)] = None,
    no_drive: Annotated[bool, typer.Option("--no-drive", help=NO_DRIVE_HELP)] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Reject a call that waits for approval: it never runs; its dialog reads the reason
    and goes on."""
    rtws = get_rtws(ctx)
    verbose = bool(global_option(ctx, "verbose"))
    code = run_async(
        _decide(rtws, approval_id, reason, digest, None, no_drive, as_json, verbose), rtws
    )
    raise typer.Exit(code)


def who() -> str:
    """Who decides, as recorded with the decision."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in this environment
        return "human"


async def _decide(
    rtws: Path,
    approval_id: str,
    reason: str | None,
    digest: str | None,
    edited: str | None,
    no_drive: bool,
    as_json: bool,
    verbose: bool,
) -> int:
    from mindloop import service

    def settle(project: service.Project) -> tuple[service.Decided, str]:
        decided: service.Decided
        if reason is None:
            decided = service.approve(
                project,
                approval_id,
                by=who(),
                expected_digest=digest,
                edited_args=edited,
                check_provider=not no_drive,
            )
        else:
            decided = service.reject(
                project,
                approval_id,
                reason,
                by=who(),
                expected_digest=digest,
                check_provider=not no_drive,
            )
        verb = "rejected" if decided.decision == "reject" else "approved"
        done = f": {decided.result}" if decided.result else ""
        return decided, f"{verb} {approval_id} (dialog {decided.dialog_id}){done}"

    return await settle_and_drive(
        rtws, "decided", settle, no_drive=no_drive, as_json=as_json, verbose=verbose
    )
