"""In-process event bus: the engine publishes typed events, the faces render them.

Publishing never blocks the engine: listeners run inline and must be cheap; an async
consumer subscribes with a bounded queue, and a slow one loses the oldest *chunk*
events, never lifecycle ones. The event kinds are in `events.types`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

from mindloop.events.types import CHUNK_TYPES, Event


class EventBus:
    def __init__(self) -> None:
        self._listeners: list[Callable[[Event], None]] = []

    @property
    def listening(self) -> bool:
        """Whether anyone listens (a publisher may skip building a costly event)."""
        return bool(self._listeners)

    def subscribe(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Register a synchronous listener; returns an unsubscribe function.

        Listeners run inline and must be cheap (render, enqueue); exceptions in a
        listener are swallowed so a broken renderer never stops a dialog."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def queue(self, maxsize: int = 10_000) -> tuple[asyncio.Queue[Event], Callable[[], None]]:
        """Subscribe with an asyncio queue (for async consumers)."""
        q: asyncio.Queue[Event] = asyncio.Queue(maxsize=maxsize)

        def put(ev: Event) -> None:
            if q.full():
                if ev.type in CHUNK_TYPES:
                    return
                q.get_nowait()
            q.put_nowait(ev)

        return q, self.subscribe(put)

    def publish(self, event: Event) -> None:
        for listener in tuple(self._listeners):  # one may unsubscribe while it runs
            try:
                listener(event)
            except Exception:  # a renderer must never stop the runtime
                continue

    @contextlib.contextmanager
    def holding(self) -> Iterator[list[Event]]:
        """Within the block, what is published is kept in the list yielded instead of
        delivered (the caller publishes it later, e.g. once the transaction that made the
        events committed). The instance's `publish` is shadowed meanwhile, so publishing
        outside such a block costs nothing more."""
        held: list[Event] = []
        self.publish = held.append  # type: ignore[method-assign,assignment]
        try:
            yield held
        finally:
            del self.publish
