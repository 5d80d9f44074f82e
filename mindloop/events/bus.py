"""In-process event bus: the engine publishes, the CLI (and later the web UI) renders.

Publishing never blocks the engine: subscribers get a bounded asyncio queue per
subscription; a slow subscriber loses the oldest *chunk* events, never lifecycle ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field


class Event(BaseModel):
    """One runtime event. `type` is one of EVENT_TYPES; `data` depends on it."""

    type: str
    dialog_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    ts: float = Field(default_factory=time.time)


EVENT_TYPES = frozenset(
    {
        "generation_start",
        "text_chunk",
        "thinking_chunk",
        "generation_end",
        "generation_restart",
        "tool_call",
        "tool_result",
        "error",
        "note",
        "drive_start",
        "drive_end",
        "dialog_created",
        "tellask_call",
        "tellask_response",
        "question_asked",
        "question_answered",
        "taskdoc_changed",
    }
)

CHUNK_TYPES = frozenset({"text_chunk", "thinking_chunk"})


class EventBus:
    def __init__(self) -> None:
        self._listeners: list[Callable[[Event], None]] = []

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

    def publish(self, type: str, dialog_id: str | None = None, **data: Any) -> None:
        if not self._listeners:
            return
        ev = Event(type=type, dialog_id=dialog_id, data=data)
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):  # a renderer must never stop the runtime
                listener(ev)
