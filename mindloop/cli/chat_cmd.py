"""`mindloop chat` and `mindloop run`: drive dialogs with the transcript streamed live."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from mindloop.cli.common import INTERRUPTED_EXIT, console, get_rtws, run_async
from mindloop.cli.render import TranscriptRenderer
from mindloop.dialogs.runtime import DialogRuntime, DriveEnd, DriveResult
from mindloop.dialogs.scheduler import Scheduler
from mindloop.errors import MindloopError

EXIT_CODES = {
    "done": 0,
    "idle": 0,
    "waiting": 0,
    "error": 1,
    "step_limit": 3,
    "cancelled": INTERRUPTED_EXIT,
}


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
    """Send a message to a root dialog and drive its whole tree until it answers."""
    rtws = get_rtws(ctx)
    code = run_async(_chat(rtws, message, task, member, dialog, max_steps, thinking), rtws)
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
    if not message.strip():
        raise MindloopError("the message is empty: say something (nothing was created)")
    if task is not None and not task.strip():
        raise MindloopError("--task is empty: name a task package, e.g. tasks/example.tsk")
    rt = DialogRuntime(rtws, max_steps=max_steps)
    renderer = TranscriptRenderer(console, show_thinking=thinking)
    renderer.attach(rt.bus)
    try:
        rt.tree.recover()
        if dialog:
            if task or member:
                raise MindloopError("--dialog continues an existing dialog; drop --task/--member")
            rec = rt.store.get_dialog(rt.store.resolve_dialog_id(dialog))
            if rec.kind != "root":
                raise MindloopError(
                    f"dialog {rec.id} is a side dialog; chat with its root {rec.root_id}"
                )
        else:
            rec = rt.create_root_dialog(task or _default_task(rt, message), member)
        renderer.know_dialogs(rt.store.list_dialogs(root_id=rec.root_id))
        console.print(f"[dim]dialog {rec.id} · @{rec.member} · {rec.task_path}[/]")
        rt.post_user_message(rec.id, message)
        console.print(f"[bold]you:[/] {escape(message)}", highlight=False)
        sched = Scheduler(rt)
        results = await sched.run()
    finally:
        renderer.close()
        await rt.aclose()
    return _report(rt, rec.id, results, max_steps, crashed=len(sched.errors))


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else "unknown error"


def _report(
    rt: DialogRuntime,
    root_id: str,
    results: list[DriveResult],
    max_steps: int,
    *,
    crashed: int = 0,
) -> int:
    from mindloop.store import Store

    store = Store(rt.store.path)
    try:
        mine = [r for r in results if r.dialog_id == root_id]
        last = mine[-1] if mine else DriveResult(root_id, DriveEnd.WAITING)
        tree_ids = [d.id for d in store.list_dialogs(root_id=root_id)]
        questions = store.open_questions(root_ids=[root_id])
    finally:
        store.close()
    failed = [r for r in results if r.reason == "error" and r.dialog_id in tree_ids]
    for r in failed:  # the full error was rendered live; name where it happened
        console.print(
            f"[red]dialog {r.dialog_id} stopped on error:[/] {escape(_first_line(r.error))}"
        )
    if last.reason == "error" or crashed:
        console.print(_RETRY_HINT.format(rtws=rt.rtws))
    for q in questions:
        console.print(
            f"[cyan]question {q.id}[/] from dialog {q.dialog_id}: {q.headline}\n  {q.body}\n"
            f'  answer with: mindloop answer -C {rt.rtws} {q.id} "…"'
        )
    if last.reason == "step_limit":
        console.print(
            f"[yellow]stopped at the step limit ({max_steps}); continue with --dialog {root_id}[/]"
        )
    console.print(f"[dim]state in {rt.store.path} · continue with --dialog {root_id}[/]")
    if failed or crashed:  # `crashed`: drives that raised (e.g. a provider without its key)
        return 1
    return EXIT_CODES.get(last.reason, 1)


def _default_task(rt: DialogRuntime, message: str) -> str:
    """The task of a new dialog started without --task: the rtws's only package, or a new
    `tasks/<slug>.tsk/` named after the message when there is none (every dialog has a
    Taskdoc). With several packages the user must choose."""
    from mindloop.taskdoc import TaskPackage, discover_packages

    found = discover_packages(rt.rtws)
    if len(found) == 1:
        return found[0]
    if found:
        raise MindloopError("several tasks exist; choose one with --task: " + ", ".join(found))
    pkg = TaskPackage.create(rt.rtws, task_slug(message), goal=message, exist_ok=True)
    console.print(f"[dim]created {pkg.rel_path} for this dialog[/]")
    return pkg.rel_path


def task_slug(message: str, max_words: int = 5) -> str:
    """`Fix the login page!` -> `fix-the-login-page`; `task` when nothing is left."""
    words = re.findall(r"[a-z0-9]+", message.lower())[:max_words]
    return "-".join(words)[:48].strip("-") or "task"


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
    rt = DialogRuntime(rtws, max_steps=max_steps)
    renderer = TranscriptRenderer(console)
    renderer.attach(rt.bus)
    try:
        renderer.know_dialogs(rt.store.list_dialogs())
        resumed = rt.tree.recover()
        if resumed:
            console.print(f"[dim]resuming {len(resumed)} interrupted dialog(s)[/]")
        if retry_errors:
            retried = rt.retry_stopped()
            console.print(
                f"[dim]retrying {len(retried)} dialog(s) that stopped on an error "
                "or at the step limit[/]"
            )
        sched = Scheduler(rt)
        results = await sched.run(watch=watch)
        questions = rt.store.open_questions()
    finally:
        renderer.close()
        await rt.aclose()
    for q in questions:
        console.print(f"[cyan]open question {q.id}[/] ({q.dialog_id}): {q.headline}")
    console.print(f"[dim]{len(results)} drive(s) · {len(questions)} open question(s)[/]")
    failed = any(r.reason == "error" for r in results) or sched.errors
    if failed:
        console.print(_RETRY_HINT.format(rtws=rtws))
    return 1 if failed else 0


_RETRY_HINT = "fix the cause, then drive it again with: mindloop run --retry-errors -C {rtws}"
