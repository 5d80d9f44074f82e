"""What the pages show, read through the use-case layer and shaped for templates.

Every function here reads (nothing is written) and returns typed values; the templates
only lay them out. A task's status is derived from its dialogs and questions by one rule
(`task_status`), the same on every page.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Literal

from pydantic import BaseModel

from mindloop import service
from mindloop.dialogs.approvals import ApprovalView
from mindloop.dialogs.tellask.parser import CallFinishEvent, MarkdownEvent, TellaskStreamParser
from mindloop.errors import NotFoundError
from mindloop.service import DialogSummary, Project
from mindloop.store import (
    DialogRecord,
    DialogStatus,
    MessageRecord,
    QuestionRecord,
    Store,
    UsageTotals,
)
from mindloop.store.feed import StoredEvent
from mindloop.store.tasks import TaskRecord
from mindloop.taskdoc import TaskPackage, discover_packages
from mindloop.taskdoc.effective import format_violation, render_effective_taskdoc
from mindloop.taskdoc.human import content_hash, maintainer
from mindloop.taskdoc.mind import is_injected, section_status
from mindloop.taskdoc.sections import SECTION_SUFFIX, TOP_LEVEL
from mindloop.workspace.api import NodeView, WorkspaceApi, WorkspaceView
from mindloop.workspace.context import node_context
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.models import LogEntry, Node

# ---------------------------------------------------------------------------- tasks


class TaskRow(BaseModel):
    path: str
    title: str  # the first line of goals.md
    status: str
    questions: int  # what waits for the human: open questions and approvals
    dialogs: int
    usage: UsageTotals
    updated_at: float | None  # the latest change of any of its dialogs
    loop: TaskRecord | None = None  # its work loop (phase, status), once it has a loop root


def task_status(dialogs: list[DialogRecord], open_questions: int) -> str:
    """One word for where a task stands (most urgent first)."""
    statuses = {d.status for d in dialogs}
    if DialogStatus.RUNNING in statuses or any(d.needs_drive for d in dialogs):
        return "running"
    if open_questions:
        return "waiting for you"
    if any(d.status is DialogStatus.ERROR and d.kind == "root" for d in dialogs):
        return "error"
    if DialogStatus.STOPPED in statuses:
        return "stopped"
    if DialogStatus.INTERRUPTED in statuses:
        return "interrupted"
    if DialogStatus.WAITING in statuses:
        return "waiting"
    return "idle" if dialogs else "new"


def _title(pkg: TaskPackage) -> str:
    text = pkg.read_section_or_none(f"goals{SECTION_SUFFIX}") or ""
    for line in text.splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip()[:160]
    return ""


def task_rows(project: Project) -> list[TaskRow]:
    """Every task package of the rtws with its status, open questions and cost."""
    dialogs = service.list_dialogs(project, usage=True)
    by_task: dict[str, list[DialogSummary]] = defaultdict(list)
    for d in dialogs:
        by_task[d.task_path].append(d)
    root_task = {d.id: d.task_path for d in dialogs if d.kind == "root"}
    asked: dict[str, int] = defaultdict(int)
    for q in service.list_questions(project):
        asked[root_task.get(q.root_id, "")] += 1
    dialog_task = {d.id: d.task_path for d in dialogs}
    for a in service.list_approvals(project):
        asked[dialog_task.get(a.dialog_id, "")] += 1
    loops = {t.task_path: t for t in project.runtime.store.iter_tasks()}
    rows = []
    for path in sorted(set(discover_packages(project.rtws)) | set(by_task)):
        mine = by_task.get(path, [])
        usage = UsageTotals()
        for d in mine:
            if d.usage is not None:
                usage.merge(d.usage)
        pkg = TaskPackage(project.rtws, path)
        rows.append(
            TaskRow(
                path=path,
                title=_title(pkg) if pkg.exists() else "(package missing)",
                status=task_status(list(mine), asked.get(path, 0)),
                questions=asked.get(path, 0),
                dialogs=len(mine),
                usage=usage,
                updated_at=max((d.updated_at for d in mine), default=None),
                loop=loops.get(path),
            )
        )
    return rows


def loop_of(project: Project, task: str) -> TaskRecord | None:
    """The task's work loop (its loop root, phase and status), if it has one."""
    return project.runtime.store.task_by_path(task)


class NodeTree(BaseModel):
    """A task's workspace: its node tree (depth first), rules, doc index, and each node's
    log entries."""

    view: WorkspaceView
    logs: dict[str, list[LogEntry]]


