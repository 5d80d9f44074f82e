"""`mindloop chat` and `mindloop run`: drive dialogs with the transcript streamed live.

Both are thin: the use cases (and every check of the input) are `mindloop.service`'s; here
the arguments are read, the transcript rendered and the outcome turned into an exit code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from mindloop import service
from mindloop.cli.common import (
    FILE_OPTION_HELP,
    console,
    err_console,
    get_rtws,
    read_message,
    run_async,
)
from mindloop.cli.render import TranscriptRenderer
from mindloop.cli.usage import usage_line
from mindloop.errors import MindloopError

# Waiting on the human is still a success for `chat` (the question is printed with how
# to answer it); DESIGN §8.6's exit 4 comes with the work loop.
EXIT_CODES = {
    service.Outcome.DONE: 0,
    service.Outcome.WAITING: 0,
    service.Outcome.ERROR: 1,
    service.Outcome.STEP_LIMIT: 3,
    service.Outcome.CAP_REACHED: 3,
}

RETRY_HINT = "fix the cause, then drive it again with: mindloop run --retry-errors -C {rtws}"


def chat(
    ctx: typer.Context,
    message: Annotated[
        str | None, typer.Argument(help="What to say; `-` reads it from stdin.", show_default=False)
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help=FILE_OPTION_HELP)] = None,
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
    """Send a message to a root dialog and drive its whole tree until it answers."""
    rtws = get_rtws(ctx)
    if task is not None and not task.strip():
        raise MindloopError("--task is empty: name a task package, e.g. tasks/example.tsk")
    if dialog and (task or member):
        raise MindloopError("--dialog continues an existing dialog; drop --task/--member")
    text = read_message(message, file)
    code = run_async(_chat(rtws, text, task, member, dialog, max_steps, thinking), rtws)
    raise typer.Exit(code)


async def _chat(
    rtws: Path,
    message: str,
    task: str | None,
    member: str | None,
    dialog: str | None,
    max_steps: int,
    thinking: bool,
) -> int:
    project = service.open_project(rtws, max_steps=max_steps)
    renderer = TranscriptRenderer(console, show_thinking=thinking)
    project.subscribe(renderer.handle)
    try:
        if dialog:
            posted = service.post(project, dialog, message)
        else:
            posted = service.start_chat(project, message, task=task, member=member)
        if posted.created_task is not None:
            console.print(f"[dim]created {posted.created_task} for this dialog[/]")
        rec = posted.dialog
        renderer.know_dialogs(posted.tree)
        console.print(f"[dim]dialog {rec.id} · @{rec.member} · {rec.task_path}[/]")
        console.print(f"[bold]you:[/] {escape(message)}", highlight=False)
        report = await service.run(project, root_id=rec.root_id)
    finally:
        renderer.close()
        await project.aclose()
    return report_tree(report, project.rtws, project.state_file)


def _summary(error: str | None) -> str:
    """An error on one line: its first line, and the next when the first only introduces
    it (`invalid mock script:`); the whole error was rendered live already."""
    lines = [line.strip() for line in (error or "").strip().splitlines() if line.strip()]
    if not lines:
        return "unknown error"
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]


def _who(report: service.DriveReport, dialog_id: str) -> str:
    member = report.member_of(dialog_id)
    return f"dialog {dialog_id}" + (f" (@{member})" if member else "")


def print_failures(report: service.DriveReport) -> None:
    """One line on stderr per dialog that stopped on an error (the whole error was in the
    live transcript) and per drive that raised."""
    for r in report.failed:
        err_console.print(
            f"error: {_who(report, r.dialog_id)} stopped on error: {_summary(r.error)}",
            markup=False,
        )
    for crash in report.crashed:
        err_console.print(f"error: a drive failed: {_summary(crash)}", markup=False)


def report_tree(report: service.DriveReport, rtws: Path, state_file: Path) -> int:
    """Print what a drive of one tree came to; return the command's exit code."""
    root_id = report.root_id or ""
    print_failures(report)
    if report.answer is not None:
        who = report.member_of(root_id)
        console.print(
            f"[dim](answered by another mindloop process)[/]\n@{who}: {escape(report.answer)}"
        )
    last = report.last
    if (last is not None and last.reason == "error") or report.crashed:
        console.print(RETRY_HINT.format(rtws=rtws))
    for q in report.questions:
        console.print(
            f"[cyan]question {q.id}[/] from dialog {q.dialog_id}: {escape(q.headline)}\n"
            f"  {escape(q.body)}\n"
            f'  answer with: mindloop answer -C {rtws} {q.id} "…"'
        )
    for r in report.step_limited:
        console.print(
            f"[yellow]{_who(report, r.dialog_id)} stopped at the step limit "
            f"({report.max_steps}); continue with --dialog {root_id}[/]"
        )
    print_capped(report)
    console.print(f"[dim]usage: {usage_line(report.usage)} (this run)[/]")
    if report.tree_usage is not None and report.tree_usage != report.usage:
        console.print(f"[dim]       {usage_line(report.tree_usage)} (the whole dialog tree)[/]")
    console.print(f"[dim]state in {state_file} · continue with --dialog {root_id}[/]")
    return EXIT_CODES[report.outcome]


def print_capped(report: service.DriveReport) -> None:
    """One line per drive a spending cap stopped, saying which cap."""
    for r in report.capped:
        cap = (r.cap or "").removeprefix("[mindloop] ")
        console.print(f"[yellow]{_who(report, r.dialog_id)}: {escape(cap)}[/]")


def run(
    ctx: typer.Context,
    watch: Annotated[
        bool, typer.Option("--watch", help="Keep running and pick up new work (Ctrl-C stops).")
    ] = False,
    max_steps: Annotated[int, typer.Option(min=1, help="Per-drive step limit.")] = 50,
    retry_errors: Annotated[
        bool,
        typer.Option(
            "--retry-errors",
            help="Drive again the root dialogs that stopped on an error (after you fixed "
            "its cause: a missing mock entry, an unset API key, a provider outage).",
        ),
    ] = False,
) -> None:
    """Run the backend loop: resume interrupted dialogs and drive everything drivable."""
    rtws = get_rtws(ctx)
    code = run_async(_run(rtws, watch, max_steps, retry_errors), rtws)
    raise typer.Exit(code)


async def _run(rtws: Path, watch: bool, max_steps: int, retry_errors: bool = False) -> int:
    project = service.open_project(rtws, max_steps=max_steps)
    renderer = TranscriptRenderer(console)
    project.subscribe(renderer.handle)
    try:
        resumed = project.recover()  # opens the runtime (and the state)
        renderer.know_dialogs(service.list_dialogs(project))
        if resumed:
            console.print(f"[dim]resuming {len(resumed)} interrupted dialog(s)[/]")
        if retry_errors:
            retried = service.retry(project)
            console.print(f"[dim]retrying {len(retried)} dialog(s) that stopped on an error[/]")
        report = await service.run(project, watch=watch)
    finally:
        renderer.close()
        await project.aclose()
    for q in report.questions:
        console.print(f"[cyan]open question {q.id}[/] ({q.dialog_id}): {escape(q.headline)}")
    console.print(
        f"[dim]{len(report.drives)} drive(s) · {len(report.questions)} open question(s)[/]"
    )
    console.print(f"[dim]usage: {usage_line(report.usage)}[/]")
    print_failures(report)
    print_capped(report)
    if report.failed or report.crashed:
        console.print(RETRY_HINT.format(rtws=rtws))
        return 1
    return 3 if report.capped else 0
