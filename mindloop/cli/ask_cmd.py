"""`mindloop ask MESSAGE`: the Router picks the task (or makes one), then the task's loop
root is driven with the message (DESIGN.md §8.6, §8.8).

Thin like `chat`: `service.ask` routes and posts (and records the Router's run), the
decision is printed, and the loop root's tree is driven and reported as `chat` reports a
tree, and the task's loop line as `run TASK` prints it, with `run TASK`'s exit codes
(0 done, 1 error — a Router that could not route is one —, 3 a cap reached, 4 waiting
on the human, 5 the task FAILED, 130 interrupted). `--json` prints one summary with the
Router's run and the task beside the drive's report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from mindloop.cli.chat_cmd import JSON_HELP, make_renderer, report_tree, start_logging, summary
from mindloop.cli.common import (
    FILE_OPTION_HELP,
    OUTCOME_EXIT_CODES,
    console,
    drives,
    get_rtws,
    global_option,
    print_json,
    read_message,
    run_async,
)

if TYPE_CHECKING:
    from mindloop import service


@drives
def ask(
    ctx: typer.Context,
    message: Annotated[
        str | None, typer.Argument(help="What to say; `-` reads it from stdin.", show_default=False)
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help=FILE_OPTION_HELP)] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Per-drive step limit.")] = 50,
    thinking: Annotated[bool, typer.Option(help="Show thinking output.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Let the Router pick the task for a message (or create one), then drive that task's
    work loop, as `run TASK` does."""
    rtws = get_rtws(ctx)
    text = read_message(message, file)
    verbose = bool(global_option(ctx, "verbose"))
    code = run_async(_ask(rtws, text, max_steps, thinking, as_json, verbose), rtws)
    raise typer.Exit(code)


def _asking(asked: service.Asked, q: service.RouterQuestion, rtws: Path, as_json: bool) -> int:
    """The Router asks which task the message continues: the question, its choices and
    how to answer; exit 4 (waiting on the human)."""
    code = OUTCOME_EXIT_CODES["waiting"]
    if as_json:
        print_json(
            {
                "outcome": "waiting",
                "exit_code": code,
                "question": q.model_dump(mode="json"),
                "routing": asked.routing.model_dump(mode="json"),
            }
        )
        return code
    print_router_question(q, rtws)
    return code


def print_router_question(q: service.RouterQuestion, rtws: Path) -> None:
    console.print(f"[cyan]router: question {q.id}:[/] {escape(q.question)}")
    for i, c in enumerate(q.options, 1):
        console.print(f"  {i}. {escape(c.task)} — {escape(c.topic)}")
    console.print(
        f'  answer with: mindloop answer -C {rtws} {q.id} "{q.options[0].task}" '
        "(an option's id or number, or `new` for a new task)",
        markup=False,
        soft_wrap=True,
    )


def print_routing(asked: service.Asked) -> None:
    """The Router's decision, in a line or three."""
    task = asked.task
    assert task is not None
    decision = asked.routing.decision
    where = "new task" if asked.created_task else "task"
    console.print(f"[cyan]router:[/] {where} {task.task_path} — {escape(task.topic)}")
    if decision is not None and decision.reason:
        console.print(f"[dim]  {escape(decision.reason)}[/]")
    if asked.reply is not None:
        console.print(f"[bold]@router:[/] {escape(asked.reply)}")


async def _ask(
    rtws: Path, message: str, max_steps: int, thinking: bool, as_json: bool, verbose: bool
) -> int:
    from mindloop import service

    project = service.open_project(rtws, max_steps=max_steps)
    renderer = make_renderer(as_json, show_thinking=thinking)
    if renderer is not None:
        project.subscribe(renderer.handle)
    try:
        asked = await service.ask(project, message)
        start_logging(project, verbose)
        if asked.asking is not None:  # the human says which task: nothing to drive yet
            return _asking(asked, asked.asking, rtws, as_json)
        assert asked.posted is not None and asked.task is not None
        root = asked.posted.dialog
        if renderer is not None:
            print_routing(asked)
            renderer.know_dialogs(asked.posted.tree)
            console.print(f"[dim]dialog {root.id} · @{root.member} · {root.task_path}[/]")
            console.print(f"[bold]you:[/] {escape(message)}", highlight=False)
        report = await service.run(project, root_id=root.root_id)
    finally:
        if renderer is not None:
            renderer.close()
        await project.aclose()
    from mindloop.store.location import state_location

    if as_json:
        code = OUTCOME_EXIT_CODES[report.outcome]
        print_json(
            summary(
                report,
                code,
                state_location(project.rtws),
                created_task=asked.created_task,
                task=asked.task.model_dump(mode="json") if asked.task else None,
                routing=asked.routing.model_dump(mode="json"),
                reply=asked.reply,
            )
        )
        return code
    return report_tree(report, project.rtws, state_location(project.rtws))
