"""Runs one model call: streams it, republishes chunks, and collects what it produced."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from mindloop.durable.steps import Codec, JsonObject
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


def _encode_outcome(out: GenerationOutcome) -> JsonObject:
    err = out.error
    return {
        "text": out.text,
        "thinking": out.thinking,
        "calls": [c.model_dump() for c in out.calls],
        "input_tokens": out.input_tokens,
        "output_tokens": out.output_tokens,
        "finish_reason": out.finish_reason,
        "error": None
        if err is None
        else {"message": str(err), "retriable": err.retriable, "status": err.status},
        "cancelled": out.cancelled,
        "started_at": out.started_at,
        "ended_at": out.ended_at,
    }


def _decode_outcome(data: JsonObject) -> GenerationOutcome:
    err = data.get("error")
    return GenerationOutcome(
        text=data["text"],
        thinking=data["thinking"],
        calls=[ToolCall.model_validate(c) for c in data["calls"]],
        input_tokens=data["input_tokens"],
        output_tokens=data["output_tokens"],
        finish_reason=data["finish_reason"],
        error=None
        if err is None
        else ProviderError(err["message"], retriable=err["retriable"], status=err["status"]),
        cancelled=data["cancelled"],
        started_at=data["started_at"],
        ended_at=data["ended_at"],
    )


# A generation's outcome as a durable step records it (JSON; see `mindloop.durable`).
GENERATION_CODEC = Codec(_encode_outcome, _decode_outcome)


def generation_key(dialog_id: str, course: int, last_message_id: int, n_messages: int) -> str:
    """What a generation is, for a durable step: the dialog, its course and the history
    its request was built from (the newest stored message, and the view's length, which
    also counts what was added without a stored id yet)."""
    raw = f"gen|{dialog_id}|{course}|{last_message_id}|{n_messages}"
    return hashlib.sha256(raw.encode()).hexdigest()


def request_for_log(req: GenerationRequest) -> dict[str, object]:
    """A compact description of a request for events (never the whole prompt)."""
    return {"model": req.model, "messages": len(req.messages), "tools": len(req.tools)}
