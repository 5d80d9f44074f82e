"""`mindloop task new`, `mindloop tasks`, `mindloop taskdoc show|migrate`.

These are the human's side of the Taskdoc: create a package, list packages, read the
effective Taskdoc with per-section "last updated" and history, migrate old single-file
Taskdocs. Changes made here are audited with the actor `human`.
"""

from __future__ import annotations

import difflib
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from mindloop.cli.common import console, get_rtws
from mindloop.config import load_config
from mindloop.errors import MindloopError, TaskPathError
from mindloop.store import STATE_DIR, STATE_FILE, Store, TaskdocChange
from mindloop.taskdoc import fsio
from mindloop.taskdoc.discovery import discover_packages
from mindloop.taskdoc.effective import render_effective_taskdoc
from mindloop.taskdoc.migrate import migrate_single_file
from mindloop.taskdoc.mind import SectionStatus, section_status
from mindloop.taskdoc.package import TaskPackage
from mindloop.taskdoc.sections import SECTION_SUFFIX, TOP_LEVEL, SectionError, parse_section_ref

HUMAN_ACTOR = "human"

task_app = typer.Typer(no_args_is_help=True, help="Create Taskdoc packages.")
taskdoc_app = typer.Typer(no_args_is_help=True, help="Inspect and migrate Taskdocs.")


def _ts(t: float | None) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S") if t else "-"


def _store_if_any(rtws: Path) -> Store | None:
    """The rtws store if the runtime ever ran here (reading must not create state)."""
    return Store.for_rtws(rtws) if (rtws / STATE_DIR / STATE_FILE).exists() else None


def _audit_created(rtws: Path, pkg: TaskPackage) -> None:
    """Record the sections a human created (empty ones too), so history starts at version 1
    and a fresh package shows who created each section, not "changed outside mindloop"."""
    store = Store.for_rtws(rtws)
    try:
        for section in TOP_LEVEL:
            rel = f"{section}{SECTION_SUFFIX}"
            text = pkg.read_section(rel)
            if pkg.section_exists(rel):
                store.record_taskdoc_change(
                    TaskdocChange(
                        task_path=pkg.rel_path,
                        section=rel,
                        actor_member=HUMAN_ACTOR,
                        actor_dialog=None,
                        ts=time.time(),
                        hash_before=None,
                        hash_after=fsio.sha256_text(text),
                        content_before=None,
                        content_after=text,
                    )
                )
    finally:
        store.close()


def _open_package(rtws: Path, path: str) -> TaskPackage:
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
    if store is not None:
        roots = [d for d in store.list_dialogs(task_path=task_path) if d.kind == "root"]
        if roots:
            return roots[-1].member
    try:
        return load_config(rtws).team.default_responder
    except MindloopError:
        return "root"


def _section_ref(ref: str) -> str:
    """The section named by `--history`, or an error naming the option."""
    try:
        return parse_section_ref(ref)
    except SectionError as exc:
        raise MindloopError(f"--history {ref!r}: {exc.text.removeprefix('Error: ')}") from None


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
    rtws = get_rtws(ctx)
    pkg = TaskPackage.create(rtws, slug, goal=goal, constraints=constraint or [])
    _audit_created(rtws, pkg)
    console.out(pkg.rel_path)


def tasks_command(ctx: typer.Context) -> None:
    """List the Taskdoc packages of the rtws (honours .taskdoc-ignore)."""
    rtws = get_rtws(ctx)
    store = _store_if_any(rtws)
    try:
        table = Table("path", "sections present", "last updated")
        found = discover_packages(rtws)
        for rel in found:
            pkg = TaskPackage(rtws, rel)
            statuses = section_status(pkg, store)
            present = [s.section.removesuffix(SECTION_SUFFIX) for s in statuses if s.exists]
            last = _last_updated(statuses)
            when = f"{_ts(last.updated_at)} by {last.actor_member}" if last else "-"
            table.add_row(rel, ", ".join(present) or "(none)", when)
    finally:
        if store is not None:
            store.close()
    if not found:
        console.print("no Taskdoc packages (create one with `mindloop task new <slug>`)")
        return
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
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show the effective Taskdoc with per-section last-updated, or one section's history."""
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
        effective = render_effective_taskdoc(
            pkg, is_root=True, maintainer=_maintainer(rtws, store, pkg.rel_path)
        )
    finally:
        if store is not None:
            store.close()
    if as_json:
        data = {
            "task_path": pkg.rel_path,
            "effective": effective,
            "sections": [s.model_dump() for s in statuses],
            "violations": [v.model_dump(exclude_none=True) for v in pkg.layout_violations()],
        }
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    console.out(effective)
    table = Table("section", "state")
    table.add_column("size", justify="right")
    table.add_column("last updated", no_wrap=True)
    table.add_column("by", overflow="fold")
    for s in statuses:
        if not s.exists and s.updated_at is None and s.section not in _TOP_FILES:
            continue
        state = "present" if s.exists else "missing"
        if s.changed_outside:
            state += " (changed outside mindloop)" if s.recorded else " (no audit record)"
        by = s.actor_member or "-"
        if s.actor_dialog:
            by += f" ({s.actor_dialog})"
        table.add_row(s.section, state, str(s.size), _ts(s.updated_at), by)
    console.print(table)


_TOP_FILES = frozenset(f"{s}{SECTION_SUFFIX}" for s in TOP_LEVEL)


def _print_history(
    pkg: TaskPackage, section: str, entries: list[dict[str, Any]], as_json: bool
) -> None:
    if as_json:
        data = {"task_path": pkg.rel_path, "section": section, "versions": entries}
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
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


@taskdoc_app.command("migrate")
def taskdoc_migrate(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(help="Single-file Taskdoc (markdown) to convert.")],
    dest: Annotated[
        str | None, typer.Option("--dest", help="Package to create (default: <file>.tsk).")
    ] = None,
) -> None:
    """Turn a single-file Taskdoc with Goals/Constraints/Progress headings into a package."""
    rtws = get_rtws(ctx)
    pkg = migrate_single_file(rtws, file, dest)
    _audit_created(rtws, pkg)
    console.out(pkg.rel_path)
