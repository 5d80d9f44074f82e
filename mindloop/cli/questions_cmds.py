"""`mindloop questions` and `mindloop answer`: the human side of Q4H."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from mindloop.cli.common import (
    console,
    get_rtws,
    open_state,
    run_async,
    task_key,
)
from mindloop.cli.render import TranscriptRenderer
from mindloop.dialogs.scheduler import Scheduler


def questions(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Option("--task", help="Only questions of this task.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List open questions for the human, across all dialogs."""
    rtws = get_rtws(ctx)
    store = open_state(rtws)
    if store is None:
        typer.echo("[]") if as_json else console.print("no open questions")
        return
    try:
        roots = None
        if task is not None:
            roots = [
                d.id for d in store.list_dialogs(task_path=task_key(rtws, task)) if d.kind == "root"
            ]
        qs = store.open_questions(root_ids=roots)
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
            table.add_row(q.id, q.dialog_id, asked, text)
        console.print(table)
    finally:
        store.close()


def answer(
    ctx: typer.Context,
    question_id: Annotated[str, typer.Argument(help="The question id (q4h-…).")],
    text: Annotated[str, typer.Argument(help="Your answer.")],
    no_drive: Annotated[
        bool,
        typer.Option("--no-drive", help="Record the answer only; `mindloop run` drives later."),
    ] = False,
) -> None:
    """Answer a question; the asking dialog (and its tree) is driven on."""
    rtws = get_rtws(ctx)
    code = run_async(_answer(rtws, question_id, text, no_drive), rtws)
    raise typer.Exit(code)


async def _answer(rtws: Path, qid: str, text: str, no_drive: bool) -> int:
    from mindloop.dialogs.runtime import DialogRuntime  # only answering drives dialogs

    rt = DialogRuntime(rtws)
    renderer = TranscriptRenderer(console)
    renderer.attach(rt.bus)
    try:
        renderer.know_dialogs(rt.store.list_dialogs())
        did = rt.answer_question(qid, text)
        console.print(f"answered {qid} (dialog {did})")
        if no_drive:
            return 0
        sched = Scheduler(rt)
        results = await sched.run()
        pending = rt.store.open_questions()
    finally:
        renderer.close()
        await rt.aclose()
    for q in pending:
        console.print(f"[cyan]open question {q.id}[/] ({q.dialog_id}): {q.headline}")
    return 1 if any(r.reason == "error" for r in results) or sched.errors else 0
