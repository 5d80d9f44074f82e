"""The rules every attempt of a generation must satisfy, whichever provider streams it:
deadlines (issue 10 item 5), no empty answers (item 7), and a failure after partial output
reported with that output (item 2, provider side). Scripted in-process providers; the
wire versions of the same faults are in test_wire_faults.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.providers.base import (
    Finish,
    GenerationRequest,
    PartialOutput,
    ProviderError,
    StreamEvent,
    StreamRestart,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEvent,
    Usage,
    UserMessage,
)
from mindloop.providers.guard import Deadlines
from mindloop.providers.retry import stream_with_retry

REQUEST = GenerationRequest(model="m", system="", messages=[UserMessage(text="hi")])
CALL = ToolCall(id="c1", name="read_file", arguments='{"path": "a"}')

# One attempt: ("wait", seconds) sleeps, ("hang",) never returns, an event is yielded, an
# exception is raised.
Step = tuple[str, float] | tuple[str] | StreamEvent | BaseException


class Scripted:
    """Plays one scripted attempt per `stream` call (the last one repeats)."""

    name = "scripted"

    def __init__(self, *attempts: list[Step]) -> None:
        self.attempts = list(attempts)
        self.calls = 0
        self.closed = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        steps = self.attempts[min(self.calls, len(self.attempts) - 1)]
        self.calls += 1
        try:
            for step in steps:
                if isinstance(step, BaseException):
                    raise step
                if isinstance(step, tuple):
                    if step[0] == "hang":
                        await asyncio.Event().wait()
                    else:
                        await asyncio.sleep(step[1])  # type: ignore[misc]
                    continue
                yield step
        finally:
            self.closed += 1

    async def aclose(self) -> None:
        return None


async def no_sleep(_delay: float) -> None:
    return None


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


def answer(text: str = "hello") -> list[Step]:
    return [TextDelta(text=text), Usage(input_tokens=1, output_tokens=1), Finish(reason="stop")]


def texts(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


FAST = Deadlines(first_content=0.2, total=0.6)


# ---------------------------------------------------------------- deadlines (item 5)


async def test_no_content_within_the_first_content_deadline_is_a_retriable_failure() -> None:
    prov = Scripted([("hang",)])
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await collect(stream_with_retry(prov, REQUEST, max_attempts=1, deadlines=FAST))
    assert time.monotonic() - started < 2
    err = info.value
    assert err.retriable and err.status is None
    assert "scripted: no content within 0.2 s" in str(err)
    assert "first_content_deadline" in str(err)
    assert prov.closed == 1


async def test_usage_and_other_bookkeeping_do_not_count_as_content() -> None:
    # An Anthropic stream can send message_start usage and then only pings.
    prov = Scripted([Usage(input_tokens=3, output_tokens=0), ("hang",)])
    with pytest.raises(ProviderError, match="no content within"):
        await collect(stream_with_retry(prov, REQUEST, max_attempts=1, deadlines=FAST))


async def test_a_hang_is_retried_and_the_retry_succeeds() -> None:
    prov = Scripted([("hang",)], answer("second time"))
    events = await collect(stream_with_retry(prov, REQUEST, deadlines=FAST, sleep=no_sleep))
    assert prov.calls == 2
    assert texts(events) == "second time"


@pytest.mark.parametrize(
    "first",
    [
        ThinkingDelta(text="hmm"),
        TextDelta(text="Hel"),
        ToolCallDelta(index=0, name="read_file"),
    ],
    ids=["thinking", "text", "tool-call-fragment"],
)
async def test_content_started_then_overall_deadline(first: StreamEvent) -> None:
    # Content came in time (so the first-content deadline is met), then only silence or
    # keep-alives: the overall deadline ends the attempt.
    prov = Scripted([first, ("wait", 0.3), ("hang",)])
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await collect(stream_with_retry(prov, REQUEST, max_attempts=1, deadlines=FAST))
    elapsed = time.monotonic() - started
    assert 0.5 < elapsed < 2
    assert info.value.retriable
    assert "did not finish within 0.6 s" in str(info.value)
    assert "generation_deadline" in str(info.value)


async def test_the_deadline_counts_from_the_start_of_each_attempt() -> None:
    # Each attempt takes ~0.45 s of a 0.6 s deadline; together they take longer.
    dropped = ProviderError("scripted: stream dropped", retriable=True)
    prov = Scripted(
        [("wait", 0.1), TextDelta(text="a"), ("wait", 0.35), dropped],
        [("wait", 0.1), TextDelta(text="b"), ("wait", 0.35), *answer("c")],
    )
    started = time.monotonic()
    events = await collect(stream_with_retry(prov, REQUEST, deadlines=FAST, sleep=no_sleep))
    assert time.monotonic() - started > FAST.total
    assert texts(events) == "abc"


async def test_slow_consumer_is_not_cancelled_by_the_deadline() -> None:
    # The deadline bounds waiting on the provider; the consumer's own work between events
    # is never interrupted (it may make the next wait shorter).
    prov = Scripted(answer("ok"))
    seen = []
    async for event in stream_with_retry(prov, REQUEST, deadlines=FAST):
        await asyncio.sleep(0.25)
        seen.append(event)
    assert texts(seen) == "ok"


async def test_deadline_passing_while_the_consumer_works_fails_the_next_blocking_wait() -> None:
    prov = Scripted([TextDelta(text="a"), TextDelta(text="b"), ("hang",)])
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderError, match=r"did not finish within 0\.6 s"):
        async for event in stream_with_retry(prov, REQUEST, max_attempts=1, deadlines=FAST):
            seen.append(event)
            if len(seen) == 1:
                await asyncio.sleep(0.7)  # the deadline passes here, outside any wait
    assert texts(seen) == "ab"  # "b" was already there: still delivered


async def test_without_deadlines_a_slow_stream_is_left_alone() -> None:
    prov = Scripted([("wait", 0.3), *answer("late")])
    assert texts(await collect(stream_with_retry(prov, REQUEST))) == "late"


async def test_cancellation_still_propagates_untranslated() -> None:
    prov = Scripted([("hang",)])
    task = asyncio.ensure_future(collect(stream_with_retry(prov, REQUEST, deadlines=FAST)))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert prov.calls == 1


# ---------------------------------------------------------------- empty answers (item 7)


@pytest.mark.parametrize(
    "attempt",
    [
        [Usage(input_tokens=4, output_tokens=0), Finish(reason="stop")],
        [Finish(reason="stop")],
        [TextDelta(text=" \n "), Finish(reason="stop")],
        [ThinkingDelta(text="I thought, but said nothing"), Finish(reason="length")],
    ],
    ids=["usage-only", "finish-only", "whitespace", "thinking-only"],
)
async def test_an_empty_answer_is_retried_and_then_reported(attempt: list[Step]) -> None:
    prov = Scripted(attempt)
    with pytest.raises(ProviderError) as info:
        await collect(stream_with_retry(prov, REQUEST, max_attempts=3, sleep=no_sleep))
    assert prov.calls == 3
    err = info.value
    assert err.retriable
    assert str(err).startswith("scripted: the model returned an empty response")
    assert str(err).endswith("(after 3 attempts)")


async def test_an_empty_answer_then_a_real_one() -> None:
    prov = Scripted([Usage(input_tokens=4, output_tokens=0), Finish(reason="stop")], answer())
    events = await collect(stream_with_retry(prov, REQUEST, sleep=no_sleep))
    assert prov.calls == 2
    assert texts(events) == "hello"
    assert events[-1] == Finish(reason="stop")


async def test_a_tool_call_alone_is_an_answer() -> None:
    prov = Scripted([ToolCallEvent(call=CALL), Finish(reason="tool_calls")])
    events = await collect(stream_with_retry(prov, REQUEST, sleep=no_sleep))
    assert prov.calls == 1
    assert events[-1] == Finish(reason="tool_calls")


# ---------------------------------------------------------------- partial output (item 2)


async def test_non_retriable_failure_after_output_carries_the_partial_output() -> None:
    bad = ProviderError("p: 127.0.0.1:9 returned malformed data: x", retriable=False)
    prov = Scripted(
        [ThinkingDelta(text="plan "), TextDelta(text="PARTIAL "), TextDelta(text="one "), bad]
    )
    received: list[StreamEvent] = []
    with pytest.raises(ProviderError) as info:
        async for event in stream_with_retry(prov, REQUEST, sleep=no_sleep):
            received.append(event)
    assert prov.calls == 1
    assert texts(received) == "PARTIAL one "
    assert info.value.partial == PartialOutput(text="PARTIAL one ", thinking="plan ")


async def test_exhausted_retries_carry_the_last_attempts_partial_output() -> None:
    def cut(text: str) -> list[Step]:
        return [
            TextDelta(text=text),
            ToolCallEvent(call=CALL),
            ProviderError("p: dropped", retriable=True),
        ]

    prov = Scripted(cut("first "), cut("second "))
    received: list[StreamEvent] = []
    with pytest.raises(ProviderError) as info:
        async for event in stream_with_retry(prov, REQUEST, max_attempts=2, sleep=no_sleep):
            received.append(event)
    # The consumer saw: first attempt's output, a restart, the second attempt's output.
    assert isinstance(received[2], StreamRestart)
    assert texts(received[3:]) == "second "
    assert info.value.partial == PartialOutput(text="second ", tool_calls=[CALL])
    assert str(info.value) == "p: dropped (after 2 attempts)"


async def test_failure_before_any_output_has_no_partial() -> None:
    prov = Scripted([ProviderError("p: 400 bad request", retriable=False, status=400)])
    with pytest.raises(ProviderError) as info:
        await collect(stream_with_retry(prov, REQUEST, sleep=no_sleep))
    assert info.value.partial is None


async def test_deadline_after_output_carries_the_partial_output() -> None:
    prov = Scripted([TextDelta(text="half an ans"), ("hang",)])
    with pytest.raises(ProviderError) as info:
        await collect(stream_with_retry(prov, REQUEST, max_attempts=1, deadlines=FAST))
    assert info.value.partial == PartialOutput(text="half an ans")


_OUTPUT = st.one_of(
    st.builds(TextDelta, text=st.text(max_size=5)),
    st.builds(ThinkingDelta, text=st.text(max_size=5)),
    st.builds(
        ToolCallEvent,
        call=st.builds(ToolCall, id=st.just("c"), name=st.just("f"), arguments=st.just("{}")),
    ),
    st.just(Usage(input_tokens=1, output_tokens=1)),
)
_ATTEMPT = st.tuples(st.lists(_OUTPUT, max_size=6), st.sampled_from(["ok", "retry", "fatal"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(_ATTEMPT, min_size=1, max_size=4))
def test_partial_is_what_the_consumer_saw_since_the_last_restart(
    attempts: list[tuple[list[StreamEvent], str]],
) -> None:
    script: list[list[Step]] = []
    for events, end in attempts:
        steps: list[Step] = list(events)
        if end == "ok":
            steps.append(Finish(reason="stop"))
        else:
            steps.append(ProviderError("p: broke", retriable=end == "retry"))
        script.append(steps)
    prov = Scripted(*script)

    async def consume() -> tuple[list[StreamEvent], ProviderError | None]:
        seen: list[StreamEvent] = []
        try:
            async for event in stream_with_retry(
                prov, REQUEST, max_attempts=len(script), sleep=no_sleep
            ):
                seen.append(event)
        except ProviderError as err:
            return seen, err
        return seen, None

    seen, err = asyncio.run(consume())
    restarts = [i for i, e in enumerate(seen) if isinstance(e, StreamRestart)]
    tail = seen[restarts[-1] + 1 :] if restarts else seen
    text = "".join(e.text for e in tail if isinstance(e, TextDelta))
    thinking = "".join(e.text for e in tail if isinstance(e, ThinkingDelta))
    calls = [e.call for e in tail if isinstance(e, ToolCallEvent)]
    if err is None:  # success: an answer, never an empty one
        assert tail[-1] == Finish(reason="stop")
        assert text.strip() or calls
        return
    expected = PartialOutput(text=text, thinking=thinking, tool_calls=calls)
    assert err.partial == (expected if (text or thinking or calls) else None)
    if "empty response" in str(err):
        assert not (text.strip() or calls)
