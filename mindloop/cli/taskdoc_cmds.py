"""`mindloop task new`, `mindloop tasks`, `mindloop taskdoc show|edit|migrate`.

These are the human's side of the Taskdoc: create a package, list packages, read it — as
a person does (each section with when and by whom it was last changed) or exactly as a
model sees it (`--effective`) — with one section's history, replace one section (in
`$EDITOR`, or from `--content`/stdin), migrate old single-file Taskdocs. Changes made here
are audited with the actor `human`, through the same path as `change_mind`.

The store and the Taskdoc modules are imported when a command runs, not when the CLI
loads.
"""

from __future__ import annotations

import difflib
import os
import shlex
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from mindloop.cli.common import console, err_console, get_rtws, print_json
from mindloop.errors import MindloopError, TaskPathError

if TYPE_CHECKING:
    from mindloop.i18n import Lang
    from mindloop.store import Store, TaskdocChange
    from mindloop.taskdoc.mind import SectionStatus
    from mindloop.taskdoc.package import TaskPackage

HUMAN_ACTOR = "human"  # `taskdoc.human.HUMAN_ACTOR` (not imported: the CLI loads cheaply)

task_app = typer.Typer(no_args_is_help=True, help="Create Taskdoc packages.")
taskdoc_app = typer.Typer(no_args_is_help=True, help="Inspect and migrate Taskdocs.")


def _ts(t: float | None) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S") if t else "-"


def _store_if_any(rtws: Path) -> Store | None:
    """The rtws store if the runtime ever ran here (reading must not create state)."""
    from mindloop.store import Store

    return Store.for_rtws(rtws) if Store.exists_for(rtws) else None


def _audit_created(rtws: Path, pkg: TaskPackage) -> None:
    """Record the sections a human created (see `taskdoc.mind.record_created`)."""
    from mindloop.store import Store
    from mindloop.taskdoc.mind import record_created

    store = Store.for_rtws(rtws)
    try:
        record_created(pkg, store, HUMAN_ACTOR)
    finally:
        store.close()


def _open_package(rtws: Path, path: str) -> TaskPackage:
    from mindloop.taskdoc.package import TaskPackage

    pkg = TaskPackage(rtws, path)
    if not pkg.exists():
        raise TaskPathError(
            f"Taskdoc package {pkg.rel_path} does not exist (create it with "
            "`mindloop task new <slug>`)"
        )
    return pkg


def _maintainer(rtws: Path, store: Store | None, task_path: str) -> str:
    """The member of the latest root dialog on this Taskdoc, else the team's default
    responder (who a new dialog would start with), else the word `root`."""
    from mindloop.config import load_config
    from mindloop.taskdoc.human import maintainer

    try:
        default = load_config(rtws).team.default_responder
    except MindloopError:
        default = "root"
    return maintainer(store, task_path, default)


def _lang(rtws: Path) -> Lang:
    """The team's work language (the texts `change_mind` answers in), `en` without one."""
    from mindloop.config import load_config

    try:
        return load_config(rtws).team.work_language
    except MindloopError:
        return "en"


def _section_ref(ref: str, option: str = "--history") -> str:
    """The section named by an option or argument, or an error naming it."""
    from mindloop.taskdoc.human import section_ref

    return section_ref(ref, option)


def _last_updated(statuses: list[SectionStatus]) -> SectionStatus | None:
    dated = [s for s in statuses if s.updated_at is not None]
    return max(dated, key=lambda s: s.updated_at or 0.0) if dated else None


