"""Runs one model call: streams it, republishes chunks, and collects what it produced."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from mindloop.events.bus import EventBus
from mindloop.events.types import GenerationRestarted, TextChunk, ThinkingChunk
from mindloop.providers.base import GenerationRequest, ProviderError, StreamEvent, ToolCall


@dataclass
class GenerationOutcome:
    text: str = ""
    thinking: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str = "stop"
    error: ProviderError | None = None
    cancelled: bool = False
    started_at: float = field(default_factory=time.time)
    ended_at: float = 0.0


async def run_generation(
    stream: AsyncIterator[StreamEvent],
    bus: EventBus,
    dialog_id: str,
    out: GenerationOutcome,
) -> None:
    """Consume `stream` into `out` (mutated in place so a cancelled caller still has the
    partial text). Provider errors are recorded on `out`, not raised."""
    text: list[str] = []
    thinking: list[str] = []
    try:
        async for ev in stream:
            if ev.type == "text":
                text.append(ev.text)
                bus.publish(TextChunk(dialog_id=dialog_id, text=ev.text))
            elif ev.type == "thinking":
                thinking.append(ev.text)
                bus.publish(ThinkingChunk(dialog_id=dialog_id, text=ev.text))
            elif ev.type == "tool_call":
                out.calls.append(ev.call)
            elif ev.type == "usage":
                out.input_tokens = (out.input_tokens or 0) + ev.input_tokens
                out.output_tokens = (out.output_tokens or 0) + ev.output_tokens
            elif ev.type == "finish":
                out.finish_reason = ev.reason
            elif ev.type == "restart":
                text.clear()
                thinking.clear()
                out.calls.clear()
                out.input_tokens = out.output_tokens = None
                bus.publish(
                    GenerationRestarted(dialog_id=dialog_id, attempt=ev.attempt, reason=ev.reason)
                )
    except ProviderError as exc:
        out.error = exc
        out.finish_reason = "error"
    finally:
        out.text = "".join(text)
        out.thinking = "".join(thinking)
        out.ended_at = time.time()


def request_for_log(req: GenerationRequest) -> dict[str, object]:
    """A compact description of a request for events (never the whole prompt)."""
    return {"model": req.model, "messages": len(req.messages), "tools": len(req.tools)}
