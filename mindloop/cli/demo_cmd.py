"""`mindloop demo`: play the offline demo scenario (`mindloop.demo`) through the use-case
layer, answering its one question on the human's behalf."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from mindloop.cli.common import INTERRUPTED_EXIT, console, err_console

if TYPE_CHECKING:
    from mindloop.dialogs.outcomes import DriveResult


@dataclass
class DemoReport:
    rtws: Path
    dialog_id: str
    result: DriveResult  # the root dialog's last drive
    state_file: Path
    dialogs: int
    questions_answered: int


async def run_demo(directory: Path | None, console: Console) -> DemoReport:
    """Create the demo rtws and play the scenario, rendering the transcript live."""
    from mindloop import service
    from mindloop.cli.render import TranscriptRenderer
    from mindloop.demo import DEMO_PROMPT, DEMO_TASK, DEMO_TITLE, HUMAN_ANSWER, prepare_demo_rtws
    from mindloop.dialogs.outcomes import DriveEnd, DriveResult

    directory = prepare_demo_rtws(directory)
    console.rule("mindloop demo")
    console.print(f"rtws: {directory}  (scripted mock model, no network)")
    project = service.open_project(directory)
    renderer = TranscriptRenderer(console, show_thinking=True)
    project.subscribe(renderer.handle)
    answered = 0
    try:
        posted = service.start_chat(project, DEMO_PROMPT, task=DEMO_TASK, title=DEMO_TITLE)
        root = posted.dialog.id
        console.print(f"[bold]you:[/] {escape(DEMO_PROMPT)}")
        report = await service.run(project, root_id=root)
        drives = list(report.drives)
        for q in report.questions:
            renderer.close()
            console.print(f"[bold]human (answered by the demo):[/] {escape(HUMAN_ANSWER)}")
            console.print(f'[dim]  = mindloop answer -C {directory} {q.id} "{HUMAN_ANSWER}"[/]')
            service.answer(project, q.id, HUMAN_ANSWER)
            answered += 1
        report = await service.run(project, root_id=root)
        drives += report.drives
    finally:
        renderer.close()
        await project.aclose()
    mine = [r for r in drives if r.dialog_id == root]
    result = mine[-1] if mine else DriveResult(root, DriveEnd.ERROR, error="root never ran")
    console.rule("where things are")
    console.print(f"state:      {project.state_file}")
    console.print(f"file tools: {directory / 'CHANGELOG.md'}")
    console.print(f"tree:       mindloop dialogs tree -C {directory} {DEMO_TASK}")
    console.print(f"Taskdoc:    mindloop taskdoc show -C {directory} {DEMO_TASK}")
    console.print(f"transcript: mindloop dialogs show -C {directory} {root}")
    return DemoReport(directory, root, result, project.state_file, len(report.tree), answered)


def demo(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Create the demo rtws here (default: a temp dir).")
    ] = None,
) -> None:
    """Run a short scripted scenario offline and show where its state lives."""
    import asyncio

    try:
        report = asyncio.run(run_demo(directory, console))
    except KeyboardInterrupt:
        err_console.print("demo interrupted", markup=False)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    if report.result.reason != "done":
        console.print(f"[red]demo stopped: {report.result.reason} {report.result.error or ''}[/]")
        raise typer.Exit(1)
