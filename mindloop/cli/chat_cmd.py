"""`mindloop chat` and `mindloop run`: drive dialogs with the transcript streamed live.

Both are thin: the use cases (and every check of the input) are `mindloop.service`'s; here
the arguments are read, the transcript rendered and the outcome turned into an exit code
(DESIGN §8.6: 0 done, 1 error, 3 a cap reached, 4 waiting on the human, 130 interrupted).
With `--json` the transcript is not streamed and one JSON summary is printed instead.
The service and the renderer are imported when a command runs, not when the CLI loads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from mindloop.cli.common import (
    FILE_OPTION_HELP,
    OUTCOME_EXIT_CODES,
    console,
    drives,
    err_console,
    get_rtws,
    global_option,
    print_json,
    read_message,
    run_async,
)
from mindloop.errors import MindloopError

if TYPE_CHECKING:
    from mindloop import service
    from mindloop.cli.render import TranscriptRenderer

log = logging.getLogger("mindloop.cli")

RETRY_HINT = "fix the cause, then drive it again with: mindloop run --retry-errors -C {rtws}"
JSON_HELP = "Print one JSON summary instead of the live transcript."
# How often `run --watch` checks whether it has become idle (seconds).
HEARTBEAT = 0.5


@drives
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
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Send a message to a root dialog and drive its whole tree until it answers (the
    root of a task's work loop: that loop, as `run TASK` does)."""
    rtws = get_rtws(ctx)
    if task is not None and not task.strip():
        raise MindloopError("--task is empty: name a task package, e.g. tasks/example.tsk")
    if dialog and (task or member):
        raise MindloopError("--dialog continues an existing dialog; drop --task/--member")
    text = read_message(message, file)
    options = _Options(max_steps, thinking, as_json, bool(global_option(ctx, "verbose")))
    code = run_async(_chat(rtws, text, task, member, dialog, options), rtws)
    raise typer.Exit(code)


@dataclass(frozen=True)
class _Options:
    max_steps: int
    thinking: bool
    as_json: bool
    verbose: bool


def make_renderer(as_json: bool, **kwargs: Any) -> TranscriptRenderer | None:
    """The live transcript on the console, or None with `--json` (stdout is the JSON's).
    A drive of a task's loop root runs the task's loop: its lines (phases, routing, the
    progress bar) are shown as `run TASK` shows them, whichever command drives it."""
    if as_json:
        return None
    from mindloop.cli.loop_render import LoopRenderer

    return LoopRenderer(console, **kwargs)


def start_logging(project: service.Project, verbose: bool) -> None:
    """The rotating log of the rtws (and stderr with --verbose), with the runtime's events:
    called once the command's input was accepted, so a refusal writes nothing."""
    from mindloop.cli.logs import EventLog, setup_logging

    setup_logging(project.rtws, verbose=verbose)
    project.subscribe(EventLog())


async def _chat(
    rtws: Path,
    message: str,
    task: str | None,
    member: str | None,
    dialog: str | None,
    opts: _Options,
) -> int:
    from mindloop import service
    from mindloop.store.location import state_location

    project = service.open_project(rtws, max_steps=opts.max_steps)
    renderer = make_renderer(opts.as_json, show_thinking=opts.thinking)
    if renderer is not None:
        project.subscribe(renderer.handle)
    try:
        if dialog:
            posted = service.post(project, dialog, message, drive_here=True)
        else:
            posted = service.start_chat(project, message, task=task, member=member, drive_here=True)
        start_logging(project, opts.verbose)
        rec = posted.dialog
        log.info(
            "chat: %s dialog %s (@%s)", "posted to" if dialog else "started", rec.id, rec.member
        )
        if renderer is not None:
            if posted.created_task is not None:
                console.print(f"[dim]created {posted.created_task} for this dialog[/]")
            renderer.know_dialogs(posted.tree)
            console.print(f"[dim]dialog {rec.id} · @{rec.member} · {rec.task_path}[/]")
            console.print(f"[bold]you:[/] {escape(message)}", highlight=False)
        report = await service.run(project, root_id=rec.root_id)
    finally:
        if renderer is not None:
            renderer.close()
        await project.aclose()
    if opts.as_json:
        code = OUTCOME_EXIT_CODES[report.outcome]
        print_json(
            summary(report, code, state_location(project.rtws), created_task=posted.created_task)
        )
        return code
    return report_tree(report, project.rtws, state_location(project.rtws))


