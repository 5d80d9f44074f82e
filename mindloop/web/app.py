"""The web UI as an ASGI application (Starlette): routes, the token check, the live feed
and the driver, started and stopped with the server.

`create_app` takes an opened `Project` (its configuration already checked); the caller
owns it and closes it after the server stopped. At start-up the project's runtime (and so
its state database) is opened, the feed starts polling it and listens to its events; at
shutdown the streams end, and drives under way are cut off as Ctrl-C cuts off `mindloop
chat` (saved, resumed by `mindloop run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from mindloop.errors import MindloopError, NotFoundError
from mindloop.service import Project
from mindloop.taskdoc.human import EditConflict
from mindloop.web import actions, pages, stream
from mindloop.web.auth import TokenAuth
from mindloop.web.driver import Driver
from mindloop.web.feed import Feed
from mindloop.web.render import STATIC, EntryRenderer, environment
from mindloop.web.state import WebOptions, WebState, wants_json

log = logging.getLogger(__name__)


def create_app(project: Project, options: WebOptions) -> Starlette:
    env = environment()
    state = WebState(project, options, env, Driver(project, drive=options.drive))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        feed = Feed(project.runtime.store, EntryRenderer(env), poll_interval=options.poll_interval)
        project.subscribe(feed.on_event)
        state.feed = feed
        poller = asyncio.create_task(feed.run(), name="web:feed")
        try:
            yield
        finally:
            feed.close()
            await state.driver.aclose()
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller

    app = Starlette(
        routes=[
            *pages.routes,
            *actions.routes,
            *stream.routes,
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[Middleware(TokenAuth, token=options.token)],
        exception_handlers={MindloopError: _refused, HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.state.web = state
    return app


def _error(request: Request, status: int, message: str) -> Response:
    if wants_json(request):
        return JSONResponse({"error": message}, status_code=status)
    state: WebState = request.app.state.web
    html = state.env.get_template("error.html").render(
        title="Refused" if status < 500 else "Error", message=message, status=status
    )
    return HTMLResponse(html, status_code=status)


async def _refused(request: Request, exc: Exception) -> Response:
    """A use case refused the input (nothing was written): say why, as the CLI does."""
    status = 404 if isinstance(exc, NotFoundError) else 400
    if isinstance(exc, EditConflict):
        status = 409
    return _error(request, status, str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(request, exc.status_code, exc.detail)