@task_app.command("new")
def task_new(
    ctx: typer.Context,
    slug: Annotated[str, typer.Argument(help="Task name; creates tasks/<slug>.tsk/.")],
    goal: Annotated[str | None, typer.Option("--goal", help="Text of goals.md.")] = None,
    constraint: Annotated[
        list[str] | None,
        typer.Option("--constraint", help="One constraint (repeatable); a bullet each."),
    ] = None,
) -> None:
    """Create a Taskdoc package with goals.md, constraints.md and progress.md."""
    from mindloop.taskdoc.package import TaskPackage

    rtws = get_rtws(ctx)
    pkg = TaskPackage.create(rtws, slug, goal=goal, constraints=constraint or [])
    _audit_created(rtws, pkg)
    console.out(pkg.rel_path)


def tasks_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the Taskdoc packages of the rtws (honours .taskdoc-ignore)."""
    from rich.table import Table

    from mindloop.taskdoc.discovery import discover_packages
    from mindloop.taskdoc.mind import section_status
    from mindloop.taskdoc.package import TaskPackage
    from mindloop.taskdoc.sections import SECTION_SUFFIX

    rtws = get_rtws(ctx)
    store = _store_if_any(rtws)
    rows: list[dict[str, Any]] = []
    try:
        found = discover_packages(rtws)
        for rel in found:
            statuses = section_status(TaskPackage(rtws, rel), store)
            last = _last_updated(statuses)
            rows.append(
                {
                    "path": rel,
                    "sections": [
                        s.section.removesuffix(SECTION_SUFFIX) for s in statuses if s.exists
                    ],
                    "updated_at": last.updated_at if last else None,
                    "updated_by": last.actor_member if last else None,
                }
            )
    finally:
        if store is not None:
            store.close()
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("no Taskdoc packages (create one with `mindloop task new <slug>`)")
        return
    table = Table("path", "sections present", "last updated")
    for row in rows:
        when = f"{_ts(row['updated_at'])} by {row['updated_by']}" if row["updated_by"] else "-"
        table.add_row(row["path"], ", ".join(row["sections"]) or "(none)", when)
    console.print(table)


def _history_entries(history: list[TaskdocChange]) -> list[dict[str, Any]]:
    """Versions newest first, each with the unified diff from the version before it."""
    entries: list[dict[str, Any]] = []
    previous_after: str | None = None
    for n, change in enumerate(history, start=1):
        before = change.content_before or ""
        diff = "".join(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                change.content_after.splitlines(keepends=True),
                fromfile=f"{change.section} (before v{n})",
                tofile=f"{change.section} (v{n})",
            )
        )
        outside = n > 1 and (change.content_before or "") != (previous_after or "")
        entries.append(
            {
                "version": n,
                "id": change.id,
                "ts": change.ts,
                "time": _ts(change.ts),
                "actor_member": change.actor_member,
                "actor_dialog": change.actor_dialog,
                "hash_before": change.hash_before,
                "hash_after": change.hash_after,
                "changed_outside_before": outside,
                "created": change.hash_before is None,
                "content_after": change.content_after,
                "diff": diff,
            }
        )
        previous_after = change.content_after
    return list(reversed(entries))


@taskdoc_app.command("show")
def taskdoc_show(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="The package, e.g. tasks/login.tsk.")],
    history: Annotated[
        str | None,
        typer.Option(
            "--history", help="List the versions of one section (goals, bearinmind/risks, ux/x)."
        ),
    ] = None,
    effective: Annotated[
        bool,
        typer.Option(
            "--effective", help="Print exactly the Taskdoc text a model of the root dialog sees."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show a Taskdoc: each section with when and by whom it was last changed (or the
    model-facing text with --effective, or one section's history)."""
    from mindloop.taskdoc.effective import render_effective_taskdoc
    from mindloop.taskdoc.mind import section_status

    rtws = get_rtws(ctx)
    pkg = _open_package(rtws, path)
    store = _store_if_any(rtws)
    try:
        if history is not None:
            section = _section_ref(history)
            entries = _history_entries(
                store.taskdoc_history(pkg.rel_path, section) if store else []
            )
            _print_history(pkg, section, entries, as_json)
            return
        statuses = section_status(pkg, store)
        maintainer = _maintainer(rtws, store, pkg.rel_path)
        text = render_effective_taskdoc(pkg, is_root=True, maintainer=maintainer)
    finally:
        if store is not None:
            store.close()
    if as_json:
        print_json(
            {
                "task_path": pkg.rel_path,
                "maintainer": maintainer,
                "effective": text,
                "sections": [
                    {**s.model_dump(), "content": pkg.read_section_or_none(s.section)}
                    for s in statuses
                ],
                "violations": [v.model_dump(exclude_none=True) for v in pkg.layout_violations()],
            }
        )
        return
    if effective:
        console.out(text)
        return
    _print_sections(pkg, statuses, maintainer)


