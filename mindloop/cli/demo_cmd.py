"""`mindloop demo`: play the offline demo task (`mindloop.demo`) through the work loop,
via the use-case layer, answering its question and approving its one call on the human's
behalf; `demo --init` only creates its rtws, for a human to play (e.g. in the browser)."""

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
    dialog_id: str  # the task's loop root
    result: DriveResult  # the loop root's last drive
    state: str  # where the state is (`store.location.state_location`)
    dialogs: int
    questions_answered: int
    outcome: str = ""
    approvals: int = 0  # calls the demo approved on the human's behalf  # what the task's loop came to (`done` when the demo worked)


async def run_demo(directory: Path | None, console: Console) -> DemoReport:
    """Create the demo rtws and run its task through the work loop, rendering it live."""
    from mindloop import service
    from mindloop.cli.loop_render import LoopRenderer
    from mindloop.demo import DEMO_PROMPT, DEMO_TASK, HUMAN_ANSWER, prepare_demo_rtws
    from mindloop.dialogs.outcomes import DriveEnd, DriveResult
    from mindloop.store.location import state_location

    directory = prepare_demo_rtws(directory)
    console.rule("mindloop demo")
    console.print(f"rtws: {directory}  (scripted mock model, no network)")
    project = service.open_project(directory)
    renderer = LoopRenderer(console, show_thinking=True)
    project.subscribe(renderer.handle)
    answered = approved = 0
    try:
        console.print(f"[bold]you:[/] mindloop run {DEMO_TASK} -m {escape(repr(DEMO_PROMPT))}")
        report = await service.run_task(project, DEMO_TASK, message=DEMO_PROMPT)
        drives = list(report.drives)
        while report.outcome is service.Outcome.WAITING:
            approvals = service.list_approvals(project, task=DEMO_TASK)
            if not report.questions and not approvals:
                break
            renderer.close()
            for q in report.questions:
                console.print(f"[bold]human (answered by the demo):[/] {escape(HUMAN_ANSWER)}")
                console.print(f'[dim]  = mindloop answer -C {directory} {q.id} "{HUMAN_ANSWER}"[/]')
                service.answer(project, q.id, HUMAN_ANSWER)
                answered += 1
            for a in approvals:
                console.print(f"[bold]human (approved by the demo):[/] {escape(a.summary)}")
                console.print(f"[dim]  = mindloop approve -C {directory} {a.id}[/]")
                service.approve(project, a.id)
                approved += 1
            report = await service.run_task(project, DEMO_TASK)
            drives += report.drives
        root = report.root_id or ""
        loop = report.loop
        # `mindloop run`: the KB request SELF_IMPROVE queued is delivered to the KB
        # teammate's dialog (once) and processed; the task's loop has nothing left to do.
        console.print(f"[bold]you:[/] mindloop run -C {directory}")
        after = await service.run(project)
        drives += after.drives
    finally:
        renderer.close()
        await project.aclose()
    mine = [r for r in drives if r.dialog_id == root]
    result = mine[-1] if mine else DriveResult(root, DriveEnd.ERROR, error="root never ran")
    console.rule("where things are")
    console.print(f"task:       {DEMO_TASK}: {loop.outcome if loop else '?'}")
    console.print(f"state:      {escape(state_location(directory))}")
    console.print(f"files:      {directory / 'CHANGELOG.md'}, CONTRIBUTING.md, RELEASE_NOTES.md")
    console.print(f"self.md:    {directory / '.minds/team/dev/self.md'} (mindloop self history)")
    console.print(f"KB:         {directory / 'kb'} (from the KB request)")
    console.print(f"status:     mindloop status -C {directory} {DEMO_TASK}")
    console.print(f"nodes:      mindloop workspace show -C {directory} {DEMO_TASK}")
    console.print(f"tree:       mindloop dialogs tree -C {directory} {DEMO_TASK}")
    console.print(f"Taskdoc:    mindloop taskdoc show -C {directory} {DEMO_TASK}")
    console.print(f"transcript: mindloop dialogs show -C {directory} {root}")
    return DemoReport(
        directory,
        root,
        result,
        state_location(directory),
        len(report.tree),
        answered,
        loop.outcome.value if loop else "",
        approved,
    )


def prepare_only(directory: Path | None, console: Console) -> Path:
    """`demo --init`: the demo's rtws (team, mock script, task), nothing run: a new user
    plays it in the browser (or with `run`), the human's part theirs."""
    from mindloop.demo import DEMO_PROMPT, DEMO_TASK, HUMAN_ANSWER, prepare_demo_rtws

    directory = prepare_demo_rtws(directory)
    console.print(f"demo rtws: {directory}  (scripted mock model, no network)")
    console.print(f"in the browser: mindloop web -C {directory} --open")
    console.print(f"  open the task {DEMO_TASK} and send its work loop: {escape(DEMO_PROMPT)}")
    console.print(
        f'  answer its question in the inbox (e.g. "{escape(HUMAN_ANSWER)}"), approve its move'
    )
    console.print(
        f'in the terminal: mindloop run -C {directory} {DEMO_TASK} -m "{escape(DEMO_PROMPT)}"'
    )
    return directory


def demo(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Create the demo rtws here (default: a temp dir).")
    ] = None,
    init: Annotated[
        bool,
        typer.Option(
            "--init",
            help="Only create the demo rtws; start its task yourself (e.g. in `mindloop web`).",
        ),
    ] = False,
) -> None:
    """Run a task through the whole work loop offline (scripted mock model) and show
    where its state lives."""
    import asyncio

    if init:
        prepare_only(directory, console)
        return
    try:
        report = asyncio.run(run_demo(directory, console))
    except KeyboardInterrupt:
        err_console.print("demo interrupted", markup=False)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    if report.outcome != "done":
        why = f"{report.outcome or report.result.reason} {report.result.error or ''}"
        console.print(f"[red]demo stopped: {escape(why)}[/]")
        raise typer.Exit(1)
