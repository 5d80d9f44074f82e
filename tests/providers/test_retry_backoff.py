"""stream_with_retry and the backoff schedule, with scripted in-process providers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindloop.providers.base import (
    Finish,
    GenerationRequest,
    ProviderError,
    StreamEvent,
    StreamRestart,
    TextDelta,
    UserMessage,
)
from mindloop.providers.retry import backoff_cap, backoff_delay, stream_with_retry

REQUEST = GenerationRequest(model="m", system="", messages=[UserMessage(text="hi")])

# One attempt = the texts it yields, then an error to raise (or None for success).
Attempt = tuple[list[str], BaseException | None]


class ScriptedProvider:
    """Plays one scripted attempt per `stream` call; records calls and closes."""

    name = "scripted"

    def __init__(self, attempts: list[Attempt]) -> None:
        self.attempts = attempts
        self.calls = 0
        self.closed = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        texts, error = self.attempts[min(self.calls, len(self.attempts) - 1)]
        self.calls += 1
        try:
            for text in texts:
                yield TextDelta(text=text)
            if error is not None:
                raise error
            yield Finish(reason="stop")
        finally:
            self.closed += 1

    async def aclose(self) -> None:
        return None


def transient(status: int = 503) -> ProviderError:
    return ProviderError(f"p: {status} try later", retriable=True, status=status)


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


async def test_success_passes_through_untouched() -> None:
    prov = ScriptedProvider([(["a", "b"], None)])
    sleeps = Sleeps()
    events = await collect(stream_with_retry(prov, REQUEST, sleep=sleeps))
    assert events == [TextDelta(text="a"), TextDelta(text="b"), Finish(reason="stop")]
    assert prov.calls == 1 and sleeps.delays == []


async def test_non_retriable_error_surfaces_at_once() -> None:
    bad = ProviderError("p: 400 bad request", retriable=False, status=400)
    prov = ScriptedProvider([([], bad)])
    seen: list[int] = []
    with pytest.raises(ProviderError) as info:
        await collect(
            stream_with_retry(
                prov, REQUEST, sleep=Sleeps(), on_retry=lambda n, e, d: seen.append(n)
            )
        )
    assert info.value is bad and str(bad) == "p: 400 bad request"
    assert prov.calls == 1 and seen == []


async def test_retries_with_bounded_delays_then_succeeds() -> None:
    prov = ScriptedProvider([([], transient()), ([], transient()), (["ok"], None)])
    sleeps = Sleeps()
    seen: list[tuple[int, float]] = []
    events = await collect(
        stream_with_retry(
            prov,
            REQUEST,
            base_delay=0.5,
            max_delay=10,
            sleep=sleeps,
            on_retry=lambda n, e, d: seen.append((n, d)),
        )
    )
    assert events == [TextDelta(text="ok"), Finish(reason="stop")]
    assert prov.calls == 3
    assert [n for n, _ in seen] == [2, 3]
    assert sleeps.delays == [d for _, d in seen]
    assert 0 <= sleeps.delays[0] <= 0.5 and 0 <= sleeps.delays[1] <= 1.0


async def test_gives_up_after_max_attempts_with_the_count() -> None:
    prov = ScriptedProvider([([], transient(502))])
    with pytest.raises(ProviderError) as info:
        await collect(stream_with_retry(prov, REQUEST, max_attempts=3, sleep=Sleeps()))
    assert prov.calls == 3
    assert str(info.value) == "p: 502 try later (after 3 attempts)"
    assert info.value.status == 502 and info.value.retriable


async def test_single_attempt_budget_says_so() -> None:
    prov = ScriptedProvider([([], transient())])
    with pytest.raises(ProviderError, match=r"\(after 1 attempt\)$"):
        await collect(stream_with_retry(prov, REQUEST, max_attempts=1, sleep=Sleeps()))
    assert prov.calls == 1


async def test_restart_only_after_partial_output() -> None:
    prov = ScriptedProvider(
        [
            (["par"], transient()),  # partial output: restart needed
            ([], transient()),  # nothing yielded: no second restart
            (["full"], None),
        ]
    )
    events = await collect(stream_with_retry(prov, REQUEST, sleep=Sleeps()))
    assert events == [
        TextDelta(text="par"),
        StreamRestart(attempt=2, reason="p: 503 try later"),
        TextDelta(text="full"),
        Finish(reason="stop"),
    ]
    assert prov.closed == 3


async def test_cancellation_is_never_retried() -> None:
    prov = ScriptedProvider([(["x"], asyncio.CancelledError())])
    sleeps = Sleeps()
    with pytest.raises(asyncio.CancelledError):
        await collect(stream_with_retry(prov, REQUEST, sleep=sleeps))
    assert prov.calls == 1 and sleeps.delays == []


async def test_cancellation_during_backoff_propagates() -> None:
    prov = ScriptedProvider([([], transient())])

    async def cancelled_sleep(_delay: float) -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await collect(stream_with_retry(prov, REQUEST, sleep=cancelled_sleep))
    assert prov.calls == 1


async def test_consumer_stopping_early_closes_the_provider_stream() -> None:
    prov = ScriptedProvider([(["a", "b", "c"], None)])
    stream = stream_with_retry(prov, REQUEST, sleep=Sleeps())
    async for _event in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert prov.closed == 1


# ---------------------------------------------------------------- backoff schedule


def test_caps_double_until_max_delay() -> None:
    assert [backoff_cap(n, 1.0, 30.0) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff_cap(10_000, 1.0, 30.0) == 30.0  # no overflow for absurd retry counts


@given(
    base=st.floats(min_value=0.001, max_value=10),
    max_delay=st.floats(min_value=0.001, max_value=120),
    retry=st.integers(min_value=0, max_value=200),
)
def test_caps_are_monotone_and_bounded(base: float, max_delay: float, retry: int) -> None:
    cap = backoff_cap(retry, base, max_delay)
    assert 0 < cap <= max_delay
    assert backoff_cap(retry + 1, base, max_delay) >= cap


@given(
    base=st.floats(min_value=0.001, max_value=10),
    max_delay=st.floats(min_value=0.001, max_value=120),
    retry=st.integers(min_value=0, max_value=200),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_delays_stay_within_the_cap(base: float, max_delay: float, retry: int, seed: int) -> None:
    delay = backoff_delay(retry, base, max_delay, random.Random(seed).uniform)
    assert 0 <= delay <= backoff_cap(retry, base, max_delay)


def test_delays_are_jittered_over_the_full_range() -> None:
    rng = random.Random(7)
    delays = [backoff_delay(3, 1.0, 30.0, rng.uniform) for _ in range(200)]
    assert len(set(delays)) == len(delays)  # not a fixed schedule
    assert min(delays) < 1.0 and max(delays) > 7.0  # spread over [0, 8]
    assert all(0 <= d <= 8.0 for d in delays)
