"""The fault-injection suite for both wire protocols (issue 10).

A loopback fault server speaks OpenAI Chat Completions streaming and Anthropic Messages
streaming; the real `openai` and `anthropic` SDKs talk to it through mindloop's adapters,
built the way the runtime builds them: `.minds/llm.yaml` → `load_config` → `ProviderPool`
(retries, deadlines, `Retry-After`). Each fault asserts what the user gets: the answer
after retries, or one clear error naming the status or the host, and never a hang: the
deadlines are short here, and every test is bounded.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from wire_loopback import (
    ANTHROPIC_PING,
    OPENAI_KEEPALIVE,
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
    error_body,
    json_reply,
    openai_chunk,
    openai_sse,
    openai_text_stream,
    openai_usage_chunk,
)

from mindloop.config import load_config
from mindloop.providers.base import (
    Finish,
    GenerationRequest,
    PartialOutput,
    ProviderError,
    StreamEvent,
    StreamRestart,
    TextDelta,
    ToolCallEvent,
    ToolSpec,
    UserMessage,
)
from mindloop.providers.pool import ProviderPool

pytestmark = pytest.mark.timeout(30)

API_KEY = "sk-fault-0123456789abcdefSECRET"
TIMEOUT = 0.3  # the SDK's gap between bytes
FIRST_CONTENT = 0.5
DEADLINE = 1.0
ATTEMPTS = 3
BOUND = ATTEMPTS * DEADLINE + 3  # no case may take longer than this, whatever happens

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
REQUEST = GenerationRequest(
    model="served", system="terse", messages=[UserMessage(text="hi")], tools=[READ_FILE]
)


# ---------------------------------------------------------------- the two protocols


@dataclass(frozen=True)
class Wire:
    """How one protocol encodes each reply the faults need."""

    kind: str
    url_suffix: str
    keepalive: bytes
    text: Callable[[list[str]], list[bytes]]
    cut: Callable[[list[str]], list[bytes]]  # a start and some text, no end
    empty: Callable[[], list[bytes]]
    tool_call: Callable[[str, str], list[bytes]]
    opening: list[bytes]  # what a server sends before the model's first token
    malformed: list[bytes]
    error: Callable[[str, str], Any]


def _openai_cut(pieces: list[str]) -> list[bytes]:
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    return openai_sse(chunks + [openai_chunk({"content": p}) for p in pieces], done=False)


def _openai_tool_call(name: str, raw: str) -> list[bytes]:
    start = {"index": 0, "id": "call_x", "type": "function", "function": {"name": name}}
    more = {"index": 0, "function": {"arguments": raw}}
    return openai_sse(
        [
            openai_chunk({"role": "assistant", "content": None, "tool_calls": [start]}),
            openai_chunk({"tool_calls": [more]}),
            openai_chunk({}, "tool_calls"),
            openai_usage_chunk(9, 4),
        ]
    )


OPENAI = Wire(
    kind="openai-compatible",
    url_suffix="/v1",
    keepalive=OPENAI_KEEPALIVE,
    text=openai_text_stream,
    cut=_openai_cut,
    empty=lambda: openai_sse(
        [
            openai_chunk({"role": "assistant", "content": ""}),
            openai_chunk({}, "stop"),
            openai_usage_chunk(7, 0),
        ]
    ),
    tool_call=_openai_tool_call,
    opening=openai_sse([openai_chunk({"role": "assistant", "content": ""})], done=False),
    malformed=[b"data: {not json at all\n\n"],
    error=lambda message, kind: error_body(message, kind),
)


def _anthropic_cut(pieces: list[str]) -> list[bytes]:
    events = anthropic_text_events(pieces)
    return anthropic_sse(events[: 3 + len(pieces)])  # start, ping, block start, deltas


def _anthropic_tool_call(name: str, raw: str) -> list[bytes]:
    block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}
    return anthropic_sse(
        [
            anthropic_start(),
            anthropic_block_start(0, block),
            anthropic_delta(0, {"type": "input_json_delta", "partial_json": raw}),
            anthropic_block_stop(0),
            *anthropic_end("tool_use", 4),
        ]
    )


ANTHROPIC = Wire(
    kind="anthropic",
    url_suffix="",
    keepalive=ANTHROPIC_PING,
    text=lambda pieces: anthropic_sse(anthropic_text_events(pieces)),
    cut=_anthropic_cut,
    empty=lambda: anthropic_sse([anthropic_start(), *anthropic_end("end_turn", 0)]),
    tool_call=_anthropic_tool_call,
    opening=anthropic_sse([anthropic_start()]),
    malformed=[*anthropic_sse([anthropic_start()]), b"event: content_block_delta\ndata: {oops\n\n"],
    error=lambda message, kind: anthropic_error_body(message, kind),
)

WIRES = {"openai": OPENAI, "anthropic": ANTHROPIC}


# ---------------------------------------------------------------- running a case


class Waits:
    """The pool's sleep between attempts: records each delay; waits for real only when
    asked (the Retry-After case), so the other cases stay fast."""

    def __init__(self, real: bool = False) -> None:
        self.real = real
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if self.real:
            await asyncio.sleep(delay)


@dataclass
class Outcome:
    events: list[StreamEvent]
    error: ProviderError | None
    seconds: float
    waits: list[float]

    @property
    def text(self) -> str:
        """The answer as the user finally sees it: text after the last restart."""
        restarts = [i for i, e in enumerate(self.events) if isinstance(e, StreamRestart)]
        tail = self.events[restarts[-1] + 1 :] if restarts else self.events
        return "".join(e.text for e in tail if isinstance(e, TextDelta))


def llm_yaml(wire: Wire, url: str) -> str:
    return (
        "providers:\n"
        "  p:\n"
        f"    kind: {wire.kind}\n"
        f"    base_url: {url}{wire.url_suffix}\n"
        "    api_key_env: FAULT_API_KEY\n"
        f"    timeout: {TIMEOUT}\n"
        f"    first_content_deadline: {FIRST_CONTENT}\n"
        f"    generation_deadline: {DEADLINE}\n"
        f"    max_retries: {ATTEMPTS}\n"
        "    retry_after_cap: 2\n"
        "    models:\n"
        "      served: {context_length: 8000}\n"
    )


TEAM = "member_defaults:\n  provider: p\n  model: served\nmembers:\n  dev: {}\n"


async def stream_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire, url: str, waits: Waits
) -> Outcome:
    """One generation through llm.yaml → load_config → ProviderPool, as the runtime runs
    it; bounded whatever the server does."""
    monkeypatch.setenv("FAULT_API_KEY", API_KEY)
    minds = tmp_path / ".minds"
    minds.mkdir(exist_ok=True)
    (minds / "team.yaml").write_text(TEAM, encoding="utf-8")
    (minds / "llm.yaml").write_text(llm_yaml(wire, url), encoding="utf-8")
    pool = ProviderPool(load_config(tmp_path).llm, tmp_path, sleep=waits)
    events: list[StreamEvent] = []
    error: ProviderError | None = None
    started = time.monotonic()
    try:
        async for event in pool.stream("p", REQUEST):
            events.append(event)
    except ProviderError as exc:
        error = exc
    seconds = time.monotonic() - started
    await pool.aclose()
    assert seconds < BOUND
    if error is not None:
        assert API_KEY not in str(error) and API_KEY[:12] not in str(error)
    return Outcome(events, error, seconds, waits.delays)


async def run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    wire: Wire,
    replies: list[Reply],
    *,
    real_waits: bool = False,
) -> tuple[Outcome, LoopbackServer]:
    with LoopbackServer(replies) as server:
        out = await stream_once(tmp_path, monkeypatch, wire, server.url, Waits(real=real_waits))
    return out, server


def host(server: LoopbackServer) -> str:
    return server.url.removeprefix("http://")


WIRE = pytest.mark.parametrize("wire", list(WIRES.values()), ids=list(WIRES))


# ---------------------------------------------------------------- retried, then answered


@WIRE
async def test_429_with_retry_after_waits_as_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    limited = json_reply(
        429, wire.error("Rate limit reached", "rate_limit_error"), {"Retry-After": "1"}
    )
    out, srv = await run(
        tmp_path, monkeypatch, wire, [limited, Reply(chunks=wire.text(["fine"]))], real_waits=True
    )
    assert out.error is None and out.text == "fine"
    assert len(srv.requests) == 2
    assert srv.requests[1].at - srv.requests[0].at >= 1.0
    assert out.waits[0] >= 1.0


@WIRE
@pytest.mark.parametrize("status", [500, 502, 503, 529])
async def test_5xx_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire, status: int
) -> None:
    failing = json_reply(status, wire.error("upstream trouble", "api_error"))
    out, srv = await run(tmp_path, monkeypatch, wire, [failing, Reply(chunks=wire.text(["ok"]))])
    assert out.error is None and out.text == "ok"
    assert srv.hits == 2


@WIRE
async def test_hang_before_the_stream_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    out, srv = await run(
        tmp_path, monkeypatch, wire, [Reply(hold=True), Reply(chunks=wire.text(["late"]))]
    )
    assert out.error is None and out.text == "late"
    assert srv.hits == 2


@WIRE
async def test_hang_during_the_stream_restarts_the_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    stalled = Reply(chunks=wire.cut(["Hal"]), hold_after=True)
    out, srv = await run(tmp_path, monkeypatch, wire, [stalled, Reply(chunks=wire.text(["Hello"]))])
    assert out.error is None and out.text == "Hello"
    assert any(isinstance(e, StreamRestart) for e in out.events)
    assert srv.hits == 2


@WIRE
@pytest.mark.parametrize(
    "opening", [False, True], ids=["only-keepalives", "opened-then-keepalives"]
)
async def test_keepalive_only_stream_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire, opening: bool
) -> None:
    idle = Reply(chunks=wire.opening if opening else [], keepalive=wire.keepalive)
    out, srv = await run(tmp_path, monkeypatch, wire, [idle, Reply(chunks=wire.text(["awake"]))])
    assert out.error is None and out.text == "awake"
    assert srv.hits == 2
    assert out.seconds >= FIRST_CONTENT


@WIRE
async def test_cut_stream_is_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    out, srv = await run(
        tmp_path,
        monkeypatch,
        wire,
        [Reply(chunks=wire.cut(["Hal"]), drop=True), Reply(chunks=wire.text(["Hello"]))],
    )
    assert out.error is None and out.text == "Hello"
    assert isinstance(out.events[1], StreamRestart)
    assert srv.hits == 2


@WIRE
async def test_empty_response_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    out, srv = await run(
        tmp_path, monkeypatch, wire, [Reply(chunks=wire.empty()), Reply(chunks=wire.text(["here"]))]
    )
    assert out.error is None and out.text == "here"
    assert srv.hits == 2
    assert out.events[-1] == Finish(reason="stop")


@WIRE
async def test_invalid_tool_argument_json_reaches_the_engine_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    # Not a wire fault: the model wrote bad JSON. The call goes through as written (the
    # tool layer answers the model with the JSON error); nothing is retried.
    out, srv = await run(
        tmp_path, monkeypatch, wire, [Reply(chunks=wire.tool_call("read_file", '{"path": '))]
    )
    assert out.error is None and srv.hits == 1
    [call] = [e.call for e in out.events if isinstance(e, ToolCallEvent)]
    assert (call.name, call.arguments) == ("read_file", '{"path": ')
    assert out.events[-1] == Finish(reason="tool_calls")


# ---------------------------------------------------------------- a clear error, bounded


@WIRE
async def test_401_fails_at_once_naming_the_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    body = wire.error(f"invalid x-api-key {API_KEY}", "authentication_error")
    out, srv = await run(tmp_path, monkeypatch, wire, [json_reply(401, body)])
    assert srv.hits == 1
    assert out.error is not None and out.error.status == 401 and not out.error.retriable
    assert str(out.error).startswith("p: 401 invalid x-api-key")


@WIRE
async def test_5xx_forever_gives_up_naming_the_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    out, srv = await run(
        tmp_path, monkeypatch, wire, [json_reply(503, wire.error("down", "api_error"))]
    )
    assert srv.hits == ATTEMPTS
    assert out.error is not None and out.error.status == 503
    assert str(out.error) == f"p: 503 down (after {ATTEMPTS} attempts)"


@WIRE
async def test_hang_forever_gives_up_naming_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    out, srv = await run(tmp_path, monkeypatch, wire, [Reply(hold=True)])
    assert srv.hits == ATTEMPTS
    assert out.error is not None and out.error.retriable
    assert f"request timed out at {host(srv)}" in str(out.error)


@WIRE
async def test_keepalives_forever_give_up_naming_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    out, srv = await run(
        tmp_path, monkeypatch, wire, [Reply(chunks=wire.opening, keepalive=wire.keepalive)]
    )
    assert srv.hits == ATTEMPTS
    assert out.error is not None and out.error.retriable
    assert str(out.error).startswith(f"p: no content within {FIRST_CONTENT:g} s")
    assert "first_content_deadline" in str(out.error)


@WIRE
async def test_a_stream_that_never_finishes_hits_the_overall_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    # Content arrives, then keep-alives for ever: the gap timeout never fires.
    trickle = Reply(chunks=wire.cut(["Once upon"]), keepalive=wire.keepalive)
    out, srv = await run(tmp_path, monkeypatch, wire, [trickle])
    assert srv.hits == ATTEMPTS
    assert out.error is not None and out.error.retriable
    assert f"did not finish within {DEADLINE:g} s" in str(out.error)
    assert out.error.partial == PartialOutput(text="Once upon")


@WIRE
async def test_cut_forever_reports_the_partial_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    out, srv = await run(
        tmp_path, monkeypatch, wire, [Reply(chunks=wire.cut(["PARTIAL ", "one"]), drop=True)]
    )
    assert srv.hits == ATTEMPTS
    assert out.error is not None and out.error.retriable
    assert f"stream from {host(srv)} dropped" in str(out.error)
    assert out.error.partial == PartialOutput(text="PARTIAL one")
    assert out.text == "PARTIAL one"


@WIRE
async def test_malformed_event_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    out, srv = await run(tmp_path, monkeypatch, wire, [Reply(chunks=wire.malformed)])
    assert srv.hits == 1
    assert out.error is not None and not out.error.retriable
    assert str(out.error).startswith(f"p: {host(srv)} returned malformed data")


@WIRE
async def test_empty_forever_gives_up_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    out, srv = await run(tmp_path, monkeypatch, wire, [Reply(chunks=wire.empty())])
    assert srv.hits == ATTEMPTS
    assert out.error is not None
    assert str(out.error).startswith("p: the model returned an empty response")


@WIRE
async def test_refused_connection_names_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: Wire
) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits = Waits()
    out = await stream_once(tmp_path, monkeypatch, wire, f"http://127.0.0.1:{port}", waits)
    assert out.error is not None and out.error.retriable
    assert len(waits.delays) == ATTEMPTS - 1
    assert f"connection failed at http://127.0.0.1:{port}" in str(out.error)