def _state(s: SectionStatus) -> str:
    if not s.exists:
        return "missing" + (" (deleted outside mindloop)" if s.recorded else "")
    if s.changed_outside:
        return "changed outside mindloop" if s.recorded else "no audit record"
    return ""


def _print_sections(pkg: TaskPackage, statuses: list[SectionStatus], maintainer: str) -> None:
    """The human view: a header per section (file, last change: when, by whom), then its
    text; sections are listed in the order the model reads them."""
    from mindloop.taskdoc.effective import format_violation
    from mindloop.taskdoc.mind import is_injected

    console.print(
        f"[bold]{escape(pkg.rel_path)}[/] · maintainer @{escape(maintainer)} · "
        "[dim]`--effective` shows the text a model sees[/]"
    )
    for s in statuses:
        if not s.exists and s.updated_at is None and s.section not in _TOP_FILES:
            continue
        facts = []
        if not is_injected(s.section):
            facts.append("extra: read by agents with recall_taskdoc")
        if s.updated_at is not None:
            by = s.actor_member or "?"
            if s.actor_dialog:
                by += f" in dialog {s.actor_dialog}"
            facts.append(f"updated {_ts(s.updated_at)} by {by}")
        state = _state(s)
        if state:
            facts.append(state)
        console.print(f"\n[bold cyan]── {escape(s.section)}[/] [dim]{escape(' · '.join(facts))}[/]")
        body = pkg.read_section_or_none(s.section)
        if body is None:
            continue
        console.out(body.rstrip("\n") if body.strip() else "(empty)", highlight=False)
    violations = pkg.layout_violations()
    if violations:
        console.print("\n[red]layout problems:[/]")
        for v in violations:
            console.out(f"- {format_violation(v)}", highlight=False)


_TOP_FILES = frozenset({"goals.md", "constraints.md", "progress.md"})


def _print_history(
    pkg: TaskPackage, section: str, entries: list[dict[str, Any]], as_json: bool
) -> None:
    if as_json:
        print_json({"task_path": pkg.rel_path, "section": section, "versions": entries})
        return
    if not entries:
        console.out(f"{pkg.rel_path}/{section}: no recorded changes")
        return
    console.out(f"{pkg.rel_path}/{section}: {len(entries)} version(s), newest first")
    for e in entries:
        by = e["actor_member"] + (f" ({e['actor_dialog']})" if e["actor_dialog"] else "")
        console.out(f"\nv{e['version']}  {e['time']}  by {by}  {e['hash_after']}")
        if e["changed_outside_before"]:
            console.out("  (the section was changed outside mindloop before this version)")
        if e["created"] and not e["content_after"]:
            console.out("  (created empty)")
            continue
        console.out(e["diff"].rstrip("\n") or "  (no textual change)")


# ---------------------------------------------------------------- edit


def _editor() -> list[str]:
    cmd = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not cmd:
        raise MindloopError(
            "no editor: set $EDITOR (or $VISUAL), or give the new text with --content TEXT, "
            "--content - (stdin) or --file PATH"
        )
    return shlex.split(cmd)


