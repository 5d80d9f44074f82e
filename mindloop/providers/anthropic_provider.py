"""Adapter for Anthropic's Messages API through the official `anthropic` SDK.

Messages differ from Chat Completions in ways the engine should never see: the system
prompt is a parameter, tool results are `tool_result` blocks inside a user turn, calls are
`tool_use` blocks with a parsed `input` object, `max_tokens` is mandatory, and the stream
is a sequence of typed content-block events. This module translates both ways. The SDK's
own retries are off (`max_retries=0`); `retry.stream_with_retry` is the retry policy.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2

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

DEFAULT_MAX_TOKENS = 4096
# Sent when llm.yaml names no key (an Anthropic-compatible proxy that needs none).
NO_KEY_PLACEHOLDER = "no-key"

STOP_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "error",
}

# Keys the adapter owns; a namespace param may not override them.
RESERVED_KEYS: frozenset[str] = frozenset({"model", "messages", "system", "stream", "max_tokens"})
# Never sent when the request offers no tools (a tool-less FBR drive).
TOOL_KEYS: frozenset[str] = frozenset({"tools", "tool_choice"})
# When a stored call's arguments are not a JSON object, they are still sent (the API
# requires an object) under this key, so the model can see what it produced.
RAW_ARGUMENTS_KEY = "raw_arguments"


# ---------------------------------------------------------------- request translation


def _call_input(arguments: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return {RAW_ARGUMENTS_KEY: arguments}
    return parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: arguments}


def _blocks(msg: ChatMessage) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(msg, UserMessage):
        return "user", ([{"type": "text", "text": msg.text}] if msg.text else [])
    if isinstance(msg, ToolResultMessage):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": msg.call_id,
            "content": msg.content,
        }
        if msg.is_error:
            block["is_error"] = True
        return "user", [block]
    assert isinstance(msg, AssistantMessage)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": msg.text}] if msg.text else []
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _call_input(c.arguments)}
        for c in msg.tool_calls
    ]
    return "assistant", blocks


def to_anthropic_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Provider-neutral history → Messages `messages`. Consecutive messages of one role
    (notably the results of parallel tool calls) merge into one turn, as the API wants
    results for all `tool_use` blocks of a turn in the next user turn. Empty text blocks,
    which the API rejects, are dropped."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        role, blocks = _blocks(msg)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def max_tokens_of(params: dict[str, Any]) -> int:
    """Anthropic requires `max_tokens`: the `anthropic` namespace, else the top level or
    `general`, else `DEFAULT_MAX_TOKENS`."""
    namespace = params.get("anthropic") or {}
    general = params.get("general") or {}
    for value in (
        namespace.get("max_tokens"),
        params.get("max_tokens"),
        general.get("max_tokens"),
    ):
        if value is not None:
            return int(value)
    return DEFAULT_MAX_TOKENS


def body_params(params: dict[str, Any], *, has_tools: bool) -> dict[str, Any]:
    """Other `general` keys, then the `anthropic` namespace (winning), as body keys."""
    general = params.get("general") or {}
    body: dict[str, Any] = {k: v for k, v in general.items() if k != "max_tokens"}
    body.update(params.get("anthropic") or {})
    for key in RESERVED_KEYS:
        body.pop(key, None)
    if not has_tools:
        for key in TOOL_KEYS:
            body.pop(key, None)
    return body


# ---------------------------------------------------------------- stream translation


def _get(obj: Any, key: str) -> Any:
    """Attribute or mapping access: the SDK builds typed models, but unknown shapes may
    come through as plain dicts."""
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


@dataclass
class _StreamState:
    tool_blocks: dict[int, ToolCall] = field(default_factory=dict)
    tool_json: dict[int, list[str]] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    started: bool = False
    stopped: bool = False
    emitted_calls: int = 0


class AnthropicProvider:
    """A provider speaking streamed Messages through `anthropic.AsyncAnthropic`."""

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
        # An explicit key stops the SDK from reading credentials from the environment or
        # profile files: keys come only from the variable llm.yaml names.
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key or NO_KEY_PLACEHOLDER,
            base_url=base_url or None,
            timeout=timeout,
            max_retries=0,
        )
        self.base_url = str(self._client.base_url)
        self.host = wire_errors.host_of(self.base_url)

    def request_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The keyword arguments for `messages.create` (minus `stream`)."""
        kwargs: dict[str, Any] = {
            "model": self.model_name_map.get(request.model, request.model),
            "max_tokens": max_tokens_of(request.params),
            "messages": to_anthropic_messages(request.messages),
        }
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = to_anthropic_tools(request.tools)
        extra = body_params(request.params, has_tools=bool(request.tools))
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        try:
            sdk_stream = await self._client.messages.create(
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
        state = _StreamState()
        iterator = sdk_stream.__aiter__()
        while not state.stopped:
            try:
                event = await iterator.__anext__()
            except StopAsyncIteration:
                break
            except Exception as exc:
                raise self._map_error(exc) from None
            for out in self._on_event(event, state):
                yield out
        if not state.started:
            raise wire_errors.malformed(
                self.name, self.host, "the stream held no message_start event", secret=self._secret
            )
        if not state.stopped:
            raise wire_errors.dropped_stream(self.name, self.host, "no message_stop was received")
        yield Usage(input_tokens=state.input_tokens, output_tokens=state.output_tokens)
        reason = STOP_REASONS.get(state.stop_reason or "", "stop")
        if state.emitted_calls and reason == "stop":
            reason = "tool_calls"
        yield Finish(reason=reason)

    def _on_event(self, event: Any, state: _StreamState) -> list[StreamEvent]:
        kind = _get(event, "type")
        if kind == "message_start":
            state.started = True
            usage = _get(_get(event, "message"), "usage")
            state.input_tokens = sum(
                _int(_get(usage, key))
                for key in (
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                )
            )
            state.output_tokens = _int(_get(usage, "output_tokens"))
            return []
        if not state.started:
            raise wire_errors.malformed(
                self.name, self.host, f"event {kind!r} before message_start", secret=self._secret
            )
        if kind == "content_block_start":
            block = _get(event, "content_block")
            index = _int(_get(event, "index"))
            if _get(block, "type") == "tool_use":
                name = _get(block, "name")
                if not name:
                    raise wire_errors.malformed(
                        self.name, self.host, "a tool_use block has no name", secret=self._secret
                    )
                state.tool_blocks[index] = ToolCall(id=_get(block, "id") or "", name=name)
                state.tool_json[index] = []
                return [ToolCallDelta(index=index, name=name)]
            return []
        if kind == "content_block_delta":
            return self._on_delta(event, state)
        if kind == "content_block_stop":
            index = _int(_get(event, "index"))
            call = state.tool_blocks.pop(index, None)
            if call is None:
                return []
            arguments = "".join(state.tool_json.pop(index, [])) or "{}"
            state.emitted_calls += 1
            return [ToolCallEvent(call=call.model_copy(update={"arguments": arguments}))]
        if kind == "message_delta":
            reason = _get(_get(event, "delta"), "stop_reason")
            if reason:
                state.stop_reason = reason
            usage = _get(event, "usage")
            if _get(usage, "output_tokens") is not None:
                state.output_tokens = _int(_get(usage, "output_tokens"))
            if _get(usage, "input_tokens") is not None:
                state.input_tokens = sum(
                    _int(_get(usage, key))
                    for key in (
                        "input_tokens",
                        "cache_creation_input_tokens",
                        "cache_read_input_tokens",
                    )
                )
            return []
        if kind == "message_stop":
            state.stopped = True
        return []

    def _on_delta(self, event: Any, state: _StreamState) -> list[StreamEvent]:
        delta = _get(event, "delta")
        kind = _get(delta, "type")
        if kind == "text_delta":
            text = _get(delta, "text")
            return [TextDelta(text=text)] if text else []
        if kind == "thinking_delta":
            thinking = _get(delta, "thinking")
            return [ThinkingDelta(text=thinking)] if thinking else []
        if kind == "input_json_delta":
            index = _int(_get(event, "index"))
            if index not in state.tool_json:
                raise wire_errors.malformed(
                    self.name,
                    self.host,
                    "input_json_delta outside a tool_use block",
                    secret=self._secret,
                )
            piece = _get(delta, "partial_json") or ""
            state.tool_json[index].append(piece)
            return [ToolCallDelta(index=index, arguments=piece)] if piece else []
        return []

    def _map_error(self, exc: Exception) -> ProviderError:
        """SDK / transport exception → ProviderError (never chained, see openai_compat)."""
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, anthropic.APIStatusError):
            if exc.status_code < 400:  # an `event: error` inside a 200 stream
                return wire_errors.stream_error(self.name, exc.body, secret=self._secret)
            text = wire_errors.redact(getattr(exc.response, "text", "") or "", self._secret)
            return wire_errors.status_error(
                self.name,
                exc.status_code,
                exc.body,
                secret=self._secret,
                fallback=text,
                headers=exc.response.headers,
            )
        if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
            return wire_errors.transport_error(self.name, self.host, "request timed out", exc)
        if isinstance(exc, anthropic.APIConnectionError):
            return wire_errors.connection_error(self.name, self.host, exc, self.base_url)
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