def summary(report: service.DriveReport, code: int, state: str, **extra: Any) -> dict[str, Any]:
    """The `--json` summary of a run: its outcome and exit code, the root's answer (for a
    chat), failures, questions, where the state is (`state_location`), and the whole
    report."""
    last = report.last
    answer = last.final_text if last is not None and last.final_text else report.answer
    return {
        "outcome": str(report.outcome),
        "exit_code": code,
        "root_id": report.root_id,
        "answer": answer,
        "failed": [
            {"dialog_id": r.dialog_id, "member": report.member_of(r.dialog_id), "error": r.error}
            for r in report.failed
        ],
        "step_limited": [r.dialog_id for r in report.step_limited],
        "state_file": state,
        **extra,
        "report": report.model_dump(mode="json"),
    }


def error_line(error: str | None) -> str:
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
            f"error: {_who(report, r.dialog_id)} stopped on error: {error_line(r.error)}",
            markup=False,
        )
    for crash in report.crashed:
        err_console.print(f"error: a drive failed: {error_line(crash)}", markup=False)


async def settle_and_drive(
    rtws: Path,
    key: str,
    settle: Callable[[service.Project], tuple[Any, str]],
    *,
    no_drive: bool,
    as_json: bool,
    verbose: bool,
) -> int:
    """Record the human's input — `settle` returns the record (an answer, a decision, an
    event delivered: it has `root_id`, None when there is no one tree to drive) and the
    line to print — then drive its tree on (unless `no_drive`) and report as `run` does,
    the record under `key` in the JSON summary."""
    from mindloop import service
    from mindloop.store.location import state_location

    project = service.open_project(rtws)
    renderer = make_renderer(as_json)
    if renderer is not None:
        project.subscribe(renderer.handle)
    try:
        if renderer is not None:
            renderer.know_dialogs(service.list_dialogs(project))
        record, line = settle(project)
        start_logging(project, verbose)
        if not as_json:
            console.print(line)
        if record.root_id is None:  # nothing (or no one tree) to drive on here
            no_drive = True
        if not no_drive and _fleet(rtws) is not None:
            no_drive = True  # live workers drive it on (a drive here would race them)
            if not as_json:
                console.print("[dim]the workers drive it on (`mindloop workers`)[/]")
        if no_drive:
            if as_json:
                print_json({key: record.model_dump(), "driven": False})
            return 0
        service.adopt_step_limit(project, record.root_id)
        report = await service.run(project, root_id=record.root_id)
    finally:
        if renderer is not None:
            renderer.close()
        await project.aclose()
    if as_json:
        code = OUTCOME_EXIT_CODES[report.outcome]
        print_json(
            summary(report, code, state_location(project.rtws), **{key: record.model_dump()})
        )
        return code
    return report_tree(report, project.rtws, state_location(project.rtws))


def _fleet(rtws: Path) -> str | None:
    """The database URL when this rtws runs on scale-out workers now (a URL is set and a
    worker of its database is alive); None: drive in this process."""
    from mindloop.store.location import database_url

    url = database_url()
    if url is None:
        return None
    from mindloop.cli.run_workers import live_workers

    return url if live_workers(rtws) else None