def node_tree(project: Project, task: str) -> NodeTree:
    with WorkspaceApi(project.rtws, task, store=project.runtime.store) as api:
        shown = api.show()
        logs: dict[str, list[LogEntry]] = defaultdict(list)
        if shown.exists:
            for entry in api.log():
                if entry.node_id is not None:
                    logs[entry.node_id].append(entry)
    return NodeTree(view=shown, logs=dict(logs))


class NodeDialog(BaseModel):
    """A side dialog that worked a node: one per dispatch to a member."""

    dialog: DialogRecord
    current: bool  # the dispatch the node waits on now


class NodeDetail(BaseModel):
    """One node as its own page shows it: the node as `mindloop node show` gives it (with
    its log), its neighbours, the dialogs that worked it, and its context."""

    task: str
    view: NodeView
    parent: Node | None = None
    children: list[Node] = []
    deps: list[Node] = []
    dialogs: list[NodeDialog] = []  # newest first
    loop_root: str | None = None  # where a MAIN node is worked (the task's loop root)
    context: str  # what its member (or the loop root) reads first of it


def node_detail(project: Project, task: str, node_id: str) -> NodeDetail:
    """A node of `task`'s workspace (`NotFoundError` for one it does not have)."""
    store = project.runtime.store
    with WorkspaceApi(project.rtws, task, store=store) as api:
        try:
            shown = api.node_view(node_id)
        except WorkspaceError as exc:
            if exc.code != "UNKNOWN_NODE":
                raise
            raise NotFoundError(f"{exc.message} (see the task's node tree)") from None
        state = api.state()
    node = shown.node
    loop = loop_of(project, task)
    return NodeDetail(
        task=task,
        view=shown,
        parent=state.nodes.get(node.parent_id) if node.parent_id else None,
        children=[state.nodes[c] for c in node.children if c in state.nodes],
        deps=[state.nodes[d] for d in node.deps if d in state.nodes],
        dialogs=_node_dialogs(store, task, shown),
        loop_root=loop.root_id if loop is not None else None,
        context=node_context(state, node.id, rtws=project.rtws, reply_protocol=bool(node.member)),
    )


def _node_dialogs(store: Store, task: str, shown: NodeView) -> list[NodeDialog]:
    """The side dialogs a node was dispatched to, from its log: each dispatch moved it to
    WAIT with the side dialog as the evidence (`Session.dispatch`)."""
    node = shown.node
    ids = [
        str(e.data["evidence"])
        for e in shown.log
        if e.kind == "transition" and e.data.get("to") == "WAIT" and e.data.get("evidence")
    ]
    if node.dispatch is not None:
        ids.append(node.dispatch.side_id)
    current = node.dispatch.side_id if node.dispatch is not None else None
    out: list[NodeDialog] = []
    for side_id in reversed(dict.fromkeys(ids)):
        try:
            rec = store.get_dialog(side_id)
        except NotFoundError:  # deleted since, or the evidence named no dialog
            continue
        if rec.kind != "root" and rec.task_path == task:
            out.append(NodeDialog(dialog=rec, current=rec.id == current))
    return out


# ---------------------------------------------------------------------------- Taskdoc

SECTION_TITLES = {"goals": "Goals", "constraints": "Constraints", "progress": "Progress"}


class SectionView(BaseModel):
    section: str  # package-relative file: goals.md, bearinmind/risks.md, ux/checklist.md
    name: str  # goals, bearinmind/risks, ux/checklist
    title: str
    content: str
    content_hash: str  # what an edit started from (`taskdoc.human.content_hash`)
    exists: bool
    injected: bool
    updated_at: float | None
    actor: str | None
    actor_dialog: str | None
    changed_outside: bool


class TaskdocView(BaseModel):
    task: str
    sections: list[SectionView]  # goals, constraints, progress
    others: list[SectionView]  # bearinmind and extra sections that exist or were recorded
    effective: str  # exactly what the root dialog's model sees
    maintainer: str
    problems: list[str]


