"""A streamable-HTTP MCP server for the tests, built with the `mcp` SDK's own `MCPServer`.

Run as a script: it binds 127.0.0.1 on a free port, prints the port on its first line of
stdout, and serves `/mcp` until killed. With FIXTURE_TOKEN set it answers 401 to any
request without `Authorization: Bearer <token>` (and without `X-Fixture-Key: <key>` when
FIXTURE_KEY is set too), as a server behind an API key does.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import uvicorn
from mcp.server import MCPServer

server = MCPServer("fixture")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise ValueError(message)


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


TOKEN = os.environ.get("FIXTURE_TOKEN", "")
KEY = os.environ.get("FIXTURE_KEY", "")


def guarded(app: Any) -> Any:
    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and TOKEN:
            headers = dict(scope["headers"])
            ok = headers.get(b"authorization", b"").decode() == f"Bearer {TOKEN}"
            if KEY:
                ok = ok and headers.get(b"x-fixture-key", b"").decode() == KEY
            if not ok:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return asgi


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn serves them
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(
        guarded(server.streamable_http_app()), log_level="warning", lifespan="on"
    )
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
