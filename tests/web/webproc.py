"""A real `mindloop web` process for the web tests, and plain HTTP to it.

The server is started the way a user starts it (`mindloop web -C rtws --port 0`, a free
port on 127.0.0.1), its address and token read from what it prints, and it is stopped
with SIGINT (or killed by `Procs.close` if a test fails). Requests use the standard
library only: JSON calls with the bearer token, and an event-stream reader that parses
server-sent events as a browser does.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.dialogs.procs import Proc, Procs, tail, wait_until

START_TIMEOUT = 60.0
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)")


@dataclass
class Web:
    proc: Proc
    url: str  # as printed: with the token
    port: int
    token: str

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        bearer: bool = True,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = {"Accept": "application/json", **(headers or {})}
            if bearer:
                sent["Authorization"] = f"Bearer {self.token}"
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                sent["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=sent)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """A JSON call that must succeed; its decoded answer."""
        status, _, data = self.request(method, path, body)
        assert 200 <= status < 300, f"{method} {path}: {status} {data[:500]!r}\n{tail(self.proc)}"
        return json.loads(data)

    def events(self, query: str, last_event_id: str | None = None) -> EventStream:
        return EventStream(self, query, last_event_id)


@dataclass
class Sse:
    event: str
    id: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


class EventStream:
    """`GET /events?…` read line by line, as `EventSource` parses it."""

    def __init__(self, web: Web, query: str, last_event_id: str | None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
        headers = {"Authorization": f"Bearer {web.token}", "Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self.conn.request("GET", "/events?" + query, headers=headers)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.last_id: str | None = last_event_id

    def next(self, timeout: float = 30.0) -> Sse:
        sock = self.conn.sock
        assert sock is not None
        sock.settimeout(timeout)
        event, data, ident = "message", [], None
        while True:
            try:
                raw = self.resp.fp.readline()
            except TimeoutError:
                raise AssertionError(f"no event within {timeout}s") from None
            if not raw:
                raise AssertionError("the event stream ended")
            line = raw.decode().rstrip("\r\n")
            if not line:
                if data or ident is not None:
                    if ident is not None:
                        self.last_id = ident
                    return Sse(event, ident, "\n".join(data))
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if key == "event":
                event = value
            elif key == "data":
                data.append(value)
            elif key == "id":
                ident = value

    def until(self, done: Any, timeout: float = 30.0) -> list[Sse]:
        """Events up to and including the first for which `done(event)` holds."""
        got = []
        while True:
            ev = self.next(timeout)
            got.append(ev)
            if done(ev):
                return got

    def close(self) -> None:
        self.conn.close()


def start_web(procs: Procs, *args: str) -> Web:
    proc = procs.start("web", "--port", "0", *args)

    def printed() -> re.Match[str] | None:
        found = URL.search(proc.output())
        if found is None and not proc.alive():
            raise AssertionError(f"`mindloop web` ended before serving\n{tail(proc)}")
        return found

    found = wait_until(printed, START_TIMEOUT, "`mindloop web` to print its address")
    url = found.group(0)
    assert urlsplit(url).hostname == "127.0.0.1"
    return Web(proc, url, int(found.group(1)), found.group(2))


def stop_web(procs: Procs, web: Web, timeout: float = 30.0) -> int:
    """Ctrl-C, as a user stops it; its exit status."""
    web.proc.popen.send_signal(signal.SIGINT)
    return procs.finish(web.proc, timeout)


# ---------------------------------------------------------------------------- the browser


def open_page(page: Any, web: Web, path: str = "/") -> None:
    """Log in with the printed address (sets the cookie), then go to `path`; returns once
    the page's event stream is open."""
    page.goto(web.url)
    assert "token" not in page.url
    if path != "/":
        page.goto(web.base + path)
    connected(page)


def connected(page: Any) -> None:
    """The page's event stream is open (the page says `live`)."""
    page.locator('[data-connection-state][data-state="open"]').wait_for()


def fits(page: Any) -> bool:
    """Nothing sticks out sideways (the page works at this width)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def plan_login(rtws: Path, task: str, criteria: Sequence[Any] = ()) -> str:
    """Plan a small workspace in `task` as another process would (the work loop's planner):
    a rule, a planning node, "Write the form" (docs/auth.md active, docs/old.md expired,
    assigned to @dev, with `criteria`) and "Test it" after it. The form node's id."""
    from mindloop.workspace.api import WorkspaceApi
    from mindloop.workspace.commands import DocInput
    from mindloop.workspace.models import NodeKind, RefAction
    from mindloop.workspace.transitions import Authority

    planner = Authority.chat()
    with WorkspaceApi(rtws, task) as api:
        api.add_rule("Keep every change small")
        api.command(
            lambda s: s.create_node(
                parent_id="root",
                kind=NodeKind.PLANNING,
                title="Log-in",
                requirement="Users can log in.",
            ),
            authority=planner,
        )
        form = api.command(
            lambda s: s.create_node(
                parent_id="n1",
                kind=NodeKind.EXECUTION,
                title="Write the form",
                requirement="A form with e-mail and password.",
                acceptance_criteria=list(criteria),
                docs=[DocInput("docs/auth.md", "the design"), DocInput("docs/old.md")],
                assignee="MEMBER:dev",
            ),
            authority=planner,
        )
        api.command(
            lambda s: s.create_node(
                parent_id="n1",
                kind=NodeKind.EXECUTION,
                title="Test it",
                requirement="An end-to-end test.",
                deps=[form.id],
            ),
            authority=planner,
        )
        api.command(
            lambda s: s.reference(node_id=form.id, target="docs/old.md", action=RefAction.EXPIRE),
            authority=planner,
        )
    return str(form.id)
