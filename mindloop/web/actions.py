"""What the browser changes (POST): start a task, start a chat, ask (the Router routes the
message to a task's loop root), send a task's work loop a message, post to a dialog,
answer a question, approve or reject a call waiting for approval, replace one Taskdoc
section, retry a stopped tree, deliver a system event (a `wait_for` waits for it).

An approval is decided only by its two buttons, never by free text (`answer` refuses an
approval id, naming the buttons): the form posts back the digest of the call it showed, so
a call changed since the page was drawn is refused with nothing decided; the human is the
actor.

Each is the use case the CLI runs (`mindloop.service`, `taskdoc.human`), so a refusal is
the same `MindloopError` with the same words (except where they name a CLI command the
page has a button for) and nothing is written. A change that makes
a tree drivable hands it to the driver, which answers it in this process. Forms get a
redirect (303); scripts asking for JSON get `{"ok": true, "location": …}` or an error.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mindloop import service
from mindloop.errors import MindloopError
from mindloop.taskdoc import TaskPackage
from mindloop.taskdoc.human import HUMAN_ACTOR, edit_section
from mindloop.taskdoc.mind import record_created
from mindloop.web.state import WebState, done, fields, web


def _task_url(path: str) -> str:
    return "/task/" + quote(path)


def _back(form: dict[str, str], default: str) -> str:
    """Where a form asks to go back to: a path of this server only."""
    back = form.get("back", "")
    return back if back.startswith("/") and not back.startswith("//") else default


async def new_task(request: Request) -> Response:
    """A new Taskdoc package, its sections recorded as created by the human."""
    state = web(request)
    form = await fields(request)
    slug = form.get("slug", "").strip()
    if not slug:
        raise MindloopError("the task needs a name (its package is tasks/<name>.tsk)")
    constraints = [c.strip() for c in form.get("constraints", "").splitlines() if c.strip()]
    pkg = TaskPackage.create(
        state.project.rtws, slug, goal=form.get("goal") or None, constraints=constraints
    )
    record_created(pkg, state.project.runtime.store, HUMAN_ACTOR)
    return done(request, _task_url(pkg.rel_path), task=pkg.rel_path)


async def start_chat(request: Request) -> Response:
    state = web(request)
    form = await fields(request)
    posted = service.start_chat(
        state.project,
        form.get("message", ""),
        task=form.get("task") or None,
        member=form.get("member") or None,
        drive_here=state.driver.enabled,
    )
    state.driver.kick(posted.dialog.root_id)
    return done(request, f"/dialogs/{posted.dialog.id}", dialog=posted.dialog)


async def ask(request: Request) -> Response:
    """A message routed by the Router to a task's loop root (a new task if it says so)."""
    state = web(request)
    form = await fields(request)
    asked = await service.ask(state.project, form.get("message", ""))
    if asked.asking is not None:  # which task? answered at POST /questions/<id>/answer
        return done(request, "/inbox", asking=asked.asking)
    assert asked.posted is not None and asked.task is not None
    root = asked.posted.dialog
    state.driver.kick(root.root_id)
    return done(
        request,
        f"/dialogs/{root.id}",
        task=asked.task.task_path,
        created_task=asked.created_task,
        reply=asked.reply,
    )


async def message_loop(request: Request) -> Response:
    """A message to a task's work loop (`mindloop run TASK --message`): posted to its loop
    root, which the driver runs in this process; the task page stays, its loop and node
    tree follow live. A task that ended DONE takes it as new scope (PLAN)."""
    state = web(request)
    form = await fields(request)
    posted = service.message_task(state.project, form.get("task", ""), form.get("message", ""))
    root = posted.dialog
    state.driver.kick(root.root_id)
    return done(request, _task_url(root.task_path), task=root.task_path, dialog=root)


async def post_message(request: Request) -> Response:
    state = web(request)
    form = await fields(request)
    posted = service.post(
        state.project,
        request.path_params["id"],
        form.get("message", ""),
        drive_here=state.driver.enabled,
    )
    state.driver.kick(posted.dialog.root_id)
    return done(request, f"/dialogs/{posted.dialog.id}", dialog=posted.dialog)


async def answer(request: Request) -> Response:
    state = web(request)
    form = await fields(request)
    _not_an_approval(state, request.path_params["id"])
    answered = service.answer(
        state.project,
        request.path_params["id"],
        form.get("answer", ""),
        check_provider=state.options.drive,
    )
    state.driver.kick(answered.root_id)
    location = _back(form, f"/dialogs/{answered.dialog_id}")
    return done(request, location, answered=answered)