def taskdoc_view(project: Project, task: str) -> TaskdocView:
    pkg = TaskPackage(project.rtws, task)
    store = project.runtime.store
    statuses = section_status(pkg, store)
    who = maintainer(store, pkg.rel_path, project.config.team.default_responder)
    top = {f"{s}{SECTION_SUFFIX}" for s in TOP_LEVEL}
    views = []
    for s in statuses:
        content = pkg.read_section_or_none(s.section)
        name = s.section.removesuffix(SECTION_SUFFIX)
        views.append(
            SectionView(
                section=s.section,
                name=name,
                title=SECTION_TITLES.get(name, name),
                content=content or "",
                content_hash=content_hash(content),
                exists=s.exists,
                injected=is_injected(s.section),
                updated_at=s.updated_at,
                actor=s.actor_member,
                actor_dialog=s.actor_dialog,
                changed_outside=s.changed_outside,
            )
        )
    return TaskdocView(
        task=pkg.rel_path,
        sections=[v for v in views if v.section in top],
        others=[v for v in views if v.section not in top and (v.exists or v.updated_at)],
        effective=render_effective_taskdoc(pkg, is_root=True, maintainer=who),
        maintainer=who,
        problems=[format_violation(v) for v in pkg.layout_violations()],
    )


# ---------------------------------------------------------------------------- dialogs


class TreeRow(BaseModel):
    dialog: DialogRecord
    depth: int
    asks_human: bool
    waiting_on: int
    usage: UsageTotals


class TreeView(BaseModel):
    root: DialogRecord
    rows: list[TreeRow]
    usage: UsageTotals  # the whole tree's


def trees(project: Project, target: str) -> list[TreeView]:
    """The dialog trees of a task (a package path), or the tree of one dialog."""
    try:
        found = service.dialog_trees(project, target)
    except NotFoundError:
        return []
    used = project.runtime.store.usage_by_dialog()
    out = []
    for nodes in found:
        rows = [
            TreeRow(
                dialog=n.dialog,
                depth=n.depth,
                asks_human=n.asks_human,
                waiting_on=n.waiting_on,
                usage=used.get(n.dialog.id, UsageTotals()),
            )
            for n in nodes
        ]
        total = UsageTotals()
        for r in rows:
            total.merge(r.usage)
        out.append(TreeView(root=nodes[0].dialog, rows=rows, usage=total))
    return out


class QuestionView(BaseModel):
    question: QuestionRecord
    member: str
    task: str
    dialog_kind: str


def questions(
    project: Project, *, task: str | None = None, root: str | None = None
) -> list[QuestionView]:
    """Open questions for the human, oldest first (of one task, or one tree)."""
    store = project.runtime.store
    found = service.list_questions(project, task=task)
    out = []
    for q in found:
        if root is not None and q.root_id != root:
            continue
        d = store.get_dialog(q.dialog_id)
        out.append(QuestionView(question=q, member=d.member, task=d.task_path, dialog_kind=d.kind))
    return out


class ApprovalItem(BaseModel):
    """An open approval as the inbox shows it: the call (member, tool, arguments exactly
    as written, their digest) and where it waits."""

    approval: ApprovalView
    arguments: str  # pretty JSON for people; the digest is of `approval.arguments`
    task: str
    root_id: str
    dialog_kind: str


def approvals(
    project: Project, *, task: str | None = None, root: str | None = None
) -> list[ApprovalItem]:
    """Calls waiting for the human's approval, oldest first (of one task, or one tree)."""
    store = project.runtime.store
    out = []
    for a in service.list_approvals(project, task=task):
        d = store.get_dialog(a.dialog_id)
        if root is not None and d.root_id != root:
            continue
        out.append(
            ApprovalItem(
                approval=a,
                arguments=_pretty(a.arguments),
                task=d.task_path,
                root_id=d.root_id,
                dialog_kind=d.kind,
            )
        )
    return out


def waiting_count(project: Project) -> int:
    """What waits for the human: open questions and approvals (the inbox's count)."""
    return len(service.list_questions(project)) + len(service.list_approvals(project))


# ---------------------------------------------------------------------------- transcripts


class Segment(BaseModel):
    """A run of an assistant's text: plain text, or one tellask block."""

    kind: Literal["text", "tellask"]
    text: str = ""
    mentions: list[str] = []
    headline: str = ""
    body: str = ""
    session: str | None = None
    error: str | None = None


class EntryView(BaseModel):
    """One transcript entry, ready to lay out."""

    id: str  # m<message id> or e<event id>
    dialog_id: str
    kind: str  # message kind, or `error`, `generation_failed`, `generation_cancelled`
    label: str
    ts: float
    course: int | None = None
    text: str = ""
    segments: list[Segment] = []
    tool: str | None = None
    detail: str = ""  # tool arguments (pretty JSON) or a tool result's content
    is_error: bool = False
    side_id: str | None = None
    fbr: bool = False
    empty: bool = False  # nothing to show (an assistant turn of tool calls only)


