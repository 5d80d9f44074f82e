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
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass

from mindloop.providers.base import (
    PartialOutput,
    ProviderError,
    StreamEvent,
    ToolCall,
)


@dataclass(frozen=True)
class Deadlines:
    """Seconds from the start of an attempt: to its first content, and to its end."""

    first_content: float
    total: float


class AttemptGuard:
    """Enforces the rules above on one attempt, driven by the retry loop: `begin`, then
    `next(stream)` for each event, `failed(err)` on a failure, `end` in any case.
    `partial` is what the attempt streamed so far.

    The deadlines cost no timer of their own: `begin` enters the attempt in its event
    loop's `_Watchdog` and `end` takes it out; the watchdog looks at the open attempts
    every `TICK` seconds while there are any. A deadline so goes off at most `TICK` late.
    It cancels the task only while the guard is waiting on the provider (`_waiting`). If
    it goes off while the consumer is busy, the next wait gets a zero timeout instead, so
    an event that is already there is still delivered and only a wait that would block
    fails."""

    def __init__(self, provider: str, deadlines: Deadlines | None = None) -> None:
        self.provider = provider
        self.deadlines = deadlines
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[ToolCall] = []
        self._content = False
        self._answered = False
        self._waiting = False
        self._fired = False  # the watchdog cancelled the task
        self._overdue = False  # a deadline went off while the consumer had the event
        self._watchdog: _Watchdog | None = None
        self._first_at = 0.0  # loop times the deadlines go off
        self._end_at = 0.0
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0

    @property
    def partial(self) -> PartialOutput | None:
        text, thinking = "".join(self._text), "".join(self._thinking)
        if not (text or thinking or self._calls):
            return None
        return PartialOutput(text=text, thinking=thinking, tool_calls=list(self._calls))

    def begin(self) -> None:
        """Start the attempt's clock (call in the task that will iterate the stream)."""
        if self.deadlines is None:
            return
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._cancelling = self._task.cancelling() if self._task is not None else 0
        start = loop.time()
        self._first_at = start + self.deadlines.first_content
        self._end_at = start + self.deadlines.total
        self._watchdog = _Watchdog.of(loop)
        self._watchdog.add(self)

    async def next(self, stream: AsyncIterator[StreamEvent]) -> StreamEvent:
        """The stream's next event, within the deadlines; raises `StopAsyncIteration` at
        the end, and a retriable `ProviderError` for a deadline missed or an empty answer
        finishing. (Called per event: kept to one coroutine frame on purpose.)"""
        if self._watchdog is None:
            event = await stream.__anext__()
        elif self._overdue:
            event = await self._next_overdue(stream)
        else:
            self._waiting = True
            try:
                event = await stream.__anext__()
            except asyncio.CancelledError:
                if self._fired and self._task is not None:
                    self._fired = False
                    if self._task.uncancel() <= self._cancelling:
                        raise self._late() from None
                raise
            finally:
                self._waiting = False
        # Dispatch on the literal `type` tag: far cheaper per event than isinstance.
        if event.type == "text":
            self._text.append(event.text)
            if not self._answered and event.text.strip():
                self._answered = True
        elif event.type == "thinking":
            self._thinking.append(event.text)
        elif event.type == "tool_call":
            self._calls.append(event.call)
            self._answered = True
        elif event.type != "tool_call_delta":  # usage, finish, restart: not content
            if event.type == "finish" and not self._answered:
                raise self._empty(event.reason)
            return event
        if not self._content:
            self._content = True
            if self._overdue and self._watchdog is not None:
                # the first-content deadline went off with this event waiting: only the
                # overall one applies now
                self._overdue = asyncio.get_running_loop().time() >= self._end_at
        return event

    def failed(self, err: ProviderError) -> ProviderError:
        """`err`, carrying what this attempt streamed before it."""
        err.partial = self.partial
        return err

    def end(self) -> None:
        if self._watchdog is not None:
            self._watchdog.discard(self)
            self._watchdog = None

    async def _next_overdue(self, stream: AsyncIterator[StreamEvent]) -> StreamEvent:
        """The deadline passed while the consumer held the last event: an event already
        there is still delivered; a wait that would block fails at once."""
        timeout = asyncio.timeout(0)
        try:
            async with timeout:
                return await stream.__anext__()
        except TimeoutError:
            if timeout.expired():
                raise self._late() from None
            raise

    def _check(self, now: float) -> None:
        """The watchdog's look: a deadline passed cancels the wait on the provider, or
        makes the next wait that would block fail."""
        if self._fired or self._overdue:
            return
        if now < self._end_at and (self._content or now < self._first_at):
            return
        if self._waiting and self._task is not None:
            self._fired = True
            self._task.cancel()
        else:
            self._overdue = True

    def _late(self) -> ProviderError:
        assert self.deadlines is not None
        if self._content:
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


TICK = 0.05  # seconds between the watchdog's looks at the open attempts


class _Watchdog:
    """The open attempts of one event loop, looked at every `TICK` seconds while there
    are any: one timer for them all, instead of a timer armed and cancelled per attempt
    (an attempt's own cost is a set insertion and removal)."""

    def __init__(self) -> None:
        # (no reference to the loop: it keys the registry weakly; the running loop is
        # the one every call here is made in)
        self.open: set[AttemptGuard] = set()
        self._timer: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _Watchdog:
        found = _WATCHDOGS.get(loop)
        if found is None:
            found = _WATCHDOGS[loop] = cls()
        return found

    def add(self, guard: AttemptGuard) -> None:
        self.open.add(guard)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(TICK, self._look)

    def discard(self, guard: AttemptGuard) -> None:
        self.open.discard(guard)

    def _look(self) -> None:
        self._timer = None
        if not self.open:
            return  # idle: the next attempt arms the timer again
        loop = asyncio.get_running_loop()
        now = loop.time()
        for guard in list(self.open):
            guard._check(now)
        self._timer = loop.call_later(TICK, self._look)


_WATCHDOGS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = (
    weakref.WeakKeyDictionary()
)
