"""Retry a provider stream on transient failures, with exponential backoff and full jitter.

The SDKs' own retries are switched off so there is exactly one retry policy, visible and
testable here. A server's `Retry-After` is honoured: the wait before a retry is never
shorter than it asks, up to `retry_after_cap`. Each attempt runs under the guard
(`guard.py`: deadlines, no empty answers, partial output reported). A failure after
output has already been streamed cannot be "resumed": the generation starts over, and a
`StreamRestart` tells the consumer to discard what it got. Cancellation is never
retried: `asyncio.CancelledError` is not a `ProviderError`, so it passes straight through.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable

from mindloop.config.llm import DEFAULT_RETRY_AFTER_CAP
from mindloop.providers.base import (
    GenerationRequest,
    Provider,
    ProviderError,
    StreamEvent,
    StreamRestart,
)
from mindloop.providers.guard import AttemptGuard, Deadlines

DEFAULT_MAX_ATTEMPTS = 5
_MAX_EXPONENT = 60  # 2**60 seconds is already far beyond any max_delay; avoids float overflow

Sleep = Callable[[float], Awaitable[object]]
OnRetry = Callable[[int, ProviderError, float], None]


def backoff_cap(retry: int, base_delay: float, max_delay: float) -> float:
    """Upper bound of the delay before retry number `retry` (0 for the first retry):
    `min(max_delay, base_delay * 2**retry)`; non-decreasing in `retry`."""
    return min(max_delay, base_delay * 2 ** min(max(retry, 0), _MAX_EXPONENT))


def backoff_delay(
    retry: int,
    base_delay: float,
    max_delay: float,
    uniform: Callable[[float, float], float] = random.uniform,
) -> float:
    """Full jitter: a uniformly random delay in `[0, backoff_cap(retry)]`, so many dialogs
    hitting the same rate limit do not retry in lock-step."""
    return uniform(0.0, backoff_cap(retry, base_delay, max_delay))


async def _close(stream: AsyncIterator[StreamEvent]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


def retry_delay(
    retry: int,
    retry_after: float | None,
    base_delay: float,
    max_delay: float,
    retry_after_cap: float,
    uniform: Callable[[float, float], float] = random.uniform,
) -> float:
    """The wait before retry number `retry`: the jittered backoff, but never less than the
    server's `Retry-After` (itself capped at `retry_after_cap`)."""
    delay = backoff_delay(retry, base_delay, max_delay, uniform)
    if retry_after is not None:
        delay = max(delay, min(retry_after, retry_after_cap))
    return delay


async def stream_with_retry(
    provider: Provider,
    request: GenerationRequest,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    base_delay: float = 1.0,
    max_delay: float = 30.0,
    retry_after_cap: float = DEFAULT_RETRY_AFTER_CAP,
    deadlines: Deadlines | None = None,
    sleep: Sleep = asyncio.sleep,
    on_retry: OnRetry | None = None,
    slot: asyncio.Semaphore | None = None,
) -> AsyncIterator[StreamEvent]:
    """Stream `request` from `provider`, retrying retriable `ProviderError`s.

    At most `max_attempts` attempts in total, each bounded by `deadlines` (None: no
    deadlines). Before each retry `on_retry(attempt, error, delay)` is called with the
    number of the attempt about to start (2 for the first retry). If the failed attempt
    had already yielded events, a `StreamRestart(attempt, reason)` is yielded before the
    retried stream's events. Non-retriable errors surface at once; when attempts run out
    the last error is raised with "(after N attempts)" added. Either way the error's
    `partial` holds what its attempt had streamed (None if nothing). `slot` (a
    provider's concurrency limit) is held from the first attempt to the end.
    """
    if slot is not None:  # the provider's concurrency limit, held to the end
        await slot.acquire()
    try:
        attempts = max(1, max_attempts)
        attempt = 1
        while True:
            dirty = False  # events yielded by this attempt that a retry would invalidate
            guard = AttemptGuard(provider.name, deadlines)
            stream: AsyncIterator[StreamEvent] | None = None
            guard.begin()
            try:
                stream = provider.stream(request)
                while True:
                    try:
                        event = await guard.next(stream)
                    except StopAsyncIteration:
                        return
                    dirty = True
                    yield event
            except ProviderError as err:
                failure = guard.failed(err)
            finally:
                guard.end()
                if stream is not None:
                    await _close(stream)
            if not failure.retriable:
                raise failure
            if attempt >= attempts:
                noun = "attempt" if attempt == 1 else "attempts"
                failure.args = (f"{failure} (after {attempt} {noun})", *failure.args[1:])
                raise failure
            delay = retry_delay(
                attempt - 1, failure.retry_after, base_delay, max_delay, retry_after_cap
            )
            attempt += 1
            if on_retry is not None:
                on_retry(attempt, failure, delay)
            if dirty:
                yield StreamRestart(attempt=attempt, reason=str(failure))
            await sleep(delay)
    finally:
        if slot is not None:
            slot.release()
