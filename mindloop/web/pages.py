"""The pages (GET): task list, task, a task's node, dialog, inbox (questions and
approvals) — their live fragments, and the same reads as JSON for programs (`/api/…`).

A page is drawn from the store as it is now, and carries the feed position taken
*before* it was read: its event stream starts there, so nothing that happened while the
page was drawn is lost (an entry already on the page is not drawn twice).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mindloop import service
from mindloop.errors import NotFoundError
from mindloop.taskdoc import TaskPackage
from mindloop.web import views
from mindloop.web.panes import TASK_PANES, task_pane
from mindloop.web.state import page, to_json, web


class PackagePath(Convertor[str]):
    """A task package's path in an address, up to its `.tsk`: so `/task/<package>/node/<id>`
    (a node's page) is told apart from `/task/<package>` (the task's) at any depth."""

    regex = r".+?\.tsk"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("package", PackagePath())


def _stream(request: Request, **scope: str) -> str:
    """The event stream URL of a page: from the position before it was read."""
    params = {"since": web(request).live.cursor().encode(), **scope}
    return "/events?" + urlencode(params)


def _common(request: Request, title: str, **scope: str) -> dict[str, Any]:
    state = web(request)
    return {
        "title": title,
        "stream_url": _stream(request, **scope),
        "inbox_count": views.waiting_count(state.project),
        "rtws": state.project.rtws.name,
        "driving": state.options.drive,
        "error": request.query_params.get("error"),
    }


async def index(request: Request) -> Response:
    state = web(request)
    ctx = _common(request, "Tasks")
    ctx |= {"tasks": views.task_rows(state.project), "members": views.members(state.project)}
    return page(request, "index.html", ctx)


async def task(request: Request) -> Response:
    state = web(request)
    pkg = _package(request)
    ctx = _common(request, pkg.rel_path, task=pkg.rel_path)
    panes = []
    for pane in TASK_PANES:
        ctx_pane = {**pane.context(state.project, pkg.rel_path), "task": pkg.rel_path, "pane": pane}
        html = state.env.get_template(pane.template).render(**ctx_pane)
        panes.append((pane, Markup(html)))
    ctx |= {"task": pkg.rel_path, "panes": panes, "members": views.members(state.project)}
    return page(request, "task.html", ctx)


def _package(request: Request) -> TaskPackage:
    state = web(request)
    pkg = TaskPackage(
        state.project.rtws, service.task_key(state.project.rtws, request.path_params["path"])
    )
    if not pkg.exists():
        raise NotFoundError(f"no task package {pkg.rel_path!r} (see the task list)")
    return pkg


async def node(request: Request) -> Response:
    """A node's own page: what it asks, how it is checked, its docs, log, conclusion and
    the dialogs that worked it — reloaded live with the workspace."""
    state = web(request)
    pkg = _package(request)
    found = views.node_detail(state.project, pkg.rel_path, request.path_params["id"])
    ctx = _common(request, f"{found.view.node.id} · {pkg.rel_path}", task=pkg.rel_path)
    ctx |= {"task": pkg.rel_path, "d": found}
    return page(request, "node.html", ctx)


async def dialog(request: Request) -> Response:
    state = web(request)
    ctx = _common(request, "Dialog")  # the position first; the stream is scoped below
    shown = views.transcript(state.project, request.path_params["id"])
    rec = shown.dialog
    ctx["stream_url"] += "&" + urlencode({"root": rec.root_id})
    ctx |= {
        "title": f"@{rec.member} · {rec.id}",
        "t": shown,
        "trees": views.trees(state.project, rec.root_id),
        "questions": views.questions(state.project, root=rec.root_id),
        "approvals": views.approvals(state.project, root=rec.root_id),
        "following": state.driver.following(rec.root_id),
    }
    return page(request, "dialog.html", ctx)


async def inbox(request: Request) -> Response:
    state = web(request)
    ctx = _common(request, "Inbox")
    ctx["questions"] = views.questions(state.project)
    ctx["approvals"] = views.approvals(state.project)
    return page(request, "inbox.html", ctx)


# ---------------------------------------------------------------------------- fragments


async def fragment_tasks(request: Request) -> Response:
    return page(request, "_tasks.html", {"tasks": views.task_rows(web(request).project)})


async def fragment_inbox_count(request: Request) -> Response:
    count = views.waiting_count(web(request).project)
    return page(request, "_inbox_count.html", {"inbox_count": count})


async def fragment_questions(request: Request) -> Response:
    q = request.query_params
    found = views.questions(web(request).project, task=q.get("task"), root=q.get("root"))
    return page(request, "_questions.html", {"questions": found})


async def fragment_approvals(request: Request) -> Response:
    q = request.query_params
    found = views.approvals(web(request).project, task=q.get("task"), root=q.get("root"))
    return page(request, "_approvals.html", {"approvals": found})


async def fragment_pane(request: Request) -> Response:
    state = web(request)
    pane = task_pane(request.path_params["pane"])
    path = request.query_params.get("task", "")
    ctx = pane.context(state.project, path)
    return page(request, pane.template, {**ctx, "task": path, "pane": pane})


async def fragment_node(request: Request) -> Response:
    state = web(request)
    task = service.task_key(state.project.rtws, request.query_params.get("task", ""))
    found = views.node_detail(state.project, task, request.path_params["id"])
    return page(request, "_node_page.html", {"task": task, "d": found})


async def fragment_dialog(request: Request) -> Response:
    """A dialog's header (status, usage) and its tree."""
    state = web(request)
    shown = views.transcript(state.project, request.path_params["id"])
    ctx = {
        "t": shown,
        "trees": views.trees(state.project, shown.dialog.root_id),
        "following": state.driver.following(shown.dialog.root_id),
    }
    part = request.path_params["part"]
    if part not in ("head", "tree"):
        raise NotFoundError(f"no dialog fragment {part!r}")
    return page(request, f"_dialog_{part}.html", ctx)


