"""`mindloop chat`: talk to a member of the team, with the transcript streamed live."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from mindloop.cli.common import console, get_rtws
from mindloop.cli.render import TranscriptRenderer
from mindloop.dialogs.runtime import DialogRuntime, DriveResult
from mindloop.errors import MindloopError

EXIT_CODES = {"done": 0, "error": 1, "step_limit": 3, "cancelled": 130}


def chat(
    ctx: typer.Context,
    message: Annotated[str, typer.Argument(help="What to say.")],
    task: Annotated[
        str | None, typer.Option("--task", "-t", help="Task package (tasks/<slug>.tsk).")
    ] = None,
    member: Annotated[str | None, typer.Option("--member", "-m", help="Who to talk to.")] = None,
    dialog: Annotated[
        str | None, typer.Option("--dialog", "-d", help="Continue this dialog (id or prefix).")
    ] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Per-drive step limit.")] = 50,
    thinking: Annotated[bool, typer.Option(help="Show thinking output.")] = False,
) -> None:
    """Send a message to a root dialog and drive it until it answers."""
    rtws = get_rtws(ctx)
    code = asyncio.run(_chat(rtws, message, task, member, dialog, max_steps, thinking))
    raise typer.Exit(code)


async def _chat(
    rtws: object,
    message: str,
    task: str | None,
    member: str | None,
    dialog: str | None,
    max_steps: int,
    thinking: bool,
) -> int:
    from pathlib import Path

    rt = DialogRuntime(Path(str(rtws)), max_steps=max_steps)
    renderer = TranscriptRenderer(console, show_thinking=thinking)
    renderer.attach(rt.bus)
    try:
        if dialog:
            if task or member:
                raise MindloopError("--dialog continues an existing dialog; drop --task/--member")
            did = rt.store.resolve_dialog_id(dialog)
            rec = rt.store.get_dialog(did)
        else:
            rec = rt.create_root_dialog(task or _only_task(rt), member)
            did = rec.id
        renderer.set_dialog(did, rec.member)
        console.print(f"[dim]dialog {did} · @{rec.member} · {rec.task_path}[/]")
        rt.post_user_message(did, message)
        console.print(f"[bold]you:[/] {message}", markup=True, highlight=False)
        result: DriveResult = await rt.drive(did)
    finally:
        renderer.close()
        await rt.aclose()
    if result.reason == "error":
        console.print(f"[red]stopped on error:[/] {result.error}", markup=True)
    elif result.reason == "step_limit":
        console.print(f"[yellow]stopped at the step limit ({max_steps}); continue with --dialog {did}[/]")
    console.print(f"[dim]{result.steps} step(s) · state in {rt.store.path} · continue with --dialog {did}[/]")
    return EXIT_CODES.get(result.reason, 1)


def _only_task(rt: DialogRuntime) -> str:
    from mindloop.taskdoc import discover_packages

    found = discover_packages(rt.rtws)
    if len(found) == 1:
        return found[0]
    if not found:
        raise MindloopError("no task package in the rtws; create one with `mindloop task new <slug>`")
    raise MindloopError("several tasks exist; choose one with --task: " + ", ".join(found))
