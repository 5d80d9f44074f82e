"""`mindloop workspace show`, `node show`, `rules add|remove|list`, `docs add|remove|
expire|activate|list`: a task's workspace for people (`mindloop.workspace.api`).

Reads never create state (a task whose workspace was never used says so); writes act as
the user, through the same commands the agents' tools use, and rewrite the projections
under `<task>.tsk/workspace/` when they commit. Every listing has `--json`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from mindloop.cli.common import console, get_rtws, print_json

if TYPE_CHECKING:
    from mindloop.workspace.api import NodeView, WorkspaceApi, WorkspaceView

workspace_app = typer.Typer(no_args_is_help=True)
node_app = typer.Typer(no_args_is_help=True)
rules_app = typer.Typer(no_args_is_help=True)
docs_app = typer.Typer(no_args_is_help=True)

# (command name, typer app, help) as the CLI registers them
GROUPS = [
    ("workspace", workspace_app, "A task's workspace: the node (to-do) tree."),
    ("node", node_app, "One node of a task's workspace."),
    ("rules", rules_app, "A task's rules: every dialog of the task follows them."),
    ("docs", docs_app, "A task's global doc index: add, remove, expire, activate, list."),
]

TaskArg = Annotated[str, typer.Argument(help="The task package, e.g. tasks/login.tsk.")]
PathArg = Annotated[str, typer.Argument(help="The doc's path or URL, as indexed.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]

GLYPHS: dict[str, tuple[str, str]] = {
    "NEW": ("○", "white"),
    "WAIT": ("⧗", "yellow"),
    "IN_PROGRESS": ("▶", "cyan"),
    "COMPLETE": ("◉", "blue"),
    "CHECK_FAILED": ("✗", "red"),
    "ADJUSTING": ("↻", "magenta"),
    "DONE": ("✓", "green"),
    "FAILED": ("✖", "bold red"),
    "CANCELLED": ("⊘", "dim"),
}


def _api(ctx: typer.Context, task: str) -> WorkspaceApi:
    from mindloop.workspace.api import WorkspaceApi

    return WorkspaceApi(get_rtws(ctx), task)


def _node_label(v: NodeView) -> str:
    n = v.node
    glyph, color = GLYPHS[n.status.value]
    parts = [f"[{color}]{glyph} {n.status.value}[/]", f"[bold]{n.id}[/]", escape(n.title)]
    kind = n.kind.value if n.kind.value == "PLANNING" else n.type.value
    parts.append(f"[dim]{kind}[/]")
    if n.assignee != "MAIN":
        parts.append(f"[magenta]@{escape(n.member or n.assignee)}[/]")
    if n.deps:
        parts.append(f"deps: {', '.join(n.deps)}")
    if n.docs:
        active = sum(1 for d in n.docs if d.status.value == "active")
        parts.append(f"docs {active}/{len(n.docs)}")
    if v.ready:
        parts.append("[green]ready[/]")
    if v.focus:
        parts.append("[bold yellow]◀ focus[/]")
    return " ".join(parts)


def render_tree(view: WorkspaceView) -> Any:
    from rich.tree import Tree

    expired = sum(1 for d in view.docs if d.status.value == "expired")
    head = (
        f"[bold]{escape(view.task)}[/]  focus: {view.focus}  rules: {len(view.rules)}  "
        f"docs: {len(view.docs)}" + (f" ({expired} expired)" if expired else "")
    )
    tree = Tree(head)
    parents: dict[int, Any] = {-1: tree}
    for v in view.nodes:
        parents[v.depth] = parents[v.depth - 1].add(_node_label(v))
    return tree


@workspace_app.command("show")
def workspace_show(ctx: typer.Context, task: TaskArg, as_json: JsonOpt = False) -> None:
    """The node tree: status glyph, kind, assignee, deps, docs, readiness and the focus."""
    with _api(ctx, task) as api:
        view = api.show()
    if as_json:
        print_json(view.model_dump(mode="json"))
        return
    if not view.exists:
        console.print(f"{escape(view.task)} has no workspace yet (its first use creates it)")
        return
    console.print(render_tree(view))


@node_app.command("show")
def node_show(
    ctx: typer.Context,
    task: TaskArg,
    node_id: Annotated[str, typer.Argument(help="The node id (root, n1, …).")],
    as_json: JsonOpt = False,
) -> None:
    """A node: requirement, criteria, doc references with their status, log, conclusion."""
    with _api(ctx, task) as api:
        v = api.node_view(node_id)
    if as_json:
        print_json(v.model_dump(mode="json"))
        return
    n = v.node
    console.print(_node_label(v))
    console.print(
        f"[dim]parent[/] {n.parent_id or '-'}  [dim]children[/] {', '.join(n.children) or '-'}  [dim]version[/] {n.version}"
    )
    console.print("[bold]Requirement[/]")
    console.print(escape(n.requirement or "-"))
    if n.acceptance_criteria:
        console.print("[bold]Acceptance criteria[/]")
        for c in n.acceptance_criteria:
            verify = f" (verify: {c.verify})" if c.verify else ""
            console.print(escape(f"- {c.id}: WHEN {c.when} THEN {c.then}{verify}"))
    console.print("[bold]Doc references[/]" if n.docs else "[bold]Doc references[/] none")
    for d in n.docs:
        desc = f" — {d.description}" if d.description else ""
        console.print(escape(f"- {d.path}{desc} ({d.status.value})"))
    for label, value in (
        ("Artifacts", ", ".join(n.artifacts)),
        ("Blockers", "; ".join(n.blockers)),
        ("Notes", n.notes),
        ("Conclusion", n.conclusion),
    ):
        if value:
            console.print(f"[bold]{label}[/]")
            console.print(escape(value))
    if n.dispatch is not None:
        console.print(f"dispatched to @{n.dispatch.member} (side dialog {n.dispatch.side_id})")
    refs = [(k, r) for k, r in (("checkpoint", n.checkpoint_ref), ("checked", n.checked_ref)) if r]
    if refs:
        console.print("  ".join(f"[dim]{k}[/] {escape(r)}" for k, r in refs))
    if n.check_report_ref:
        from mindloop.workspace.report import report_text

        console.print(f"[bold]Check report[/] ({escape(n.check_report_ref)})")
        report = v.check_report
        console.print(escape(report_text(report)) if report is not None else "(row not found)")
    if v.log:
        console.print("[bold]Log[/]")
        for e in v.log:
            at = datetime.fromtimestamp(e.at).strftime("%Y-%m-%d %H:%M:%S")
            console.print(f"[dim]{at}[/] {escape(e.actor)}: {escape(e.text)}")


@node_app.command("cancel")
def node_cancel(
    ctx: typer.Context,
    task: TaskArg,
    node_id: Annotated[str, typer.Argument(help="The node id (n1, …).")],
    reason: Annotated[
        str, typer.Option("--reason", "-r", help="Why: the node's conclusion.", show_default=False)
    ],
    as_json: JsonOpt = False,
) -> None:
    """Cancel a node (any status but DONE, FAILED, CANCELLED): its work is no longer
    wanted. A teammate's side dialog still working on it is stopped (its questions
    withdrawn; a reply it gives is dropped); the task's loop routes on without it."""
    from mindloop import service
    from mindloop.cli.common import run_async

    rtws = get_rtws(ctx)

    async def cancel() -> int:
        async with service.open_project(rtws) as project:
            done = service.cancel_node(project, task, node_id, reason)
        if as_json:
            print_json(done.model_dump(mode="json"))
            return 0
        console.print(f"cancelled {escape(done.node_id)} of {escape(done.task)}")
        for side in done.stopped:
            console.print(f"stopped its side dialog {escape(side)}")
        return 0

    raise typer.Exit(run_async(cancel(), rtws))


