"""Adapter for OpenAI and every server speaking the Chat Completions protocol.

vLLM, llama.cpp, Ollama, DeepSeek and OpenAI itself all take the same streamed Chat
Completions request, so one adapter built on the official `openai` SDK covers them. The
SDK's own retries are off (`max_retries=0`): `retry.stream_with_retry` is the single retry
policy. Translation both ways is kept in small pure functions so the request payload can
be checked without a network.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2
import openai

from mindloop.providers import wire_errors
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    Finish,
    GenerationRequest,
    ProviderError,
    StreamEvent,
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

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Sent when llm.yaml names no key (local servers ignore it); keeps the SDK from reading
# OPENAI_API_KEY behind the config's back.
NO_KEY_PLACEHOLDER = "no-key"

FINISH_REASONS: dict[str, str] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "error",
}

# Keys the adapter owns; a namespace param may not override them.
RESERVED_KEYS: frozenset[str] = frozenset({"model", "messages", "stream", "stream_options"})
# Keys that only make sense with tools; never sent when the request offers none (a
# tool-less FBR drive must not even mention tools).
TOOL_KEYS: frozenset[str] = frozenset({"tools", "tool_choice", "parallel_tool_calls"})
# Delta fields in which servers stream reasoning ("thinking") text.
REASONING_FIELDS: tuple[str, ...] = ("reasoning_content", "reasoning")


# ---------------------------------------------------------------- request translation


def to_openai_messages(system: str, messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Provider-neutral history → Chat Completions `messages`."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for msg in messages:
        if isinstance(msg, UserMessage):
            out.append({"role": "user", "content": msg.text})
        elif isinstance(msg, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": msg.text}
            if msg.tool_calls:
                entry["content"] = msg.text or None
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments or "{}"},
                    }
                    for call in msg.tool_calls
                ]
            out.append(entry)
        elif isinstance(msg, ToolResultMessage):
            out.append({"role": "tool", "tool_call_id": msg.call_id, "content": msg.content})
    return out


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def body_params(params: dict[str, Any], *, has_tools: bool) -> dict[str, Any]:
    """Merged model params → extra request-body keys. `max_tokens` (top level or
    `general`) becomes `max_tokens`; other `general` keys and then the `openai` namespace
    pass through, the namespace winning."""
    general = params.get("general") or {}
    namespace = params.get("openai") or {}
    body: dict[str, Any] = {k: v for k, v in general.items() if k != "max_tokens"}
    max_tokens = params.get("max_tokens", general.get("max_tokens"))
    if max_tokens is not None and "max_completion_tokens" not in namespace:
        body["max_tokens"] = max_tokens
    body.update(namespace)
    for key in RESERVED_KEYS | {"tools"}:
        body.pop(key, None)
    if not has_tools:
        for key in TOOL_KEYS:
            body.pop(key, None)
    return body


# ---------------------------------------------------------------- stream translation


@dataclass
class _PartialCall:
    id: str
    name: str
    arguments: str


class _ToolCallAssembler:
    """Collects tool-call fragments keyed by their `index` until the call is complete."""

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, fragment: Any) -> ToolCallDelta:
        """Take one fragment; returns it as a `ToolCallDelta` (the call's progress)."""
        index = getattr(fragment, "index", None)
        call_id = getattr(fragment, "id", None)
        if index is None:  # some servers omit it: match by id, else a new call
            index = next(
                (i for i, c in self._calls.items() if call_id and c.id == call_id),
                len(self._calls),
            )
        part = self._calls.setdefault(index, _PartialCall(id="", name="", arguments=""))
        if call_id:
            part.id = call_id
        progress = ToolCallDelta(index=index)
        function = getattr(fragment, "function", None)
        if function is not None:
            name = getattr(function, "name", None)
            if name:
                part.name = progress.name = name
            arguments = getattr(function, "arguments", None)
            if arguments:
                part.arguments += arguments
                progress.arguments = arguments
        return progress

    def take(self) -> list[_PartialCall]:
        calls = [self._calls[i] for i in sorted(self._calls)]
        self._calls.clear()
        return calls


class OpenAICompatProvider:
    """A provider speaking streamed Chat Completions through `openai.AsyncOpenAI`."""

    def __init__(
        self,
        name: str,
        base_url: str | None,
        api_key: str | None,
        model_name_map: dict[str, str] | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.name = name
        self._secret = api_key
        self.model_name_map = dict(model_name_map or {})
        self._client = openai.AsyncOpenAI(
            api_key=api_key or NO_KEY_PLACEHOLDER,
            base_url=base_url or DEFAULT_BASE_URL,
            timeout=timeout,
            max_retries=0,
        )
        self.base_url = str(self._client.base_url)
        self.host = wire_errors.host_of(self.base_url)

    def request_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The keyword arguments for `chat.completions.create` (minus `stream`)."""
        kwargs: dict[str, Any] = {
            "model": self.model_name_map.get(request.model, request.model),
            "messages": to_openai_messages(request.system, request.messages),
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            kwargs["tools"] = to_openai_tools(request.tools)
        extra = body_params(request.params, has_tools=bool(request.tools))
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        """Stream one generation; see the module docstring for the error mapping."""
        try:
            sdk_stream = await self._client.chat.completions.create(
                stream=True, **self.request_body(request)
            )
        except Exception as exc:
            raise self._map_error(exc) from None
        try:
            async for event in self._translate(sdk_stream):
                yield event
        finally:
            # Closing a connection that already broke may raise again; the error that
            # ended the stream is the one worth reporting.
            with contextlib.suppress(Exception):
                await sdk_stream.close()

    async def _translate(self, sdk_stream: Any) -> AsyncIterator[StreamEvent]:
        calls = _ToolCallAssembler()
        emitted_calls = 0
        finish: str | None = None
        usage: Usage | None = None
        chunks = 0
        iterator = sdk_stream.__aiter__()
        while True:
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                break
            except Exception as exc:
                raise self._map_error(exc) from None
            chunks += 1
            choices = getattr(chunk, "choices", None)
            if not isinstance(choices, list):
                raise wire_errors.malformed(
                    self.name,
                    self.host,
                    "a stream chunk has no `choices` list",
                    secret=self._secret,
                )
            raw_usage = getattr(chunk, "usage", None)
            if raw_usage is not None:
                usage = Usage(
                    input_tokens=getattr(raw_usage, "prompt_tokens", 0) or 0,
                    output_tokens=getattr(raw_usage, "completion_tokens", 0) or 0,
                )
            for choice in choices:
                delta = getattr(choice, "delta", None)
                if delta is not None:
                    for field in REASONING_FIELDS:
                        thought = getattr(delta, field, None)
                        if isinstance(thought, str) and thought:
                            yield ThinkingDelta(text=thought)
                    text = getattr(delta, "content", None)
                    if isinstance(text, str) and text:
                        yield TextDelta(text=text)
                    for fragment in getattr(delta, "tool_calls", None) or []:
                        yield calls.add(fragment)
                reason = getattr(choice, "finish_reason", None)
                if reason:
                    finish = reason
                    for event in self._complete_calls(calls):
                        emitted_calls += 1
                        yield event
        if chunks == 0:
            raise wire_errors.malformed(
                self.name, self.host, "the response held no stream events", secret=self._secret
            )
        if finish is None:
            raise wire_errors.dropped_stream(self.name, self.host, "no finish_reason was received")
        for event in self._complete_calls(calls):
            emitted_calls += 1
            yield event
        if usage is not None:
            yield usage
        reason = FINISH_REASONS.get(finish, "stop")
        if emitted_calls and reason == "stop":
            reason = "tool_calls"  # some servers report "stop" after tool calls
        yield Finish(reason=reason)

    def _complete_calls(self, calls: _ToolCallAssembler) -> list[ToolCallEvent]:
        events = []
        for part in calls.take():
            if not part.name:
                raise wire_errors.malformed(
                    self.name,
                    self.host,
                    "a streamed tool call has no function name",
                    secret=self._secret,
                )
            call_id = part.id or f"call_{uuid.uuid4().hex[:12]}"
            events.append(
                ToolCallEvent(
                    call=ToolCall(id=call_id, name=part.name, arguments=part.arguments or "{}")
                )
            )
        return events

    def _map_error(self, exc: Exception) -> ProviderError:
        """SDK / transport exception → ProviderError (never chained: SDK exceptions carry
        the request, and their text may echo the key)."""
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, openai.APIStatusError):
            text = wire_errors.redact(getattr(exc.response, "text", "") or "", self._secret)
            return wire_errors.status_error(
                self.name,
                exc.status_code,
                exc.body,
                secret=self._secret,
                fallback=text,
                headers=exc.response.headers,
            )
        if isinstance(exc, openai.APITimeoutError):
            return wire_errors.transport_error(self.name, self.host, "request timed out", exc)
        if isinstance(exc, openai.APIConnectionError):
            return wire_errors.connection_error(self.name, self.host, exc, self.base_url)
        if isinstance(exc, openai.APIError):  # an error object inside a 200 stream
            return wire_errors.stream_error(self.name, {"error": exc.body}, secret=self._secret)
        if isinstance(exc, httpx2.TimeoutException):
            return wire_errors.transport_error(self.name, self.host, "request timed out", exc)
        if isinstance(exc, httpx2.TransportError):
            return wire_errors.dropped_stream(self.name, self.host, type(exc).__name__)
        if isinstance(exc, json.JSONDecodeError):
            return wire_errors.malformed(
                self.name, self.host, "a stream event is not valid JSON", secret=self._secret
            )
        if isinstance(exc, ValueError | TypeError | KeyError | AttributeError):
            detail = f"unexpected response shape ({type(exc).__name__})"
            return wire_errors.malformed(self.name, self.host, detail, secret=self._secret)
        raise exc

    async def aclose(self) -> None:
        await self._client.close()
