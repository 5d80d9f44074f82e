"""`mindloop questions` and `mindloop answer`: the human side of Q4H."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from mindloop.cli.chat_cmd import JSON_HELP, settle_and_drive
from mindloop.cli.common import (
    FILE_OPTION_HELP,
    console,
    drives,
    get_rtws,
    global_option,
    print_json,
    read_message,
    run_async,
)


def questions(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Option("--task", help="Only questions of this task.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List what waits on the human, across all dialogs: open questions (`answer`), calls
    waiting for approval (`approve` / `reject`), and the Router's questions of which task
    a message continues (`answer`)."""
    from rich.table import Table

    from mindloop import service

    rtws = get_rtws(ctx)
    qs = service.list_questions(rtws, task=task)
    aps = service.list_approvals(rtws, task=task)
    routes = service.list_router_questions(rtws) if task is None else []
    tasks = service.tasks_of(rtws, [*(q.dialog_id for q in qs), *(a.dialog_id for a in aps)])
    if as_json:
        print_json(
            [
                {"kind": "question", "task": tasks[q.dialog_id], **q.model_dump(mode="json")}
                for q in qs
            ]
            + [
                {"kind": "approval", "task": tasks[a.dialog_id], **a.model_dump(mode="json")}
                for a in aps
            ]
            + [{"kind": "route", "task": None, **r.model_dump(mode="json")} for r in routes]
        )
        return
    if not qs and not aps and not routes:
        console.print("no open questions or approvals")
        return
    # Ids are what the user types next (`answer ID`): never cut, whatever the width; the
    # task, dialog and time share one column so the question keeps room in 80 columns.
    table = Table("id", "task · dialog · asked", "what")
    table.columns[0].no_wrap = True
    table.columns[1].overflow = "fold"
    for q in qs:
        text = "question: " + q.headline + (f"\n{q.body}" if q.body else "")
        table.add_row(q.id, _where(tasks[q.dialog_id], q.dialog_id, q.asked_at), escape(text))
    for a in aps:
        text = (
            f"approval: @{a.member} asks to run {a.tool} with:\n{a.arguments}\n"
            f"digest {a.args_digest[:16]}…  (approve / reject --reason …)"
        )
        table.add_row(a.id, _where(tasks[a.dialog_id], a.dialog_id, a.asked_at), escape(text))
    for r in routes:  # the Router asks which task a message continues
        choices = "\n".join(f"{i}. {c.task}" for i, c in enumerate(r.options, 1))
        text = f"which task: {r.question}\n“{r.message}”\n{choices}\n(or `new`)"
        table.add_row(r.id, _where("(no task yet)", "router", r.asked_at), escape(text))
    console.print(table)


def _where(task: str, dialog_id: str, asked: float) -> str:
    when = datetime.fromtimestamp(asked).strftime("%Y-%m-%d %H:%M")
    return escape(f"{task}\n{dialog_id}\n{when}")


@drives
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
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Answer a question; the asking dialog (and its tree) is driven on — a task's work
    loop as `run TASK` drives it. (An approval is decided with `approve` / `reject`, never
    answered.)"""
    rtws = get_rtws(ctx)
    reply = read_message(text, file, what="answer")
    verbose = bool(global_option(ctx, "verbose"))
    code = run_async(_answer(rtws, question_id, reply, no_drive, as_json, verbose), rtws)
    raise typer.Exit(code)


async def _answer(
    rtws: Path, qid: str, text: str, no_drive: bool, as_json: bool, verbose: bool
) -> int:
    from mindloop import service

    def settle(project: service.Project) -> tuple[service.Answered, str]:
        answered = service.answer(project, qid, text, check_provider=not no_drive)
        return answered, f"answered {qid} (dialog {answered.dialog_id})"

    return await settle_and_drive(
        rtws, "answered", settle, no_drive=no_drive, as_json=as_json, verbose=verbose
    )
