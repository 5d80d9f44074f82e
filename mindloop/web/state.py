"""What every request handler of the web UI shares: the project, the feed, the driver,
the templates — and how a handler answers (a page, a fragment, JSON, a redirect)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from mindloop.service import Project
from mindloop.web.driver import Driver
from mindloop.web.feed import Feed


@dataclass(frozen=True)
class WebOptions:
    token: str
    drive: bool = True  # drive what the browser starts in this process
    poll_interval: float = 0.5  # how often the store is read for other processes' work
    stream_lifetime: float = 600.0  # an event stream ends after this long; the browser resumes it
    retry_ms: int = 1000  # how long a browser waits before reconnecting a stream


@dataclass
class WebState:
    project: Project
    options: WebOptions
    env: jinja2.Environment
    driver: Driver
    feed: Feed | None = None  # made at start-up, on the server's event loop

    @property
    def live(self) -> Feed:
        assert self.feed is not None, "the web UI's feed starts with the server"
        return self.feed


def web(request: Request) -> WebState:
    state: WebState = request.app.state.web
    return state


def wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def page(
    request: Request, template: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    """A whole page or a fragment, drawn from a template."""
    state = web(request)
    html = state.env.get_template(template).render(**context)
    return HTMLResponse(html, status_code=status_code)


def to_json(data: Any) -> Any:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, list):
        return [to_json(d) for d in data]
    if isinstance(data, dict):
        return {k: to_json(v) for k, v in data.items()}
    return data


def done(request: Request, location: str, **data: Any) -> Response:
    """A form's success: JSON for scripts (with where to go next), else a redirect."""
    if wants_json(request):
        return JSONResponse({"ok": True, "location": location, **to_json(data)})
    return RedirectResponse(location, status_code=303)


async def fields(request: Request) -> dict[str, str]:
    """A form's or a JSON body's fields, as text."""
    if request.headers.get("content-type", "").startswith("application/json"):
        body = await request.json()
        if not isinstance(body, dict):
            return {}
        return {str(k): "" if v is None else str(v) for k, v in body.items()}
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str)}