def _edit_in_editor(section: str, text: str) -> str:
    """Open `$EDITOR` on a copy of the section; return what was saved."""
    with tempfile.TemporaryDirectory(prefix="mindloop-edit-") as tmp:
        path = Path(tmp) / section.replace("/", "__")
        path.write_text(text, encoding="utf-8")
        cmd = [*_editor(), str(path)]
        try:
            done = subprocess.run(cmd, check=False)
        except OSError as exc:
            raise MindloopError(f"cannot start the editor {cmd[0]!r}: {exc.strerror}") from None
        if done.returncode != 0:
            raise MindloopError(
                f"the editor {cmd[0]!r} exited with status {done.returncode}; nothing was changed"
            )
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise MindloopError(
                f"the edited text is not UTF-8 (byte {exc.start}); nothing was changed"
            ) from None


def _keep_draft(rtws: Path, pkg: TaskPackage, section: str, text: str) -> Path:
    """Save a draft that could not be applied next to the state, so it is not lost."""
    folder = rtws / ".mindloop" / "drafts"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"{pkg.rel_path.replace('/', '__')}__{section.replace('/', '__')}.{stamp}"
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@taskdoc_app.command("edit")
def taskdoc_edit(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="The package, e.g. tasks/login.tsk.")],
    section: Annotated[
        str,
        typer.Argument(help="The section: goals, constraints, progress, bearinmind/risks, ux/x."),
    ],
    content: Annotated[
        str | None,
        typer.Option(
            "--content", help="The section's new text (`-` reads it from stdin); no editor."
        ),
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the new text from this file.")
    ] = None,
) -> None:
    """Replace one section of a Taskdoc — in $EDITOR, or from --content/--file/stdin —
    recorded in its audit history with you (`human`) as the actor."""
    from mindloop.cli.common import read_message
    from mindloop.store import Store
    from mindloop.taskdoc.human import EditConflict, content_hash, edit_section

    rtws = get_rtws(ctx)
    pkg = _open_package(rtws, path)
    rel = _section_ref(section, "section")
    before = pkg.read_section_or_none(rel)
    if content is None and file is None:
        text = _edit_in_editor(rel, before or "")
        if text == (before or ""):
            console.out(f"{pkg.rel_path}/{rel}: unchanged")
            return
    else:
        text = read_message(content, file, what="content")
    store = Store.for_rtws(rtws)
    try:
        change = edit_section(
            pkg, rel, text, store=store, expected_hash=content_hash(before), lang=_lang(rtws)
        )
    except EditConflict:  # someone (an agent's change_mind) changed it meanwhile
        draft = _keep_draft(rtws, pkg, rel, text)
        raise MindloopError(
            f"{pkg.rel_path}/{rel} changed while you edited it; nothing was written. Your text "
            f"is in {draft}: compare it with `mindloop taskdoc show {pkg.rel_path}` and edit again"
        ) from None
    finally:
        store.close()
    console.out(f"{pkg.rel_path}/{rel} replaced by {HUMAN_ACTOR} ({change.hash_after[:12]})")


# ---------------------------------------------------------------- migrate


@taskdoc_app.command("migrate")
def taskdoc_migrate(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(help="Single-file Taskdoc (markdown) to convert.")],
    dest: Annotated[
        str | None, typer.Option("--dest", help="Package to create (default: <file>.tsk).")
    ] = None,
) -> None:
    """Turn a single-file Taskdoc (an optional `#` title, then Goals/Constraints/Progress
    and any other headings) into a package; other headings become extra sections."""
    from mindloop.taskdoc.migrate import migrate_file

    rtws = get_rtws(ctx)
    pkg, plan = migrate_file(rtws, file, dest)
    _audit_created(rtws, pkg)
    console.out(pkg.rel_path)
    if plan.title is not None:
        err_console.print(f"  title {plan.title!r} -> goals.md (its first line)", markup=False)
    for m in plan.mapped:
        if m.section not in _TOP_FILES:
            err_console.print(f"  line {m.line}: {m.heading!r} -> {m.section}", markup=False)