def report_tree(report: service.DriveReport, rtws: Path, state: str) -> int:
    """Print what a drive of one tree came to; return the command's exit code. The tree
    of a task's loop is reported as `run TASK` reports it."""
    from mindloop.cli.usage import usage_line

    if report.loop is not None:
        from mindloop.cli.loop_cmds import report_task

        return report_task(report, rtws, state)
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
    print_questions(report.questions, rtws, with_body=True)
    print_approvals(report.approvals, rtws)
    print_step_limited(report, f"continue with --dialog {root_id}")
    print_capped(report)
    console.print(f"[dim]usage: {usage_line(report.usage)} (this run)[/]")
    if report.tree_usage is not None and report.tree_usage != report.usage:
        console.print(f"[dim]       {usage_line(report.tree_usage)} (the whole dialog tree)[/]")
    console.print(f"[dim]state in {escape(state)} · continue with --dialog {root_id}[/]")
    return OUTCOME_EXIT_CODES[report.outcome]


def print_questions(questions: Iterable[Any], rtws: Path, *, with_body: bool = False) -> None:
    """One entry per open question (`id`, `dialog_id`, `headline`, and `body` with
    `with_body`), with the command that answers it."""
    for q in questions:
        body = f"  {escape(q.body)}\n" if with_body else ""
        console.print(
            f"[cyan]question {q.id}[/] from dialog {q.dialog_id}: {escape(q.headline)}\n"
            f'{body}  answer with: mindloop answer -C {rtws} {q.id} "…"'
        )


def print_approvals(approvals: Iterable[Any], rtws: Path) -> None:
    """One entry per call waiting for the human's approval, with the commands that decide.
    A change a member proposed (nothing waits for it) says so."""
    for a in approvals:
        what = (
            f"proposes {escape(a.summary)} (open; nothing waits for it)"
            if a.proposal
            else f"asks to run {escape(a.summary)}"
        )
        console.print(
            f"[cyan]approval {a.id}[/] from dialog {a.dialog_id}: @{escape(a.member)} {what}\n"
            f"  approve with: mindloop approve -C {rtws} {a.id}\n"
            f'  reject with:  mindloop reject -C {rtws} {a.id} --reason "…"'
        )


# How a task's run says a dialog of its tree can go on after the step limit stopped it.
TASK_STEP_HINT = "drive it on with: mindloop run --retry-errors -C {rtws}"


def print_step_limited(report: service.DriveReport, hint: str) -> None:
    """One line per drive the per-drive step limit stopped, and how to go on."""
    for r in report.step_limited:
        console.print(
            f"[yellow]{_who(report, r.dialog_id)} stopped at the step limit "
            f"({report.max_steps}); {escape(hint)}[/]"
        )


def print_capped(report: service.DriveReport) -> None:
    """One line per drive a spending cap stopped, saying which cap."""
    for r in report.capped:
        cap = (r.cap or "").removeprefix("[mindloop] ")
        console.print(f"[yellow]{_who(report, r.dialog_id)}: {escape(cap)}[/]")


