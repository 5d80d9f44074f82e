"""The panes of a task's page, as data: each one a template, what it reads, and which
live items make it read again.

The task page lays out `TASK_PANES` in order, each in its own region that the browser
reloads (`/fragments/task/<id>?task=…`) when an item of a kind in `refresh_on` arrives;
a pane's form (the work loop's composer) is drawn once below it, so a refresh never
touches a draft.
A new view of a task — the work loop's phase, the node tree — is one more entry here and
one template; nothing else on the page changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mindloop import service
from mindloop.errors import NotFoundError
from mindloop.service import Project
from mindloop.web import views

PaneContext = Callable[[Project, str], dict[str, Any]]


@dataclass(frozen=True)
class TaskPane:
    id: str
    title: str
    template: str  # drawn with the pane's context plus `task` and `pane`
    refresh_on: tuple[str, ...]  # live item kinds (`state`, `taskdoc`) that make it stale
    context: PaneContext
    wide: bool = False  # spans the page's full width
    form: str | None = None  # a template drawn once below the live region (a composer)


def _taskdoc(project: Project, task: str) -> dict[str, Any]:
    return {"doc": views.taskdoc_view(project, task)}


def _dialogs(project: Project, task: str) -> dict[str, Any]:
    return {"trees": views.trees(project, task), "task_usage": service.task_usage(project, task)}


def _waiting(project: Project, task: str) -> dict[str, Any]:
    return {
        "questions": views.questions(project, task=task),
        "approvals": views.approvals(project, task=task),
    }


def _loop(project: Project, task: str) -> dict[str, Any]:
    return {"loop": views.loop_of(project, task)}


def _nodes(project: Project, task: str) -> dict[str, Any]:
    return {"ws": views.node_tree(project, task)}


TASK_PANES: list[TaskPane] = [
    TaskPane(
        "loop", "Work loop", "_loop.html", ("state",), _loop, wide=True, form="_loop_form.html"
    ),
    TaskPane("nodes", "Node tree", "_nodes.html", ("state",), _nodes, wide=True),
    TaskPane("taskdoc", "Taskdoc", "_taskdoc.html", ("taskdoc",), _taskdoc, wide=True),
    TaskPane("questions", "Waiting for you", "_waiting.html", ("state",), _waiting),
    TaskPane("dialogs", "Dialogs, usage and cost", "_trees.html", ("state",), _dialogs),
]


def task_pane(pane_id: str) -> TaskPane:
    for pane in TASK_PANES:
        if pane.id == pane_id:
            return pane
    raise NotFoundError(f"no task pane {pane_id!r} (known: {', '.join(p.id for p in TASK_PANES)})")
