"""`mindloop run TASK` and `mindloop status TASK`: a task's work loop, live and at rest.

`run TASK` drives the task's loop (`service.run_task`) with the transcript streamed live
and the loop's own lines on top: each phase as it starts (with the node it works), a
progress bar over the nodes after each routing decision, dropped hints, waits. Exit codes
(DESIGN §8.6): 0 DONE, 1 error, 3 a cap reached, 4 waiting on the human, 5 the task
FAILED, 130 interrupted (the state is saved; `run` resumes). A task DONE with a self.md
change SELF_IMPROVE proposed still open (`loop.self_md.require_approval`) exits 0: nothing
waits for that approval; it is listed with the commands that decide it. `status TASK`
reads only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from mindloop.cli.common import OUTCOME_EXIT_CODES, console, get_rtws, print_json, when

if TYPE_CHECKING:
    from mindloop import service
    from mindloop.loop.api import TaskStatus

BAR = 20  # cells of the progress bar

GLYPH = {
    "NEW": "○",
    "WAIT": "⏸",
    "IN_PROGRESS": "▶",
    "COMPLETE": "◉",
    "CHECK_FAILED": "✗",
    "ADJUSTING": "↻",
    "DONE": "✓",
    "FAILED": "✗",
    "CANCELLED": "–",
}


def progress_bar(done: int, total: int) -> str:
    if total <= 0:
        return "[dim]" + "░" * BAR + "[/] no nodes yet"
    full = round(BAR * done / total)
    return f"[green]{'█' * full}[/][dim]{'░' * (BAR - full)}[/] {done}/{total} nodes"


async def run_task(
    rtws: Path,
    task: str,
    message: str | None,
    *,
    max_steps: int,
    as_json: bool,
    verbose: bool,
    thinking: bool = False,
) -> int:
    from mindloop import service
    from mindloop.cli.chat_cmd import make_renderer, start_logging
    from mindloop.store.location import state_location

    project = service.open_project(rtws, max_steps=max_steps)
    renderer = make_renderer(as_json, show_thinking=thinking)
    if renderer is not None:
        project.subscribe(renderer.handle)
    try:
        if renderer is not None:
            renderer.know_dialogs(service.list_dialogs(project))
        rel = service.check_task(project, task)  # refused before anything is written
        start_logging(project, verbose)
        report = await service.run_task(project, rel, message=message)
    finally:
        if renderer is not None:
            renderer.close()
        await project.aclose()
    if as_json:
        from mindloop.cli.chat_cmd import summary

        code = OUTCOME_EXIT_CODES[report.outcome]
        print_json(summary(report, code, state_location(project.rtws)))
        return code
    return report_task(report, rtws, state_location(rtws))


# What to do next, after a run of a task's loop came to this outcome ("": nothing).
NEXT_STEP: dict[str, str] = {
    "error": "fix the cause, then go on with: mindloop run -C {rtws} {task}",
    "cap_reached": "raise the cap, then go on with: mindloop run -C {rtws} {task}",
    "step_limit": "go on with: mindloop run -C {rtws} {task}",
    "waiting": "",  # how to answer or decide was printed with each question or approval
    "failed": 'give it new scope with: mindloop run -C {rtws} {task} -m "…"',
    "done": "",
}


def report_task(report: service.DriveReport, rtws: Path, state: str) -> int:
    """What a run of a task's loop came to — `run TASK`, and `answer` / `approve` /
    `reject` / `ask` / `chat` when what they drive is a task's loop root: the failures
    (one line each on stderr; the whole error was in the live transcript), what waits on
    the human and how to decide it, the task's line, usage, and the next step. Returns
    the exit code."""
    from mindloop.cli.chat_cmd import print_approvals, print_questions
    from mindloop.cli.usage import usage_line

    loop = report.loop
    assert loop is not None, "report_task reports a run of a task's loop"
    print_stops(report, rtws)
    print_questions(report.questions, rtws)
    print_approvals(report.approvals, rtws)
    print_loop(report, rtws)
    console.print(f"[dim]usage: {usage_line(report.usage)} (this run)[/]")
    console.print(f"[dim]state in {escape(state)} · `mindloop status {loop.task}` shows it[/]")
    step = NEXT_STEP[report.outcome].format(rtws=rtws, task=loop.task)
    if step:
        console.print(escape(step))
    return OUTCOME_EXIT_CODES[report.outcome]


def print_stops(report: service.DriveReport, rtws: Path) -> None:
    """What stopped a task's run short: failed dialogs (a line each), caps, step limits."""
    from mindloop.cli.chat_cmd import (
        TASK_STEP_HINT,
        print_capped,
        print_failures,
        print_step_limited,
    )

    print_failures(report)
    print_capped(report)
    print_step_limited(report, TASK_STEP_HINT.format(rtws=rtws))


