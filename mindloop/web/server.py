"""Serving the web UI: the listening socket, the token, uvicorn, the printed address.

The socket is bound before anything is announced, so the printed address is one that
works (port 0 picks a free port) and a port in use is an error naming it. Only a loopback
address is served unless the caller explicitly allows another (`allow_remote`): the UI
can steer agents that run tools on this machine.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from mindloop.errors import MindloopError
from mindloop.service import Project
from mindloop.web.app import create_app
from mindloop.web.state import WebOptions


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port), or an error naming it."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bare, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise MindloopError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def refuse_remote(host: str, allow_remote: bool) -> None:
    """A non-loopback address only when explicitly allowed."""
    if not is_loopback(host) and not allow_remote:
        raise MindloopError(
            f"--host {host} is not a loopback address: anyone who can reach it and learns the "
            "token can steer your agents; pass --allow-remote to do it anyway"
        )


def remote_warning(host: str) -> str | None:
    """What a user serving on a non-loopback address (allowed by `refuse_remote`) is told
    before the server starts; None on loopback."""
    if is_loopback(host):
        return None
    return (
        f"warning: serving on {host}, not only on this machine: anyone who can reach it "
        "and learns the token can read and steer your agents"
    )


@dataclass(frozen=True)
class Serving:
    url: str  # with the token
    host: str
    port: int


def address(sock: socket.socket, host: str, token: str) -> Serving:
    port = int(sock.getsockname()[1])
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return Serving(url=f"http://{shown}:{port}/?token={token}", host=host, port=port)


async def serve(
    project: Project,
    sock: socket.socket,
    *,
    host: str = "127.0.0.1",
    open_browser: bool = False,
    drive: bool = True,
    stream_lifetime: float = 600.0,
    announce: Callable[[Serving], None],
) -> None:
    """Serve on `sock` (from `listen`) until stopped (Ctrl-C / SIGTERM)."""
    token = secrets.token_urlsafe(24)
    serving = address(sock, host, token)
    project.runtime  # noqa: B018 - open the state now: a refusal stops before serving
    options = WebOptions(token=token, drive=drive, stream_lifetime=stream_lifetime)
    app = create_app(project, options)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)

    async def when_started() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.05)
        announce(serving)
        if open_browser:
            await asyncio.to_thread(webbrowser.open, serving.url)

    opener = asyncio.create_task(when_started())
    try:
        await server.serve(sockets=[sock])
    finally:
        opener.cancel()
        sock.close()
