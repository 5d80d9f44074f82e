"""`GET /events`: the live feed as server-sent events, resumable with `Last-Event-ID`.

A stream starts at the position the browser sends back on a reconnect (`Last-Event-ID`)
or the page was drawn at (`?since=`), else now. It first says `state` (so a page that
reconnects reads its lists again), then replays what it missed from the store, then
follows the feed. Items of the stored logs carry the stream's new position as their
`id`; chunks and state notices carry none, so they never move it.

Each stream ends after `stream_lifetime` seconds: the browser reconnects after
`retry_ms` and resumes where it was, so no connection lingers for ever behind a proxy or
a sleeping laptop, and resuming is exercised all the time rather than only on failures.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mindloop.web.feed import (
    Cursor,
    CursorError,
    EntryItem,
    FeedItem,
    MarkItem,
    ResetItem,
    Scope,
    Subscription,
    TaskdocItem,
)
from mindloop.web.state import WebState, web


def _event(sub: Subscription, item: FeedItem) -> ServerSentEvent | None:
    """The SSE event for an item (None: already sent, or nothing to say)."""
    if isinstance(item, EntryItem | TaskdocItem):
        if not sub.advance(item):
            return None
        return ServerSentEvent(item.model_dump_json(), event=item.kind, id=sub.cursor.encode())
    if isinstance(item, MarkItem):
        if not sub.advance(item):
            return None
        return ServerSentEvent("{}", event="mark", id=sub.cursor.encode())
    return ServerSentEvent(item.model_dump_json(), event=item.kind)


async def _follow(
    state: WebState, scope: Scope, since: Cursor, origin: str
) -> AsyncIterator[ServerSentEvent]:
    feed = state.live
    sub, missed = feed.subscribe(scope, since)
    deadline = time.monotonic() + state.options.stream_lifetime
    try:
        # The position the stream starts from is its first id: a browser that loses the
        # connection before anything else arrived resumes from there.
        start = sub.cursor.encode()
        yield ServerSentEvent(
            json.dumps({"position": start, "from": origin}),
            event="hello",
            id=start,
            retry=state.options.retry_ms,
        )
        yield ServerSentEvent("{}", event="state")
        for old in missed:
            ev = _event(sub, old)
            if ev is not None:
                yield ev
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                item = await asyncio.wait_for(sub.queue.get(), left)
            except TimeoutError:
                return
            if item is None:  # the server is stopping
                return
            if sub.overflowed:
                yield ServerSentEvent(ResetItem().model_dump_json(), event="reset")
                return
            ev = _event(sub, item)
            if ev is not None:
                yield ev
    finally:
        feed.unsubscribe(sub)


async def events(request: Request) -> Response:
    state = web(request)
    resumed = request.headers.get("last-event-id")
    raw = resumed or request.query_params.get("since")
    origin = "last-event-id" if resumed else "since" if raw else "now"
    try:
        since = Cursor.decode(raw) if raw else state.live.cursor()
    except CursorError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    q = request.query_params
    scope = Scope(root=q.get("root") or None, task=q.get("task") or None)
    return EventSourceResponse(
        _follow(state, scope, since, origin),
        ping=15,
        send_timeout=30,
        headers={"cache-control": "no-store"},
    )


routes = [Route("/events", events)]