def print_loop(report: service.DriveReport, rtws: Path) -> None:
    """What the task's loop came to (`run TASK`, `ask`): its outcome and why, and the KB
    requests it delivered."""
    loop = report.loop
    if loop is None:
        return
    color = {"done": "green", "failed": "red", "waiting": "cyan"}.get(loop.outcome, "yellow")
    # an error was shown whole in the live transcript and in a line on stderr: not again
    why = loop.reason if loop.outcome != "error" else ""
    console.print(
        f"[{color}]task {escape(loop.task)}: {loop.outcome}[/]"
        + (f" — {escape(why)}" if why else "")
    )
    if loop.kb_delivered:
        console.print(
            f"[dim]{loop.kb_delivered} KB request(s) delivered to the KB dialog; "
            f"`mindloop run -C {rtws}` lets the KB teammate process them[/]"
        )


# What `status` says of a loop root that stopped short (its dialog's status).
STOPPED_SHORT = {"error": "stopped on an error", "stopped": "stopped at the step limit"}


def status(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="The task package (tasks/<slug>.tsk).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Where a task's work loop stands: phase, node tree, open waits, retries, usage."""
    from mindloop import service

    st = service.task_status(get_rtws(ctx), task)
    if as_json:
        print_json(st.model_dump(mode="json"))
        return
    show_status(st)


def show_status(st: TaskStatus) -> None:
    from mindloop.cli.usage import usage_line

    if not st.bound:
        console.print(
            f"{escape(st.task)}: no work loop yet (start it with `mindloop run {st.task}`)"
        )
    else:
        where = f"phase {st.phase} (entry {st.entry})" if st.phase else "not started"
        if st.phase and not st.in_phase:
            where += ", ended"
        stopped = STOPPED_SHORT.get(st.root_status or "")
        # a reason naming an open question is that question's line below: not twice
        said = stopped or any(q.id in st.reason for q in st.questions)
        console.print(
            f"[bold]{escape(st.task)}[/] · "
            + (f"[red]{stopped}[/]" if stopped else str(st.status))
            + f" · {where}"
            + (f" · node {st.node}" if st.node and st.in_phase else "")
            + (f"\n  {escape(st.reason)}" if st.reason and not said else "")
        )
        if stopped:
            from mindloop.cli.chat_cmd import error_line

            if st.root_error:
                console.print(f"  [red]error:[/] {escape(error_line(st.root_error))}")
            console.print(f"  fix the cause, then go on with: mindloop run {escape(st.task)}")
    console.print(progress_bar(st.done, st.total))
    for n in st.nodes:
        extra = []
        if n.assignee != "MAIN":
            extra.append(n.assignee)
        if n.deps:
            extra.append("deps " + ", ".join(n.deps))
        if n.attempt or n.adjust_count:
            extra.append(f"attempt {n.attempt}, adjusted {n.adjust_count}×")
        if n.ready:
            extra.append("ready")
        kind = "PLANNING" if n.kind == "PLANNING" else n.type
        tail = f" [dim]({'; '.join(extra)})[/]" if extra else ""
        console.print(
            f"{'  ' * n.depth}{GLYPH.get(n.status, '?')} {n.id} {n.status} {kind} "
            f"{escape(n.title)}{tail}"
        )
        if n.check_report:
            console.print(f"{'  ' * n.depth}  [dim]report {escape(n.check_report)}[/]")
    # a question's own wait (its timeout) is shown on the question's line, not again
    asked = {w.key: w for w in st.waits if w.kind == "user_input"}
    for q in st.questions:
        wait = asked.get(q.id)
        due = f" [dim](due {when(wait.due_at)})[/]" if wait is not None and wait.due_at else ""
        console.print(f"[cyan]question {q.id}[/]: {escape(q.headline)}{due}")
    shown = {q.id for q in st.questions}
    for w in st.waits:
        if w.kind == "user_input" and w.key in shown:
            continue
        due = f", due {when(w.due_at)}" if w.due_at else ""
        console.print(f"[cyan]wait {w.id}[/] {w.kind} {escape(w.key)}{due}")
    for r in st.retry_records:
        what = "DO repair" if r.level == "L2" else "ADJUST cycle"
        console.print(
            f"[dim]retry {r.node} {r.level} #{r.attempt} {r.change_kind}: "
            f"{escape(r.change_summary)} ({what}, after {r.failure_class})[/]"
        )
    if st.last_summary is not None and st.last_summary.progress:
        console.print(f"[dim]last summary: {escape(st.last_summary.progress)}[/]")
    console.print(
        f"[dim]retries {st.retries} · refusals {st.refusals} · hints dropped "
        f"{st.hints_dropped} · re-plans {st.plan_reentries}[/]"
    )
    console.print(f"[dim]usage: {usage_line(st.usage)}[/]")
