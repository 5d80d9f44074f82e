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


class ToolCallDelta(BaseModel):
    """A piece of a function call still being streamed: its name when it first appears,
    then fragments of its argument text. Informational (the complete call follows as a
    `ToolCallEvent`); it shows the model is producing output, which the first-content
    deadline watches, since a long call may stream for minutes before it completes."""

    type: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    name: str = ""
    arguments: str = ""


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


StreamEvent = (
    TextDelta | ThinkingDelta | ToolCallDelta | ToolCallEvent | Usage | Finish | StreamRestart
)


# ---------------------------------------------------------------- errors


class PartialOutput(BaseModel):
    """What a failed attempt had streamed before it failed: a record of the failure,
    never an answer (the generation did not complete)."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ProviderError(MindloopError):
    """A model call failed. The message never contains an API key.

    - `retriable` drives the retry layer; `status` is the HTTP status where there is one.
    - `retry_after`: seconds the server asked to wait before trying again (`Retry-After`).
    - `partial`: set by the retry layer when the failing attempt had already streamed
      output (a mid-stream failure). The events of that attempt reached the consumer; this
      is exactly what they added up to since the last `StreamRestart`. `None` when the
      attempt failed before any output.
    """

    def __init__(
        self,
        message: str,
        *,
        retriable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.status = status
        self.retry_after = retry_after
        self.partial: PartialOutput | None = None


class Provider(Protocol):
    """One configured provider (an entry of llm.yaml)."""

    name: str

    def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        """Stream one generation. Raises ProviderError on failure."""
        ...

    async def aclose(self) -> None: ...
