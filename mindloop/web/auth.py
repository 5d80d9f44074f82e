"""Every request needs the server's token: the web UI can read and steer everything an
agent team does, so being on the same machine is not enough (other users, other sites'
pages in the same browser).

- The token is made when the server starts and printed in its URL (`/?token=…`). Opening
  that URL sets an HttpOnly, SameSite=Strict cookie and redirects to the same page
  without the token (so it stays out of the history and of `Referer`).
- Programs send `Authorization: Bearer <token>` instead.
- Anything else gets 401 (an HTML page telling a person what to open, JSON otherwise).
- A form post authenticated by the cookie must come from the server's own pages: an
  `Origin` of another site is refused (SameSite already keeps the cookie off cross-site
  requests; this also covers browsers that ignore it).
- Every response forbids framing and inline scripts, and is not cached.

Pure ASGI (no response buffering): the event stream passes through untouched.
"""

from __future__ import annotations

import hmac
import json
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "mindloop_token"
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]

UNAUTHORIZED_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mindloop: token needed</title></head>
<body><main><h1>This page needs the server's token</h1>
<p>Open the address <code>mindloop web</code> printed when it started (it ends with
<code>?token=…</code>). Programs send <code>Authorization: Bearer &lt;token&gt;</code>.</p>
</main></body></html>
"""


def _same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


class TokenAuth:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.get("token")
        if given is not None:
            if not _same(given, self.token):
                await _refuse(scope, send, headers, "the token in the address is not this server's")
                return
            await _login(scope, send, self.token, query)
            return
        bearer = _bearer(headers.get("authorization"))
        cookie = _cookie(headers.get("cookie"), COOKIE)
        if _same(bearer, self.token):
            await self.app(scope, receive, _secured(send))
            return
        if not _same(cookie, self.token):
            await _refuse(scope, send, headers, "no valid token (cookie or Authorization header)")
            return
        if scope["method"] not in ("GET", "HEAD") and not _same_origin(headers):
            await _respond(send, 403, "text/plain", b"cross-site request refused\n")
            return
        await self.app(scope, receive, _secured(send))


def _bearer(value: str | None) -> str | None:
    if not value:
        return None
    kind, _, token = value.partition(" ")
    return token.strip() if kind.lower() == "bearer" else None


def _cookie(header: str | None, name: str) -> str | None:
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def _same_origin(headers: dict[str, str]) -> bool:
    """A form post's `Origin` (browsers send one) names this server, or is absent."""
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == headers.get("host", "")


def _secured(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            have = {k.lower() for k, _ in message.get("headers", [])}
            extra = [(k, v) for k, v in SECURITY_HEADERS if k not in have]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return wrapped


async def _login(scope: Scope, send: Send, token: str, query: dict[str, str]) -> None:
    """Set the cookie and send the browser to the same address without the token."""
    rest = {k: v for k, v in query.items() if k != "token"}
    path = str(scope.get("path") or "/")
    if not path.startswith("/") or path.startswith("//"):
        path = "/"  # only a path of this server
    location = path + (f"?{urlencode(rest)}" if rest else "")
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    await _respond(
        send,
        303,
        "text/plain",
        b"",
        extra=[(b"location", location.encode()), (b"set-cookie", cookie.encode())],
    )


async def _refuse(scope: Scope, send: Send, headers: dict[str, str], why: str) -> None:
    if "text/html" in headers.get("accept", ""):
        await _respond(send, 401, "text/html; charset=utf-8", UNAUTHORIZED_HTML.encode())
        return
    body = json.dumps({"error": f"unauthorized: {why}"}).encode()
    await _respond(
        send,
        401,
        "application/json",
        body,
        extra=[(b"www-authenticate", b'Bearer realm="mindloop"')],
    )


async def _respond(
    send: Send,
    status: int,
    content_type: str,
    body: bytes,
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        *(extra or []),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