def segments(text: str) -> list[Segment]:
    """Split an assistant's text into plain runs and tellask blocks (the engine's parser)."""
    parser = TellaskStreamParser()
    out: list[Segment] = []
    for ev in [*parser.feed(text), *parser.finish()]:
        if isinstance(ev, MarkdownEvent):
            if out and out[-1].kind == "text":
                out[-1].text += ev.text
            else:
                out.append(Segment(kind="text", text=ev.text))
        elif isinstance(ev, CallFinishEvent):
            call = ev.call
            out.append(
                Segment(
                    kind="tellask",
                    mentions=call.mentions or ([call.mention] if call.mention else []),
                    headline=call.headline.strip(),
                    body=call.body.strip(),
                    session=call.session,
                    error=call.error.message if call.error is not None else None,
                )
            )
    return out


def _pretty(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False)


def entry_view(row: MessageRecord | StoredEvent) -> EntryView:
    if isinstance(row, StoredEvent):
        return _event_view(row)
    d = row.data
    base: dict[str, Any] = {
        "id": f"m{row.id}",
        "dialog_id": row.dialog_id,
        "kind": row.kind,
        "ts": row.created_at,
        "course": row.course,
    }
    text = str(d.get("text") or "")
    if row.kind == "assistant":
        return EntryView(
            **base, label="assistant", text=text, segments=segments(text), empty=not text.strip()
        )
    if row.kind == "thinking":
        return EntryView(**base, label="thinking", text=text)
    if row.kind == "tool_call":
        return EntryView(
            **base,
            label="tool call",
            tool=str(d.get("name", "")),
            detail=_pretty(d.get("arguments", "")),
        )
    if row.kind == "tool_result":
        return EntryView(
            **base,
            label="tool result",
            tool=str(d.get("name", "")),
            detail=str(d.get("content", "")),
            is_error=bool(d.get("is_error")),
        )
    if row.kind == "tellask_result":
        fbr = text.startswith("[FBR")
        return EntryView(
            **base,
            label="FBR sample" if fbr else "reply",
            text=text,
            side_id=d.get("side_id"),
            fbr=fbr,
            is_error=d.get("status") == "failed",
        )
    if row.kind == "note":
        return EntryView(**base, label="note", text=text)
    label = "answer" if d.get("question_id") else "user"
    return EntryView(**base, label=label, text=text)


def _event_view(ev: StoredEvent) -> EntryView:
    base: dict[str, Any] = {
        "id": f"e{ev.id}",
        "dialog_id": ev.dialog_id or "",
        "kind": ev.type,
        "ts": ev.ts,
    }
    d = ev.data
    if ev.type == "generation_cancelled":
        partial = str(d.get("text") or "").strip() or "(nothing yet)"
        return EntryView(
            **base, label="interrupted generation (re-run on resume)", text=partial, is_error=True
        )
    if ev.type == "generation_failed":
        return EntryView(
            **base, label="generation failed", text=str(d.get("error", "")), is_error=True
        )
    code = d.get("code")
    return EntryView(
        **base,
        label=f"error {code}" if code else "error",
        text=str(d.get("message", "")),
        is_error=True,
    )


class TranscriptView(BaseModel):
    dialog: DialogRecord
    entries: list[EntryView]
    usage: UsageTotals
    tree_usage: UsageTotals


def transcript(project: Project, dialog_id: str) -> TranscriptView:
    """A dialog's whole transcript (every course) with its stored errors, in time order."""
    shown = service.show_dialog(project, dialog_id)
    events = [
        StoredEvent.model_validate(e)
        for e in project.runtime.store.events(shown.dialog.id)
        if e["type"] in ("error", "generation_failed", "generation_cancelled")
    ]
    entries = [entry_view(m) for m in shown.messages] + [entry_view(e) for e in events]
    entries.sort(key=lambda e: (e.ts, e.id[0] == "e"))
    return TranscriptView(
        dialog=shown.dialog, entries=entries, usage=shown.usage, tree_usage=shown.tree_usage
    )


def members(project: Project) -> list[tuple[str, str]]:
    """(id, name) of every member, the default responder first."""
    team = project.config.team
    first = team.default_responder
    out = [(mid, m.name or mid) for mid, m in team.members.items()]
    out.sort(key=lambda p: p[0] != first)
    return out