# ---------------------------------------------------------------------------- JSON


async def api_tasks(request: Request) -> Response:
    return JSONResponse(to_json(views.task_rows(web(request).project)))


async def api_questions(request: Request) -> Response:
    return JSONResponse(to_json(views.questions(web(request).project)))


async def api_approvals(request: Request) -> Response:
    return JSONResponse(to_json(views.approvals(web(request).project)))


async def api_dialog(request: Request) -> Response:
    shown = service.show_dialog(web(request).project, request.path_params["id"])
    return JSONResponse(to_json(shown))


async def api_node(request: Request) -> Response:
    state = web(request)
    pkg = _package(request)
    return JSONResponse(
        to_json(views.node_detail(state.project, pkg.rel_path, request.path_params["id"]))
    )


async def api_taskdoc(request: Request) -> Response:
    state = web(request)
    path = service.task_key(state.project.rtws, request.path_params["path"])
    if not TaskPackage(state.project.rtws, path).exists():
        raise NotFoundError(f"no task package {path!r}")
    return JSONResponse(to_json(views.taskdoc_view(state.project, path)))


routes = [
    Route("/", index),
    Route("/inbox", inbox),
    Route("/task/{path:package}/node/{id}", node),  # before the task: its path is a prefix
    Route("/task/{path:path}", task),
    Route("/dialogs/{id}", dialog),
    Route("/fragments/tasks", fragment_tasks),
    Route("/fragments/inbox-count", fragment_inbox_count),
    Route("/fragments/questions", fragment_questions),
    Route("/fragments/approvals", fragment_approvals),
    Route("/fragments/task/{pane}", fragment_pane),
    Route("/fragments/dialog/{id}/{part}", fragment_dialog),
    Route("/fragments/node/{id}", fragment_node),
    Route("/api/tasks", api_tasks),
    Route("/api/questions", api_questions),
    Route("/api/approvals", api_approvals),
    Route("/api/dialogs/{id}", api_dialog),
    Route("/api/taskdoc/{path:path}", api_taskdoc),
    Route("/api/task/{path:package}/node/{id}", api_node),
]
