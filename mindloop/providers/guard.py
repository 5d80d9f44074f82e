"""What every attempt of a generation must satisfy, whichever provider streams it.

The rules hold for the OpenAI, Anthropic and mock streams alike, so they live here once,
applied by the retry layer to each attempt, instead of in each adapter:

- **Deadlines.** An SDK `timeout` bounds only the gap between bytes, and keep-alives (SSE
  comments, Anthropic `ping` events, both swallowed inside the SDKs) reset it: a server
  sending only those would hold a generation for ever. So an attempt must produce content
  (text, thinking, or a piece of a function call) within `first_content` seconds of its
  start, and end within `total` seconds. Missing either is a retriable failure. The
  deadlines bound only the waits on the provider; the consumer's own work between events
  is never interrupted.
- **No empty answers.** A stream that completes with no text and no function call answers
  nothing (thinking alone is not an answer). It is a retriable failure: asked again, a
  model usually answers.
- **Partial output is reported, not lost.** When an attempt fails after streaming output,
  the error carries what it streamed (`ProviderError.partial`), so the caller can keep it
  as a record of the failure without mistaking it for an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

from mindloop.providers.base import (
    PartialOutput,
    ProviderError,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEvent,
)

# Events that show the model producing output (`Usage` and `Finish` do not).
CONTENT_EVENTS = (TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEvent)


@dataclass(frozen=True)
class Deadlines:
    """Seconds from the start of an attempt: to its first content, and to its end."""

    first_content: float
    total: float


@dataclass
class AttemptGuard:
    """Watches one attempt's stream: `watch` re-yields its events, enforcing the rules
    above; `partial` is what the attempt streamed so far."""

    provider: str
    deadlines: Deadlines | None = None
    _text: list[str] = field(default_factory=list)
    _thinking: list[str] = field(default_factory=list)
    _calls: list[ToolCall] = field(default_factory=list)
    _content: bool = False

    @property
    def partial(self) -> PartialOutput | None:
        if not (self._text or self._thinking or self._calls):
            return None
        return PartialOutput(
            text="".join(self._text), thinking="".join(self._thinking), tool_calls=self._calls
        )

    def _answered(self) -> bool:
        return bool(self._calls) or any(piece.strip() for piece in self._text)

    async def watch(self, stream: AsyncIterator[StreamEvent]) -> AsyncGenerator[StreamEvent, None]:
        iterator = stream.__aiter__()
        start = asyncio.get_running_loop().time()
        try:
            while True:
                try:
                    event = await self._next(iterator, start)
                except StopAsyncIteration:
                    return
                self._note(event)
                if event.type == "finish" and not self._answered():
                    raise self._empty(event.reason)
                yield event
        except ProviderError as err:
            err.partial = self.partial
            raise
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _next(self, iterator: AsyncIterator[StreamEvent], start: float) -> StreamEvent:
        if self.deadlines is None:
            return await iterator.__anext__()
        first = self.deadlines.first_content
        limit = self.deadlines.total if self._content else min(first, self.deadlines.total)
        timeout = asyncio.timeout_at(start + limit)
        try:
            async with timeout:
                return await iterator.__anext__()
        except TimeoutError:
            if not timeout.expired():
                raise
            raise self._late(self._content) from None

    def _note(self, event: StreamEvent) -> None:
        if isinstance(event, CONTENT_EVENTS):
            self._content = True
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ThinkingDelta):
            self._thinking.append(event.text)
        elif isinstance(event, ToolCallEvent):
            self._calls.append(event.call)

    def _late(self, content_seen: bool) -> ProviderError:
        assert self.deadlines is not None
        if content_seen:
            return ProviderError(
                f"{self.provider}: the response did not finish within "
                f"{self.deadlines.total:g} s (generation_deadline in .minds/llm.yaml)",
                retriable=True,
            )
        return ProviderError(
            f"{self.provider}: no content within {self.deadlines.first_content:g} s "
            "(first_content_deadline in .minds/llm.yaml): the server sent nothing, or only "
            "keep-alives",
            retriable=True,
        )

    def _empty(self, reason: str) -> ProviderError:
        return ProviderError(
            f"{self.provider}: the model returned an empty response (no text and no "
            f"function call; finish reason {reason!r})",
            retriable=True,
        )
