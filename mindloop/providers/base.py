"""The one provider interface every model backend implements.

A provider turns a `GenerationRequest` (system prompt, provider-neutral messages, tool
schemas, merged model params) into an async stream of `StreamEvent`s. The dialog engine
never sees vendor types: adapters translate both ways.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, Field

from mindloop.errors import MindloopError

# ---------------------------------------------------------------- messages sent to a model


class ToolCall(BaseModel):
    """A function call requested by the model. `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"


class UserMessage(BaseModel):
    role: Literal["user"] = "user"
    text: str


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolResultMessage(BaseModel):
    role: Literal["tool"] = "tool"
    call_id: str
    name: str
    content: str
    is_error: bool = False


ChatMessage = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]


class ToolSpec(BaseModel):
    """A function tool as offered to the model: name, description, JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


class GenerationRequest(BaseModel):
    """Everything one model call needs. `params` is the member's merged model_params:
    `{"max_tokens": int?, "general": {...}, "openai": {...}, "anthropic": {...}}`."""

    model: str
    system: str
    messages: list[ChatMessage]
    tools: list[ToolSpec] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)
    member: str | None = None  # lets the mock script match by member


# ---------------------------------------------------------------- events streamed back


class TextDelta(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ThinkingDelta(BaseModel):
    type: Literal["thinking"] = "thinking"
    text: str


class ToolCallEvent(BaseModel):
    """A complete function call (adapters assemble streamed argument fragments)."""

    type: Literal["tool_call"] = "tool_call"
    call: ToolCall


class Usage(BaseModel):
    type: Literal["usage"] = "usage"
    input_tokens: int = 0
    output_tokens: int = 0


class Finish(BaseModel):
    type: Literal["finish"] = "finish"
    reason: str = "stop"  # stop | tool_calls | length | error | cancelled


class StreamRestart(BaseModel):
    """Emitted by the retry layer when a stream broke after partial output and is being
    retried: consumers must discard what they received of this generation so far."""

    type: Literal["restart"] = "restart"
    attempt: int
    reason: str


StreamEvent = TextDelta | ThinkingDelta | ToolCallEvent | Usage | Finish | StreamRestart


# ---------------------------------------------------------------- errors


class ProviderError(MindloopError):
    """A model call failed. `retriable` drives the retry layer; `status` is the HTTP
    status where there is one. The message never contains an API key."""

    def __init__(self, message: str, *, retriable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.status = status


class Provider(Protocol):
    """One configured provider (an entry of llm.yaml)."""

    name: str

    def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        """Stream one generation. Raises ProviderError on failure."""
        ...

    async def aclose(self) -> None: ...