# ---------------------------------------------------------------------- rules


@rules_app.command("add")
def rules_add(
    ctx: typer.Context,
    task: TaskArg,
    rule: Annotated[str, typer.Argument(help="The rule, one line.")],
    as_json: JsonOpt = False,
) -> None:
    """Add a rule: every dialog of the task follows it (never duplicated)."""
    with _api(ctx, task) as api:
        added = api.add_rule(rule)
        rules = api.rules()
    if as_json:
        print_json(
            {"added": added is not None, "rules": [r.model_dump(mode="json") for r in rules]}
        )
        return
    console.print("rule added" if added else "the rule exists already")


@rules_app.command("remove")
def rules_remove(
    ctx: typer.Context,
    task: TaskArg,
    rule: Annotated[str, typer.Argument(help="The rule's exact text.")],
    as_json: JsonOpt = False,
) -> None:
    """Remove a rule (its exact text)."""
    with _api(ctx, task) as api:
        removed = api.remove_rule(rule)
    if as_json:
        print_json({"removed": removed.model_dump(mode="json")})
        return
    console.print("rule removed")


@rules_app.command("list")
def rules_list(ctx: typer.Context, task: TaskArg, as_json: JsonOpt = False) -> None:
    """The task's rules."""
    with _api(ctx, task) as api:
        rules = api.rules()
    if as_json:
        print_json([r.model_dump(mode="json") for r in rules])
        return
    if not rules:
        console.print("no rules")
    for r in rules:
        console.print(escape(f"- {r.text}"))


