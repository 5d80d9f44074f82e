"""`mindloop questions` and `mindloop answer`: the human side of Q4H."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from mindloop import service
from mindloop.cli.chat_cmd import print_failures
from mindloop.cli.common import FILE_OPTION_HELP, console, get_rtws, read_message, run_async
from mindloop.cli.render import TranscriptRenderer


def questions(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Option("--task", help="Only questions of this task.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List open questions for the human, across all dialogs."""
    qs = service.list_questions(get_rtws(ctx), task=task)
    if as_json:
        typer.echo(json.dumps([q.model_dump() for q in qs], indent=2, ensure_ascii=False))
        return
    if not qs:
        console.print("no open questions")
        return
    table = Table("id", "dialog", "asked", "question")
    for q in qs:
        asked = datetime.fromtimestamp(q.asked_at).strftime("%Y-%m-%d %H:%M")
        text = q.headline + (f"\n{q.body}" if q.body else "")
        table.add_row(q.id, q.dialog_id, asked, escape(text))
    console.print(table)


def answer(
    ctx: typer.Context,
    question_id: Annotated[str, typer.Argument(help="The question id (q4h-…).")],
    text: Annotated[
        str | None,
        typer.Argument(help="Your answer; `-` reads it from stdin.", show_default=False),
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help=FILE_OPTION_HELP)] = None,
    no_drive: Annotated[
        bool,
        typer.Option("--no-drive", help="Record the answer only; `mindloop run` drives later."),
    ] = False,
) -> None:
    """Answer a question; the asking dialog (and its tree) is driven on."""
    rtws = get_rtws(ctx)
    reply = read_message(text, file, what="answer")
    code = run_async(_answer(rtws, question_id, reply, no_drive), rtws)
    raise typer.Exit(code)


async def _answer(rtws: Path, qid: str, text: str, no_drive: bool) -> int:
    project = service.open_project(rtws)
    renderer = TranscriptRenderer(console)
    project.subscribe(renderer.handle)
    try:
        renderer.know_dialogs(service.list_dialogs(project))
        answered = service.answer(project, qid, text)
        console.print(f"answered {qid} (dialog {answered.dialog_id})")
        if no_drive:
            return 0
        report = await service.run(project)
    finally:
        renderer.close()
        await project.aclose()
    for q in report.questions:
        console.print(f"[cyan]open question {q.id}[/] ({q.dialog_id}): {escape(q.headline)}")
    print_failures(report)
    return 1 if report.failed or report.crashed else 0
