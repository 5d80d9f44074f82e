"""Scripted models for tests: a `Provider` whose answers come from Python, not a YAML file.

`FunctionModel(fn)` answers each request with what `fn(request)` returns; `ScriptedModel`
answers with the next of a list of scripted turns (one list for everybody, or one per
member, so concurrent side dialogs stay deterministic). A turn carries text, thinking, tool
calls, usage, a delay and an injected failure; a plain string is a text turn and an
exception in the script is raised when its turn comes. Both record every request they
saw in `requests`, for assertions. They speak the stream protocol the real adapters speak
(text in word chunks, complete tool calls, usage, finish), so the engine cannot tell them
from a model.

They replace a provider of the team's `.minds/llm.yaml` by name (that entry still gives
the models, retries and concurrency):

    model = ScriptedModel([Turn(tool_calls=[call("list_dir", path=".")]), "Two files."])
    project = mindloop.service.open_project(rtws, providers={"mock": model})
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from mindloop.providers.base import (
    Finish,
    GenerationRequest,
    ProviderError,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallEvent,
    Usage,
)


class Call(BaseModel):
    """A function call a scripted turn makes. `arguments` as a mapping (sent as JSON) or
    as raw text (to script malformed JSON); `id` defaults to `call_<n>`."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class Failure(BaseModel):
    """A provider failure, raised after the turn's text and thinking were streamed (so a
    failure mid-stream is a turn with text and a failure). `retriable` ones are retried by
    the runtime like real ones, with backoff (set `max_retries` in llm.yaml to bound it)."""

    message: str
    status: int | None = None
    retriable: bool = False


class Turn(BaseModel):
    """What the model says in one generation."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[Call] = Field(default_factory=list)
    input_tokens: int | None = None  # usage, reported when either is given
    output_tokens: int | None = None
    delay: float = 0.0  # seconds before the first chunk (to overlap generations)
    error: Failure | None = None


def call(name: str, /, **arguments: Any) -> Call:
    """`call("read_file", path="README.md")`: a tool call for a scripted turn."""
    return Call(name=name, arguments=arguments)


TurnLike = Turn | str | BaseException
Respond = Callable[[GenerationRequest], TurnLike | Awaitable[TurnLike]]

_WORDS = re.compile(r"\s*\S+\s*|\s+")


class FunctionModel:
    """A provider answering each request with `fn(request)` (sync or async): a `Turn`, a
    string (a text turn) or an exception (raised)."""

    def __init__(self, fn: Respond, *, name: str = "function") -> None:
        self.name = name
        self._fn = fn
        self.requests: list[GenerationRequest] = []
        self._next_call = 1

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        # A snapshot: the engine hands over its live history list, which grows on.
        request = request.model_copy(
            update={"messages": list(request.messages), "tools": list(request.tools)}
        )
        self.requests.append(request)
        result = self._fn(request)
        if inspect.isawaitable(result):
            result = await result
        turn = _as_turn(result)
        if turn.delay:
            await asyncio.sleep(turn.delay)
        for chunk in _WORDS.findall(turn.thinking):
            yield ThinkingDelta(text=chunk)
        for chunk in _WORDS.findall(turn.text):
            yield TextDelta(text=chunk)
        if turn.error is not None:
            e = turn.error
            raise ProviderError(e.message, retriable=e.retriable, status=e.status)
        for c in turn.tool_calls:
            yield ToolCallEvent(call=self._tool_call(c))
        if turn.input_tokens is not None or turn.output_tokens is not None:
            yield Usage(input_tokens=turn.input_tokens or 0, output_tokens=turn.output_tokens or 0)
        yield Finish(reason="tool_calls" if turn.tool_calls else "stop")

    def _tool_call(self, c: Call) -> ToolCall:
        call_id = c.id
        if call_id is None:
            call_id = f"call_{self._next_call}"
            self._next_call += 1
        args = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
        return ToolCall(id=call_id, name=c.name, arguments=args)

    async def aclose(self) -> None:
        return None


class ScriptedModel(FunctionModel):
    """A provider answering with the next scripted turn: from one list in request order,
    or from `{member: [turns]}` per member. A request with no turn left fails loudly (a
    non-retriable provider error naming the member), as an unmatched mock request does."""

    def __init__(
        self,
        turns: Iterable[TurnLike] | Mapping[str, Iterable[TurnLike]],
        *,
        name: str = "scripted",
    ) -> None:
        super().__init__(self._next_turn, name=name)
        self._per_member = isinstance(turns, Mapping)
        if isinstance(turns, Mapping):
            self._queues = {m: deque(ts) for m, ts in turns.items()}
        else:
            self._queues = {"": deque(turns)}

    @property
    def remaining(self) -> int:
        """Scripted turns not used yet (a finished test usually expects 0)."""
        return sum(len(q) for q in self._queues.values())

    def _next_turn(self, request: GenerationRequest) -> TurnLike:
        key = (request.member or "") if self._per_member else ""
        queue = self._queues.get(key)
        if not queue:
            who = f"@{request.member}" if request.member else "the request"
            raise ProviderError(
                f"scripted model {self.name!r}: no turn left for {who} "
                f"(request #{len(self.requests)}); script more turns"
            )
        return queue.popleft()


def _as_turn(result: TurnLike) -> Turn:
    if isinstance(result, BaseException):
        raise result
    if isinstance(result, str):
        return Turn(text=result)
    return result
