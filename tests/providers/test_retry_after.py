"""`Retry-After` is honoured (capped) by the one retry policy, for both wire protocols.

Issue 10 item 6: a 429 with `Retry-After: 3` was retried after 0.6-0.9 s, the backoff's
jitter, as if the header were not there.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wire_loopback import (
    LoopbackServer,
    Reply,
    anthropic_error_body,
    anthropic_sse,
    anthropic_text_events,
    error_body,
    json_reply,
    openai_text_stream,
)

from mindloop.providers.anthropic_provider import AnthropicProvider
from mindloop.providers.base import (
    Finish,
    GenerationRequest,
    Provider,
    ProviderError,
    StreamEvent,
    TextDelta,
    UserMessage,
)
from mindloop.providers.openai_compat import OpenAICompatProvider
from mindloop.providers.retry import stream_with_retry
from mindloop.providers.wire_errors import retry_after_seconds

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
REQUEST = GenerationRequest(model="m", system="", messages=[UserMessage(text="hi")])


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


# ---------------------------------------------------------------- the header


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"Retry-After": " 120 "}, 120.0),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": format_datetime(NOW + timedelta(seconds=42), usegmt=True)}, 42.0),
        ({"retry-after": "Sat, 01 Mar 2025 12:00:10 GMT"}, 10.0),
        ({"retry-after": format_datetime(NOW - timedelta(seconds=30), usegmt=True)}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-5"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "inf"}, None),
    ],
)
def test_retry_after_forms(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers, now=NOW) == expected


@given(st.text(max_size=40))
def test_retry_after_never_raises_and_is_finite_and_non_negative(value: str) -> None:
    for name in ("retry-after", "retry-after-ms"):
        seconds = retry_after_seconds({name: value}, now=NOW)
        assert seconds is None or (math.isfinite(seconds) and seconds >= 0)


# ---------------------------------------------------------------- the retry policy


class RateLimited:
    """Fails with a 429 carrying `retry_after` `failures` times, then answers."""

    name = "limited"

    def __init__(self, retry_after: float | None, failures: int = 1) -> None:
        self.retry_after = retry_after
        self.failures = failures
        self.calls = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ProviderError(
                "limited: 429 slow down", retriable=True, status=429, retry_after=self.retry_after
            )
        yield TextDelta(text="ok")
        yield Finish(reason="stop")

    async def aclose(self) -> None:
        return None


async def test_retry_waits_at_least_what_the_server_asks() -> None:
    sleeps = Sleeps()
    prov = RateLimited(retry_after=3.0, failures=2)
    await collect(stream_with_retry(prov, REQUEST, base_delay=0.5, max_delay=1.0, sleep=sleeps))
    assert prov.calls == 3
    assert len(sleeps.delays) == 2
    assert all(delay >= 3.0 for delay in sleeps.delays)


async def test_retry_after_is_capped() -> None:
    sleeps = Sleeps()
    prov = RateLimited(retry_after=3600.0)
    await collect(
        stream_with_retry(prov, REQUEST, base_delay=0.5, retry_after_cap=7.0, sleep=sleeps)
    )
    assert sleeps.delays == [7.0]


async def test_without_retry_after_the_backoff_applies() -> None:
    sleeps = Sleeps()
    prov = RateLimited(retry_after=None)
    await collect(stream_with_retry(prov, REQUEST, base_delay=0.5, max_delay=1.0, sleep=sleeps))
    assert len(sleeps.delays) == 1 and 0 <= sleeps.delays[0] <= 0.5


# ---------------------------------------------------------------- both wire protocols


def _openai(server: LoopbackServer) -> Provider:
    return OpenAICompatProvider("openai", server.url + "/v1", "sk-test-key")


def _anthropic(server: LoopbackServer) -> Provider:
    return AnthropicProvider("claude", server.url, "sk-ant-test-key")


WIRES: dict[str, tuple[Any, Reply, Any]] = {
    "openai": (
        _openai,
        Reply(chunks=openai_text_stream(["fine"])),
        error_body("Rate limit reached", "rate_limit_exceeded"),
    ),
    "anthropic": (
        _anthropic,
        Reply(chunks=anthropic_sse(anthropic_text_events(["fine"]))),
        anthropic_error_body("Number of requests has exceeded your rate limit", "rate_limit_error"),
    ),
}


@pytest.mark.parametrize("wire", list(WIRES))
@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"Retry-After": "Sat, 01 Mar 2025 12:00:10 GMT"}, None),  # a date long past: 0
    ],
    ids=["seconds", "http-date"],
)
async def test_429_retry_after_reaches_the_retry_policy(
    wire: str, headers: dict[str, str], expected: float | None
) -> None:
    make, success, body = WIRES[wire]
    sleeps = Sleeps()
    with LoopbackServer([json_reply(429, body, headers), success]) as srv:
        prov = make(srv)
        events = await collect(
            stream_with_retry(prov, REQUEST, base_delay=0.01, max_delay=0.02, sleep=sleeps)
        )
        await prov.aclose()
    assert srv.hits == 2
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "fine"
    [delay] = sleeps.delays
    if expected is None:
        assert delay <= 0.02  # a date in the past asks for no wait: the backoff applies
    else:
        assert delay >= expected


@pytest.mark.parametrize("wire", list(WIRES))
async def test_503_retry_after_is_carried_on_the_error(wire: str) -> None:
    make, _success, body = WIRES[wire]
    with LoopbackServer([json_reply(503, body, {"Retry-After": "17"})]) as srv:
        prov = make(srv)
        with pytest.raises(ProviderError) as info:
            await collect(prov.stream(REQUEST))
        await prov.aclose()
    assert info.value.status == 503 and info.value.retriable
    assert info.value.retry_after == 17.0