@drives
def run(
    ctx: typer.Context,
    task: Annotated[
        str | None,
        typer.Argument(
            help="Drive this task's work loop (tasks/<slug>.tsk) until DONE; without it, "
            "everything. With MINDLOOP_DATABASE_URL and live workers (`mindloop worker`): "
            "enqueue the task's loop for them and follow it.",
            show_default=False,
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option("--message", "-m", help="With TASK: tell the task this first (new scope)."),
    ] = None,
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
    dialog: Annotated[
        str | None,
        typer.Option(
            "--dialog",
            "-d",
            help="With --retry-errors: retry only this root dialog's tree (id or prefix), "
            "and report on it.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Run a task's work loop (PLAN → DO → CHECK → ADJUST → SELF_IMPROVE) until it is DONE,
    FAILED, reaches a cap or waits on you; without TASK, resume every task's loop and
    drive every other drivable dialog."""
    rtws = get_rtws(ctx)
    if task is not None:
        if watch or retry_errors or dialog is not None:
            raise MindloopError("TASK runs that task's loop; drop --watch/--retry-errors/--dialog")
        on_workers = _fleet(rtws)
        if on_workers is not None:  # the loop runs on the workers (Scale-out)
            from mindloop.cli.run_workers import run_on_workers

            raise typer.Exit(
                run_on_workers(rtws, on_workers, task, message, as_json, max_steps=max_steps)
            )
        from mindloop.cli.loop_cmds import run_task

        verbose = bool(global_option(ctx, "verbose"))
        loop = run_task(rtws, task, message, max_steps=max_steps, as_json=as_json, verbose=verbose)
        raise typer.Exit(run_async(loop, rtws))
    if message is not None:
        raise MindloopError(
            "--message is for a task's loop: name the TASK (mindloop run TASK -m …)"
        )
    if dialog is not None and not retry_errors:
        raise MindloopError("--dialog chooses the tree --retry-errors retries: add --retry-errors")
    if watch and as_json:
        raise MindloopError("--json prints a summary when the run ends; --watch never ends")
    verbose = bool(global_option(ctx, "verbose"))
    code = run_async(_run(rtws, watch, max_steps, retry_errors, dialog, as_json, verbose), rtws)
    raise typer.Exit(code)


async def _heartbeat(renderer: TranscriptRenderer) -> None:
    import asyncio

    while True:
        await asyncio.sleep(HEARTBEAT)
        renderer.tick()


async def _run(
    rtws: Path,
    watch: bool,
    max_steps: int,
    retry_errors: bool = False,
    dialog: str | None = None,
    as_json: bool = False,
    verbose: bool = False,
) -> int:
    import asyncio

    from mindloop import service
    from mindloop.cli.usage import usage_line
    from mindloop.store.location import state_location

    project = service.open_project(rtws, max_steps=max_steps)
    renderer = make_renderer(as_json, tag_lines=watch)
    if renderer is not None:
        project.subscribe(renderer.handle)
    beat: asyncio.Task[None] | None = None
    root_id: str | None = None
    try:
        resumed = project.recover()  # opens the runtime (and the state)
        start_logging(project, verbose)
        if renderer is not None:
            renderer.know_dialogs(service.list_dialogs(project))
        if resumed and not as_json:
            console.print(f"[dim]resuming {len(resumed)} interrupted dialog(s)[/]")
        if retry_errors:
            retried = service.retry(project, dialog)
            if dialog is not None:  # a root: `retry` refuses a side dialog
                root_id = project.runtime.store.resolve_dialog_id(dialog)
            if not as_json:
                console.print(f"[dim]retrying {len(retried)} dialog(s) that stopped short[/]")
        if watch and renderer is not None:
            console.print(
                f"[dim]watching {rtws} for work (pid {os.getpid()}); every line shows its "
                "dialog and member; Ctrl-C stops[/]"
            )
            beat = asyncio.create_task(_heartbeat(renderer))
        report = await service.run(project, watch=watch, root_id=root_id)
    finally:
        if beat is not None:
            beat.cancel()
        if renderer is not None:
            renderer.close()
        await project.aclose()
    code = OUTCOME_EXIT_CODES[report.outcome]
    if as_json:
        print_json(summary(report, code, state_location(project.rtws)))
        return code
    if root_id is not None:
        return report_tree(report, project.rtws, state_location(project.rtws))
    for q in report.questions:
        console.print(f"[cyan]open question {q.id}[/] ({q.dialog_id}): {escape(q.headline)}")
    print_approvals(report.approvals, rtws)
    waiting = f"{len(report.questions)} open question(s)"
    if report.approvals:
        waiting += f" · {len(report.approvals)} approval(s)"
    console.print(f"[dim]{len(report.drives)} drive(s) · {waiting}[/]")
    console.print(f"[dim]usage: {usage_line(report.usage)}[/]")
    print_failures(report)
    print_capped(report)
    if report.failed or report.crashed:
        console.print(RETRY_HINT.format(rtws=rtws))
    return code