def _not_an_approval(state: WebState, wait_id: str) -> None:
    """Refuse free text for an approval in the web's words: the runtime decides what is an
    approval (`not_an_approval`), but its refusal names the CLI's commands, and here the
    decision is the page's two buttons."""
    try:
        state.project.runtime.not_an_approval(wait_id)
    except MindloopError:
        raise MindloopError(
            f"{wait_id} is an approval, not a question: it is decided only with its Approve or "
            "Reject button (in the inbox or on its dialog's page), never by an answer"
        ) from None


async def approve(request: Request) -> Response:
    state = web(request)
    form = await fields(request)
    decided = service.approve(
        state.project,
        request.path_params["id"],
        by=HUMAN_ACTOR,
        expected_digest=_digest(form),
        check_provider=state.options.drive,
    )
    state.driver.kick(decided.root_id)
    return done(request, _back(form, f"/dialogs/{decided.dialog_id}"), decided=decided)


async def reject(request: Request) -> Response:
    state = web(request)
    form = await fields(request)
    decided = service.reject(
        state.project,
        request.path_params["id"],
        form.get("reason", ""),
        by=HUMAN_ACTOR,
        expected_digest=_digest(form),
        check_provider=state.options.drive,
    )
    state.driver.kick(decided.root_id)
    return done(request, _back(form, f"/dialogs/{decided.dialog_id}"), decided=decided)


def _digest(form: dict[str, str]) -> str:
    """The digest of the call the human was shown: required, so what is decided is
    always what was on the page."""
    digest = form.get("digest", "").strip()
    if not digest:
        raise MindloopError("the decision needs the digest of the call shown (field `digest`)")
    return digest


async def system_event(request: Request) -> Response:
    """A system event from outside (`mindloop event`'s use case): `event_type`, an optional
    `key` and `payload` (a JSON object; in a form, its JSON text). The trees it woke are
    driven on here."""
    state = web(request)
    payload: object = None
    if request.headers.get("content-type", "").startswith("application/json"):
        body = await request.json()
        form = (
            {k: "" if v is None else str(v) for k, v in body.items()}
            if isinstance(body, dict)
            else {}
        )
        payload = body.get("payload") if isinstance(body, dict) else None
    else:
        form = await fields(request)
    if payload is None or isinstance(payload, str):
        payload = service.event_payload(
            form.get("payload") if payload is None else payload, "payload"
        )
    if not isinstance(payload, dict):
        raise MindloopError(f"payload: a JSON object is needed, got {type(payload).__name__}")
    delivered = service.deliver_event(
        state.project, form.get("event_type", ""), key=form.get("key") or None, payload=payload
    )
    for root_id in delivered.root_ids:
        state.driver.kick(root_id)
    return done(request, _back(form, "/inbox"), delivered=delivered)


async def edit(request: Request) -> Response:
    """Replace one section, recorded with the human as the actor; refused if the section
    changed since the form was drawn (`expected` is its content hash then)."""
    state = web(request)
    form = await fields(request)
    path = service.task_key(state.project.rtws, form.get("task", ""))
    pkg = TaskPackage(state.project.rtws, path)
    if not pkg.exists():
        raise MindloopError(f"task package {path!r} does not exist")
    change = edit_section(
        pkg,
        form.get("section", ""),
        form.get("content", ""),
        store=state.project.runtime.store,
        expected_hash=form.get("expected") or None,
        lang=state.project.config.team.work_language,
    )
    return done(request, _task_url(pkg.rel_path), change=change)


async def retry(request: Request) -> Response:
    state = web(request)
    ids = service.retry(state.project, request.path_params["id"])
    state.driver.kick(request.path_params["id"])
    return done(request, f"/dialogs/{request.path_params['id']}", retried=ids)


routes = [
    Route("/tasks", new_task, methods=["POST"]),
    Route("/chat", start_chat, methods=["POST"]),
    Route("/ask", ask, methods=["POST"]),
    Route("/run", message_loop, methods=["POST"]),
    Route("/dialogs/{id}/messages", post_message, methods=["POST"]),
    Route("/dialogs/{id}/retry", retry, methods=["POST"]),
    Route("/questions/{id}/answer", answer, methods=["POST"]),
    Route("/approvals/{id}/approve", approve, methods=["POST"]),
    Route("/approvals/{id}/reject", reject, methods=["POST"]),
    Route("/taskdoc/edit", edit, methods=["POST"]),
    Route("/system-events", system_event, methods=["POST"]),
]
