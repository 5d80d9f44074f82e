"""OpenAICompatProvider driven through the real `openai` SDK against a loopback server
speaking Chat Completions SSE."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from wire_loopback import (
    LoopbackServer,
    Reply,
    error_body,
    json_reply,
    openai_chunk,
    openai_sse,
    openai_text_stream,
    openai_usage_chunk,
)

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
from mindloop.providers.openai_compat import OpenAICompatProvider
from mindloop.providers.retry import stream_with_retry

API_KEY = "sk-test-0123456789abcdefSECRET"

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


async def no_sleep(_delay: float) -> None:
    return None


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


def provider(server: LoopbackServer, **kw: Any) -> OpenAICompatProvider:
    return OpenAICompatProvider("openai", server.url + "/v1", API_KEY, **kw)


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


async def test_streamed_text_usage_and_payload() -> None:
    with LoopbackServer([Reply(chunks=openai_text_stream(["Hel", "lo ", "there"]))]) as srv:
        prov = provider(srv, model_name_map={"smart": "gpt-served"})
        events = await collect(prov.stream(request(params={"max_tokens": 64})))
        await prov.aclose()
    assert [type(e) for e in events] == [TextDelta] * 3 + [Usage, Finish]
    assert texts(events) == "Hello there"
    assert events[-2] == Usage(input_tokens=7, output_tokens=3)
    assert events[-1] == Finish(reason="stop")
    sent = srv.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    body = sent.body
    assert body["model"] == "gpt-served"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 64
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hello"},
    ]
    for key in ("tools", "tool_choice", "parallel_tool_calls"):
        assert key not in body


async def test_no_tools_strips_tool_keys_even_from_the_namespace() -> None:
    params = {
        "general": {"max_tokens": 99, "temperature": 0.2},
        "openai": {"tool_choice": "auto", "parallel_tool_calls": True, "top_p": 0.5},
    }
    with LoopbackServer([Reply(chunks=openai_text_stream(["ok"]))]) as srv:
        prov = provider(srv)
        await collect(prov.stream(request(params=params)))
        await prov.aclose()
    body = srv.requests[0].body
    for key in ("tools", "tool_choice", "parallel_tool_calls"):
        assert key not in body
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (99, 0.2, 0.5)


async def test_tools_and_tool_history_are_translated() -> None:
    history = [
        UserMessage(text="read two files"),
        AssistantMessage(
            text="",
            tool_calls=[
                ToolCall(id="c1", name="read_file", arguments='{"path": "a"}'),
                ToolCall(id="c2", name="read_file", arguments='{"path": "b"}'),
            ],
        ),
        ToolResultMessage(call_id="c1", name="read_file", content="AAA"),
        ToolResultMessage(call_id="c2", name="read_file", content="no such file", is_error=True),
    ]
    params = {"openai": {"tool_choice": "auto", "model": "ignored", "stream": False}}
    with LoopbackServer([Reply(chunks=openai_text_stream(["done"]))]) as srv:
        prov = provider(srv)
        await collect(prov.stream(request(messages=history, tools=[READ_FILE], params=params)))
        await prov.aclose()
    body = srv.requests[0].body
    assert body["model"] == "smart" and body["stream"] is True
    assert body["tool_choice"] == "auto"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": READ_FILE.parameters,
            },
        }
    ]
    assert body["messages"][1:] == [
        {"role": "user", "content": "read two files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "b"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "AAA"},
        {"role": "tool", "tool_call_id": "c2", "content": "no such file"},
    ]


def _call_start(index: int, call_id: str, name: str) -> dict[str, Any]:
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }


def _call_args(index: int, piece: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": piece}}


async def test_two_parallel_calls_with_split_arguments() -> None:
    chunks = [
        openai_chunk({"role": "assistant", "content": None}),
        openai_chunk({"tool_calls": [_call_start(0, "call_a", "read_file")]}),
        openai_chunk({"tool_calls": [_call_args(0, '{"pa')]}),
        openai_chunk({"tool_calls": [_call_start(1, "call_b", "list_dir")]}),
        openai_chunk({"tool_calls": [_call_args(1, '{"path"')]}),
        openai_chunk({"tool_calls": [_call_args(0, 'th": "REA')]}),
        openai_chunk({"tool_calls": [_call_args(1, ': "."}')]}),
        openai_chunk({"tool_calls": [_call_args(0, 'DME.md"}')]}),
        openai_chunk({}, "tool_calls"),
        openai_usage_chunk(20, 12),
    ]
    with LoopbackServer([Reply(chunks=openai_sse(chunks))]) as srv:
        prov = provider(srv)
        events = await collect(prov.stream(request(tools=[READ_FILE])))
        await prov.aclose()
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCall(id="call_a", name="read_file", arguments='{"path": "README.md"}'),
        ToolCall(id="call_b", name="list_dir", arguments='{"path": "."}'),
    ]
    assert json.loads(calls[0].arguments) == {"path": "README.md"}
    progress = [(e.index, e.name, e.arguments) for e in events if isinstance(e, ToolCallDelta)]
    assert progress == [
        (0, "read_file", ""),
        (0, "", '{"pa'),
        (1, "list_dir", ""),
        (1, "", '{"path"'),
        (0, "", 'th": "REA'),
        (1, "", ': "."}'),
        (0, "", 'DME.md"}'),
    ]
    assert Usage(input_tokens=20, output_tokens=12) in events
    assert events[-1] == Finish(reason="tool_calls")


async def test_reasoning_content_becomes_thinking() -> None:
    chunks = [
        openai_chunk({"role": "assistant", "reasoning_content": "let me "}),
        openai_chunk({"reasoning_content": "think"}),
        openai_chunk({"content": "42"}),
        openai_chunk({}, "length"),
    ]
    with LoopbackServer([Reply(chunks=openai_sse(chunks))]) as srv:
        prov = provider(srv)
        events = await collect(prov.stream(request()))
        await prov.aclose()
    assert events == [
        ThinkingDelta(text="let me "),
        ThinkingDelta(text="think"),
        TextDelta(text="42"),
        Finish(reason="length"),
    ]


async def test_429_then_success_is_retried() -> None:
    replies = [
        json_reply(429, error_body("Rate limit reached", "rate_limit_exceeded")),
        Reply(chunks=openai_text_stream(["fine"])),
    ]
    retries: list[tuple[int, int | None]] = []
    with LoopbackServer(replies) as srv:
        prov = provider(srv)
        events = await collect(
            stream_with_retry(
                prov,
                request(),
                sleep=no_sleep,
                on_retry=lambda n, err, _d: retries.append((n, err.status)),
            )
        )
        await prov.aclose()
    assert srv.hits == 2
    assert retries == [(2, 429)]
    assert texts(events) == "fine"
    assert not any(isinstance(e, StreamRestart) for e in events)


async def test_500_forever_gives_up_after_max_attempts() -> None:
    with LoopbackServer(
        [json_reply(500, error_body("The server had an error", "server_error"))]
    ) as srv:
        prov = provider(srv)
        with pytest.raises(ProviderError) as info:
            await collect(stream_with_retry(prov, request(), max_attempts=4, sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 4
    err = info.value
    assert err.retriable and err.status == 500
    assert str(err) == "openai: 500 The server had an error (after 4 attempts)"


async def test_401_surfaces_at_once_without_the_key() -> None:
    message = f"Incorrect API key provided: {API_KEY}. You can find your API key at ..."
    with LoopbackServer([json_reply(401, error_body(message))]) as srv:
        prov = provider(srv)
        with pytest.raises(ProviderError) as info:
            await collect(stream_with_retry(prov, request(), sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 1
    err = info.value
    assert not err.retriable and err.status == 401
    assert str(err).startswith("openai: 401 Incorrect API key provided")
    assert API_KEY not in str(err) and API_KEY[:12] not in str(err)
    assert err.__cause__ is None and err.__suppress_context__


async def test_dropped_stream_restarts_then_succeeds() -> None:
    partial = openai_sse(
        [openai_chunk({"role": "assistant", "content": ""}), openai_chunk({"content": "Hal"})],
        done=False,
    )
    replies = [Reply(chunks=partial, drop=True), Reply(chunks=openai_text_stream(["Hello"]))]
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


async def test_stream_without_finish_reason_counts_as_dropped() -> None:
    cut = openai_sse([openai_chunk({"content": "half"})])  # clean end, no finish_reason
    with LoopbackServer([Reply(chunks=cut)]) as srv:
        prov = provider(srv)
        with pytest.raises(ProviderError) as info:
            await collect(prov.stream(request()))
        await prov.aclose()
    assert info.value.retriable
    assert "no finish_reason" in str(info.value)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(chunks=[b"data: {not json at all\n\n"]),
        Reply(chunks=openai_sse([{"id": "x", "object": "chat.completion.chunk"}])),
        Reply(chunks=[b"<html>hello</html>"], content_type="text/html"),
    ],
    ids=["non-json-event", "missing-choices", "not-sse"],
)
async def test_malformed_body_is_not_retried(reply: Reply) -> None:
    with LoopbackServer([reply]) as srv:
        prov = provider(srv)
        with pytest.raises(ProviderError) as info:
            await collect(stream_with_retry(prov, request(), sleep=no_sleep))
        await prov.aclose()
    assert srv.hits == 1
    assert not info.value.retriable
    assert f"openai: {srv.url[7:]} returned malformed data" in str(info.value)


async def test_error_object_inside_the_stream_is_retriable_when_transient() -> None:
    body = openai_sse([{"error": {"message": "upstream overloaded", "type": "server_error"}}])
    with LoopbackServer([Reply(chunks=body)]) as srv:
        prov = provider(srv)
        with pytest.raises(ProviderError) as info:
            await collect(prov.stream(request()))
        await prov.aclose()
    assert info.value.retriable
    assert "upstream overloaded" in str(info.value)


async def test_timeout_is_retriable() -> None:
    with LoopbackServer([Reply(hold=True)]) as srv:
        prov = provider(srv, timeout=0.3)
        with pytest.raises(ProviderError) as info:
            await collect(prov.stream(request()))
        await prov.aclose()
    assert info.value.retriable
    assert "timed out" in str(info.value)


async def test_refused_connection_is_retriable() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    prov = OpenAICompatProvider("local", f"http://127.0.0.1:{port}/v1", None)
    with pytest.raises(ProviderError) as info:
        await collect(prov.stream(request()))
    await prov.aclose()
    assert info.value.retriable
    assert str(info.value).startswith("local: connection failed")
