"""`mindloop dialogs list|show|tree|delete`: inspect stored dialogs, archive and delete them.

The service and the store are imported when a command runs, not when the CLI loads.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from mindloop.cli.common import console, get_rtws, print_json
from mindloop.errors import MindloopError

if TYPE_CHECKING:
    from mindloop import service
    from mindloop.store import MessageRecord

app = typer.Typer(no_args_is_help=True)


def _ts(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


@app.command("list")
def list_(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Option(help="Only dialogs of this task.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List dialogs, oldest first."""
    from rich.table import Table

    from mindloop import service
    from mindloop.cli.usage import cost_text

    rows = service.list_dialogs(get_rtws(ctx), task=task, counts=True, usage=True)
    if as_json:
        typer.echo(json.dumps([r.model_dump() for r in rows], indent=2, ensure_ascii=False))
        return
    if not rows:
        console.print("no dialogs yet")
        return
    table = Table("kind", "member", "task", "status", "msgs", "tokens", "cost", "created")
    table.add_column("id", no_wrap=True, min_width=14)
    for r in rows:
        u = r.usage
        tokens = f"{u.tokens:,}" if u is not None else ""
        cost = cost_text(u) if u is not None and u.generations else ""
        table.add_row(
            r.kind,
            r.member,
            r.task_path,
            r.status,
            str(r.messages),
            tokens,
            cost,
            _ts(r.created_at),
            r.id,
        )
    console.print(table)


def _render_message(m: MessageRecord) -> str:
    d = m.data
    if m.kind in {"user", "note", "tellask_result"}:
        label = {"user": "user", "note": "note", "tellask_result": "reply"}[m.kind]
        return f"[bold]{label}:[/] {escape(d.get('text', ''))}"
    if m.kind == "assistant":
        return f"[bold cyan]assistant:[/] {escape(d.get('text', ''))}"
    if m.kind == "thinking":
        return f"[dim]thinking: {escape(d.get('text', ''))}[/]"
    if m.kind == "tool_call":
        return f"[yellow]⚙ {escape(d['name'])}[/] {escape(d.get('arguments', ''))}"
    if m.kind == "tool_result":
        mark = "[red]✗[/]" if d.get("is_error") else "[green]✓[/]"
        return f"  {mark} {escape(d.get('content', ''))}"
    return escape(json.dumps(d, ensure_ascii=False))


def _render_cut(event: dict[str, Any]) -> str:
    text = str(event["data"].get("text") or "").strip() or "(nothing yet)"
    return (
        f"[dim]⏹ interrupted generation (re-run on resume, not in the history): {escape(text)}[/]"
    )


@app.command()
def show(
    ctx: typer.Context,
    dialog_id: Annotated[str, typer.Argument(help="Dialog id (or unambiguous prefix).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show one dialog's full transcript."""
    from mindloop import service
    from mindloop.cli.usage import usage_line

    shown = service.show_dialog(get_rtws(ctx), dialog_id)
    rec, msgs, gens = shown.dialog, shown.messages, shown.generations
    cut = list(shown.interrupted)
    if as_json:
        data = {
            "dialog": rec.model_dump(),
            "messages": [m.model_dump() for m in msgs],
            "generations": [g.model_dump() for g in gens],
            "usage": shown.usage.model_dump(),
            "tree_usage": shown.tree_usage.model_dump(),
            "interrupted_generations": [
                {"at": e["ts"], "text": e["data"].get("text", ""), **e["data"]} for e in cut
            ],
        }
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    console.print(
        f"[bold]dialog {rec.id}[/] · {rec.kind} · @{rec.member} · {rec.task_path} · {rec.status}"
    )
    console.print(f"[dim]usage: {usage_line(shown.usage)}[/]")
    if shown.tree_usage != shown.usage:
        console.print(f"[dim]dialog tree: {usage_line(shown.tree_usage)}[/]")
    course = None
    for m in msgs:
        while cut and cut[0]["ts"] <= m.created_at:
            console.print(_render_cut(cut.pop(0)))
        if m.course != course:
            course = m.course
            console.print(f"[dim]── course {course} ──[/]")
        if m.kind == "assistant" and not m.data.get("text"):
            continue  # a turn of tool calls only: the calls follow
        console.print(_render_message(m))
    for event in cut:
        console.print(_render_cut(event))


_KIND_LABEL = {"root": "root", "side": "side", "fbr": "FBR side (tool-less)"}


def _tree_line(node: service.TreeNode) -> str:
    rec = node.dialog
    extra = []
    if rec.session_key:
        extra.append(f"session {rec.session_key}")
    if node.asks_human:
        extra.append("waiting for the human")
    if node.waiting_on:
        extra.append(f"waiting on {node.waiting_on}")
    tail = f" ({', '.join(extra)})" if extra else ""
    lead = "  " * node.depth + ("└─ " if node.depth else "")
    return f"{lead}{rec.id} {_KIND_LABEL[rec.kind]} @{rec.member} [{rec.status}]{tail}"


@app.command()
def tree(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(help="A task package path or a dialog id (prefix).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Print the dialog tree(s) of a task, or the tree containing a dialog."""
    from mindloop import service

    trees = service.dialog_trees(get_rtws(ctx), target)
    if as_json:
        print_json([[node.model_dump(mode="json") for node in nodes] for nodes in trees])
        return
    for nodes in trees:
        for node in nodes:
            console.print(escape(_tree_line(node)))


@app.command()
def delete(
    ctx: typer.Context,
    dialog_id: Annotated[str, typer.Argument(help="A root dialog id (or unambiguous prefix).")],
    archive: Annotated[
        Path | None,
        typer.Option(
            "--archive",
            help="First write the whole tree's transcripts to this JSON file; the tree is "
            "deleted only once the file is complete.",
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Delete a root dialog and its whole tree of side dialogs (optionally archiving it).

    Its messages, generations, questions and waits go with it; the Taskdoc and its audit
    history stay. A tree that a live process is driving is refused."""
    from mindloop import service

    rtws = get_rtws(ctx)
    if not yes:
        tree = service.tree_to_delete(rtws, dialog_id)
        root, sides = tree[0], len(tree) - 1
        if not sys.stdin.isatty():
            raise MindloopError(
                f"deleting dialog {root.id} and its {sides} side dialog(s) needs "
                "confirmation: add --yes"
            )
        typer.confirm(
            f"Delete dialog {root.id} (@{root.member}, {root.task_path}) and its "
            f"{sides} side dialog(s)?",
            abort=True,
        )
    deleted = service.delete_tree(
        rtws, dialog_id, archive=archive.resolve() if archive is not None else None
    )
    if as_json:
        print_json(deleted.model_dump(mode="json"))
        return
    if deleted.archive is not None:
        console.print(f"archived {len(deleted.dialogs)} dialog(s) to {deleted.archive}")
    console.print(f"deleted dialog {deleted.root_id} and {len(deleted.dialogs) - 1} side dialog(s)")