# ---------------------------------------------------------------------- docs


def _doc_json(d: Any) -> dict[str, Any]:
    return dict(d.model_dump(mode="json"))


def _doc_command(ctx: typer.Context, task: str, path: str, what: str, as_json: bool) -> None:
    with _api(ctx, task) as api:
        doc = {"remove": api.remove_doc, "expire": api.expire_doc, "activate": api.activate_doc}[
            what
        ](path)
    if as_json:
        print_json(_doc_json(doc))
        return
    console.print(escape(f"{doc.path}: {'removed' if what == 'remove' else doc.status.value}"))


@docs_app.command("add")
def docs_add(
    ctx: typer.Context,
    task: TaskArg,
    path: Annotated[str, typer.Argument(help="An rtws-relative file, or an http(s) URL.")],
    description: Annotated[str, typer.Option("--description", "-d", help="What it is.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Add a doc to the task's global doc index (the first place lookups search)."""
    with _api(ctx, task) as api:
        doc = api.add_doc(path, description)
    if as_json:
        print_json(_doc_json(doc))
        return
    console.print(escape(f"{doc.path}: indexed"))


@docs_app.command("remove")
def docs_remove(ctx: typer.Context, task: TaskArg, path: PathArg, as_json: JsonOpt = False) -> None:
    """Remove a doc from the index (refused while a node references it)."""
    _doc_command(ctx, task, path, "remove", as_json)


@docs_app.command("expire")
def docs_expire(ctx: typer.Context, task: TaskArg, path: PathArg, as_json: JsonOpt = False) -> None:
    """Expire a doc: it stays listed but enters no prompt, whatever the nodes reference."""
    _doc_command(ctx, task, path, "expire", as_json)


@docs_app.command("activate")
def docs_activate(
    ctx: typer.Context, task: TaskArg, path: PathArg, as_json: JsonOpt = False
) -> None:
    """Activate an expired doc again."""
    _doc_command(ctx, task, path, "activate", as_json)


@docs_app.command("list")
def docs_list(ctx: typer.Context, task: TaskArg, as_json: JsonOpt = False) -> None:
    """The global doc index, with each doc's status (expired ones stay listed)."""
    with _api(ctx, task) as api:
        docs = api.docs()
    if as_json:
        print_json([_doc_json(d) for d in docs])
        return
    if not docs:
        console.print("no docs indexed")
    for d in docs:
        desc = f" — {d.description}" if d.description else ""
        console.print(escape(f"- {d.path}{desc} ({d.status.value})"))
