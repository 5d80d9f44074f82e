"""AnthropicProvider driven through the real `anthropic` SDK against a loopback server
speaking Messages SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from wire_loopback import (
    LoopbackServer,
    Reply,
    anthropic_block_start,
    anthropic_block_stop,
    anthropic_delta,
    anthropic_end,
    anthropic_error_body,
    anthropic_sse,
    anthropic_start,
    anthropic_text_events,
    json_reply,
)

from mindloop.providers.anthropic_provider import AnthropicProvider
from mindloop.providers.base import (
    AssistantMessage,
    Finish,
    GenerationRequest,
    ProviderError,
    StreamEvent,
    StreamRestart,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEvent,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from mindloop.providers.retry import stream_with_retry

API_KEY = "sk-ant-api03-0123456789abcdefSECRET"

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


async def no_sleep(_delay: float) -> None:
    return None


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


def provider(server: LoopbackServer, **kw: Any) -> AnthropicProvider:
    return AnthropicProvider("claude", server.url, API_KEY, **kw)


def request(**kw: Any) -> GenerationRequest:
    base: dict[str, Any] = {
        "model": "smart",
        "system": "You are terse.",
        "messages": [UserMessage(text="hello")],
    }
    base.update(kw)
    return GenerationRequest(**base)


def texts(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def text_reply(pieces: list[str]) -> Reply:
    return Reply(chunks=anthropic_sse(anthropic_text_events(pieces)))


async def test_streamed_text_usage_and_payload() -> None:
    with LoopbackServer([text_reply(["Hel", "lo ", "there"])]) as srv:
        prov = provider(srv, model_name_map={"smart": "claude-served"})
        events = await collect(prov.stream(request()))
        await prov.aclose()
    assert [type(e) for e in events] == [TextDelta] * 3 + [Usage, Finish]
    assert texts(events) == "Hello there"
    assert events[-2] == Usage(input_tokens=11, output_tokens=5)
    assert events[-1] == Finish(reason="stop")
    sent = srv.requests[0]
    assert sent.path == "/v1/messages"
    # the SDK version decides between `x-api-key` and a bearer token
    assert API_KEY in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "")[7:])
    body = sent.body
    assert body["model"] == "claude-served"
    assert body["stream"] is True
    assert body["system"] == "You are terse."
    assert body["max_tokens"] == 4096  # required by the API: the default when unset
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert "tools" not in body and "tool_choice" not in body


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"max_tokens": 100}, 100),
        ({"general": {"max_tokens": 200}}, 200),
        ({"max_tokens": 100, "anthropic": {"max_tokens": 300}}, 300),
    ],
)
async def test_max_tokens_sources(params: dict[str, Any], expected: int) -> None:
    with LoopbackServer([text_reply(["ok"])]) as srv:
        prov = provider(srv)
        await collect(prov.stream(request(params=params)))
        await prov.aclose()
    assert srv.requests[0].body["max_tokens"] == expected


async def test_no_tools_strips_tool_choice_from_the_namespace() -> None:
    params = {"anthropic": {"tool_choice": {"type": "auto"}, "top_k": 5}}
    with LoopbackServer([text_reply(["ok"])]) as srv:
        prov = provider(srv)
        await collect(prov.stream(request(params=params)))
        await prov.aclose()
    body = srv.requests[0].body
    assert "tools" not in body and "tool_choice" not in body
    assert body["top_k"] == 5


async def test_tools_and_tool_history_are_translated() -> None:
    history = [
        UserMessage(text="read two files"),
        AssistantMessage(
            text="Reading both.",
            tool_calls=[
                ToolCall(id="toolu_1", name="read_file", arguments='{"path": "a"}'),
                ToolCall(id="toolu_2", name="read_file", arguments="not json"),
            ],
        ),
        ToolResultMessage(call_id="toolu_1", name="read_file", content="AAA"),
        ToolResultMessage(call_id="toolu_2", name="read_file", content="bad args", is_error=True),
    ]
    params = {"anthropic": {"tool_choice": {"type": "auto"}}}
    with LoopbackServer([text_reply(["done"])]) as srv:
        prov = provider(srv)
        await collect(prov.stream(request(messages=history, tools=[READ_FILE], params=params)))
        await prov.aclose()
    body = srv.requests[0].body
    assert body["tools"] == [
        {"name": "read_file", "description": "Read a file", "input_schema": READ_FILE.parameters}
    ]
    assert body["tool_choice"] == {"type": "auto"}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read two files"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "read_file",
                    "input": {"raw_arguments": "not json"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "AAA"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "bad args",
                    "is_error": True,
                },
            ],
        },
    ]


async def test_thinking_and_tool_use_with_split_json() -> None:
    events_out = [
        anthropic_start(30),
        anthropic_block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        anthropic_delta(0, {"type": "thinking_delta", "thinking": "need the "}),
        anthropic_delta(0, {"type": "thinking_delta", "thinking": "file"}),
        anthropic_delta(0, {"type": "signature_delta", "signature": "sig"}),
        anthropic_block_stop(0),
        anthropic_block_start(1, {"type": "text", "text": ""}),
        anthropic_delta(1, {"type": "text_delta", "text": "Reading."}),
        anthropic_block_stop(1),
        anthropic_block_start(
            2, {"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {}}
        ),
        anthropic_delta(2, {"type": "input_json_delta", "partial_json": ""}),
        anthropic_delta(2, {"type": "input_json_delta", "partial_json": '{"pa'}),
        anthropic_delta(2, {"type": "input_json_delta", "partial_json": 'th": "REA'}),
        anthropic_delta(2, {"type": "input_json_delta", "partial_json": 'DME.md"}'}),
        anthropic_block_stop(2),
        *anthropic_end("tool_use", 42),
    ]
    with LoopbackServer([Reply(chunks=anthropic_sse(events_out))]) as srv:
        prov = provider(srv)
        events = await collect(prov.stream(request(tools=[READ_FILE])))
        await prov.aclose()
    assert events == [
        ThinkingDelta(text="need the "),
        ThinkingDelta(text="file"),
        TextDelta(text="Reading."),
        # The call's progress as it streams (the empty fragment adds nothing), then the call.
        ToolCallDelta(index=2, name="read_file"),
        ToolCallDelta(index=2, arguments='{"pa'),
        ToolCallDelta(index=2, arguments='th": "REA'),
        ToolCallDelta(index=2, arguments='DME.md"}'),
        ToolCallEvent(
            call=ToolCall(id="toolu_9", name="read_file", arguments='{"path": "README.md"}')
        ),
        Usage(input_tokens=30, output_tokens=42),
        Finish(reason="tool_calls"),
    ]


async def test_max_tokens_stop_reason_maps_to_length() -> None:
    events_out = anthropic_text_events(["cut"])[:-2] + anthropic_end("max_tokens", 9)
    with LoopbackServer([Reply(chunks=anthropic_sse(events_out))]) as srv:
        prov = provider(srv)
        events = await collect(prov.stream(request()))
        await prov.aclose()
    assert events[-1] == Finish(reason="length")


async def test_429_then_success_is_retried() -> None:
    replies = [
        json_reply(429, anthropic_error_body("Number of requests exceeded", "rate_limit_error")),
        text_reply(["fine"]),
    ]
    with LoopbackServer(replies) as srv:
        prov = provider(srv)
        events = await collect(stream_with_retry(prov, request(), sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 2
    assert texts(events) == "fine"
    assert not any(isinstance(e, StreamRestart) for e in events)


async def test_overloaded_529_forever_gives_up_after_max_attempts() -> None:
    reply = json_reply(529, anthropic_error_body("Overloaded", "overloaded_error"))
    with LoopbackServer([reply]) as srv:
        prov = provider(srv)
        with pytest.raises(ProviderError) as info:
            await collect(stream_with_retry(prov, request(), max_attempts=3, sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 3
    assert info.value.retriable and info.value.status == 529
    assert str(info.value) == "claude: 529 Overloaded (after 3 attempts)"


async def test_500_forever_gives_up_after_max_attempts() -> None:
    reply = json_reply(500, anthropic_error_body("Internal server error", "api_error"))
    with LoopbackServer([reply]) as srv:
        prov = provider(srv)
        with pytest.raises(ProviderError) as info:
            await collect(stream_with_retry(prov, request(), max_attempts=5, sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 5
    assert info.value.status == 500 and "(after 5 attempts)" in str(info.value)


async def test_401_surfaces_at_once_without_the_key() -> None:
    body = anthropic_error_body(f"invalid x-api-key {API_KEY}", "authentication_error")
    with LoopbackServer([json_reply(401, body)]) as srv:
        prov = provider(srv)
        with pytest.raises(ProviderError) as info:
            await collect(stream_with_retry(prov, request(), sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 1
    err = info.value
    assert not err.retriable and err.status == 401
    assert str(err).startswith("claude: 401 invalid x-api-key")
    assert API_KEY not in str(err) and API_KEY[:12] not in str(err)


async def test_dropped_stream_restarts_then_succeeds() -> None:
    partial = anthropic_sse(anthropic_text_events(["Hal", "lo"])[:4])  # start, ping, block, "Hal"
    replies = [Reply(chunks=partial, drop=True), text_reply(["Hello"])]
    with LoopbackServer(replies) as srv:
        prov = provider(srv)
        events = await collect(stream_with_retry(prov, request(), sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 2
    assert events[0] == TextDelta(text="Hal")
    restart = events[1]
    assert isinstance(restart, StreamRestart) and restart.attempt == 2
    assert "dropped" in restart.reason
    assert texts(events[2:]) == "Hello"
    assert events[-1] == Finish(reason="stop")


async def test_overloaded_error_event_inside_the_stream_is_retried() -> None:
    overloaded = anthropic_error_body("Overloaded", "overloaded_error")
    broken = [*anthropic_text_events(["par"])[:4], overloaded]
    replies = [Reply(chunks=anthropic_sse(broken)), text_reply(["whole"])]
    with LoopbackServer(replies) as srv:
        prov = provider(srv)
        events = await collect(stream_with_retry(prov, request(), sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 2
    assert isinstance(events[1], StreamRestart)
    assert "overloaded_error" in events[1].reason
    assert texts(events[2:]) == "whole"


@pytest.mark.parametrize(
    "reply",
    [
        Reply(chunks=[b"event: message_start\ndata: {oops\n\n"]),
        Reply(chunks=[b"<html>hello</html>"], content_type="text/html"),
        Reply(chunks=anthropic_sse([anthropic_delta(0, {"type": "text_delta", "text": "x"})])),
    ],
    ids=["non-json-event", "not-sse", "no-message-start"],
)
async def test_malformed_body_is_not_retried(reply: Reply) -> None:
    with LoopbackServer([reply]) as srv:
        prov = provider(srv)
        with pytest.raises(ProviderError) as info:
            await collect(stream_with_retry(prov, request(), sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 1
    assert not info.value.retriable
    assert f"claude: {srv.url[7:]} returned malformed data" in str(info.value)


async def test_timeout_is_retriable() -> None:
    with LoopbackServer([Reply(hold=True)]) as srv:
        prov = provider(srv, timeout=0.3)
        with pytest.raises(ProviderError) as info:
            await collect(prov.stream(request()))
        await prov.aclose()
    assert info.value.retriable
    assert "timed out" in str(info.value)
