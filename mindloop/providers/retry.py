"""Retry a provider stream on transient failures, with exponential backoff and full jitter.

The SDKs' own retries are switched off so there is exactly one retry policy, visible and
testable here. A failure after output has already been streamed cannot be "resumed": the
generation starts over, and a `StreamRestart` tells the consumer to discard what it got.
Cancellation is never retried: `asyncio.CancelledError` is not a `ProviderError`, so it
passes straight through.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable

from mindloop.providers.base import (
    GenerationRequest,
    Provider,
    ProviderError,
    StreamEvent,
    StreamRestart,
)

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


async def stream_with_retry(
    provider: Provider,
    request: GenerationRequest,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    base_delay: float = 1.0,
    max_delay: float = 30.0,
    sleep: Sleep = asyncio.sleep,
    on_retry: OnRetry | None = None,
) -> AsyncIterator[StreamEvent]:
    """Stream `request` from `provider`, retrying retriable `ProviderError`s.

    At most `max_attempts` attempts in total. Before each retry `on_retry(attempt, error,
    delay)` is called with the number of the attempt about to start (2 for the first
    retry). If the failed attempt had already yielded events, a `StreamRestart(attempt,
    reason)` is yielded before the retried stream's events. Non-retriable errors surface at
    once; when attempts run out the last error is raised with "(after N attempts)" added.
    """
    attempts = max(1, max_attempts)
    attempt = 1
    while True:
        dirty = False  # events yielded by this attempt that a retry would invalidate
        stream: AsyncIterator[StreamEvent] | None = None
        try:
            stream = provider.stream(request)
            async for event in stream:
                dirty = True
                yield event
            return
        except ProviderError as err:
            failure = err
        finally:
            if stream is not None:
                await _close(stream)
        if not failure.retriable:
            raise failure
        if attempt >= attempts:
            noun = "attempt" if attempt == 1 else "attempts"
            failure.args = (f"{failure} (after {attempt} {noun})", *failure.args[1:])
            raise failure
        delay = backoff_delay(attempt - 1, base_delay, max_delay)
        attempt += 1
        if on_retry is not None:
            on_retry(attempt, failure, delay)
        if dirty:
            yield StreamRestart(attempt=attempt, reason=str(failure))
        await sleep(delay)
