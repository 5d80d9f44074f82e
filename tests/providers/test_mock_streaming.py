"""What a matched entry streams: chunks, thinking, tool calls, usage, finish, delays."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.providers.base import (
    AssistantMessage,
    Finish,
    GenerationRequest,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallEvent,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from mindloop.providers.mock import MockProvider
from mindloop.providers.mock_script import split_chunks


def write_script(directory: Path, data: dict[str, object] | str, model: str = "m") -> MockProvider:
    # allow_unicode=False: PyYAML writes some line breaks (U+0085) raw, which a reader folds
    body = data if isinstance(data, str) else yaml.safe_dump(data, allow_unicode=False)
    (directory / f"{model}.yaml").write_text(body, encoding="utf-8")
    return MockProvider("mock", directory)


def request(
    *messages: UserMessage | AssistantMessage | ToolResultMessage | str,
) -> GenerationRequest:
    msgs = [UserMessage(text=m) if isinstance(m, str) else m for m in messages]
    return GenerationRequest(model="m", system="sys", messages=msgs)


async def collect(provider: MockProvider, req: GenerationRequest) -> list[StreamEvent]:
    return [e async for e in provider.stream(req)]


@given(st.text())
def test_split_chunks_concatenates_back_to_the_text(text: str) -> None:
    chunks = split_chunks(text)
    assert "".join(chunks) == text
    assert all(chunks)
    # a chunk never holds two words: whitespace only at its edges
    assert all(len(c.split()) <= 1 for c in chunks)


@settings(max_examples=60, deadline=None)
@given(response=st.text(), thinking=st.text())
def test_streamed_deltas_reproduce_scripted_text_exactly(response: str, thinking: str) -> None:
    async def run(directory: Path) -> list[StreamEvent]:
        provider = write_script(
            directory,
            {"responses": [{"default": True, "response": response, "thinking": thinking}]},
        )
        return await collect(provider, request("hi"))

    with tempfile.TemporaryDirectory() as directory:
        events = asyncio.run(run(Path(directory)))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    thoughts = [e.text for e in events if isinstance(e, ThinkingDelta)]
    assert "".join(texts) == response
    assert "".join(thoughts) == thinking


async def test_event_order_thinking_text_tool_calls_usage_finish(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: go
    thinking: "I should look first."
    response: "Let me look."
    tool_calls:
      - {name: list_dir, arguments: {path: .}}
""",
    )
    kinds = [e.type for e in await collect(provider, request("go"))]
    assert kinds == [
        "thinking", "thinking", "thinking", "thinking",
        "text", "text", "text",
        "tool_call", "usage", "finish",
    ]  # fmt: skip


async def test_tool_call_arguments_mapping_becomes_json_and_string_is_verbatim(
    tmp_path: Path,
) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: go
    tool_calls:
      - name: write_file
        arguments: {path: notes/ü.md, content: "line 1\\nline 2", overwrite: true, n: 3}
      - name: read_file
        arguments: '{"path": "README.md"'
      - name: list_dir
""",
    )
    events = await collect(provider, request("go"))
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert [c.name for c in calls] == ["write_file", "read_file", "list_dir"]
    assert json.loads(calls[0].arguments) == {
        "path": "notes/ü.md",
        "content": "line 1\nline 2",
        "overwrite": True,
        "n": 3,
    }
    assert calls[1].arguments == '{"path": "README.md"'  # invalid JSON kept for tests
    assert calls[2].arguments == "{}"
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "tool_calls"


async def test_finish_reason_is_stop_without_tool_calls(tmp_path: Path) -> None:
    provider = write_script(tmp_path, "responses:\n  - match: hi\n    response: hello\n")
    finish = (await collect(provider, request("hi")))[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop"


async def test_call_ids_are_unique_across_a_dialog(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - default: true
    tool_calls: [{name: a}, {name: b}]
""",
    )
    ids: list[str] = []
    for _ in range(3):
        events = await collect(provider, request("x"))
        ids += [e.call.id for e in events if isinstance(e, ToolCallEvent)]
    assert ids == ["call_1", "call_2", "call_3", "call_4", "call_5", "call_6"]


async def test_call_ids_continue_after_the_history_in_a_fresh_provider(tmp_path: Path) -> None:
    """A restarted process continuing a dialog must not reuse ids already in it."""
    write_script(tmp_path, "responses:\n  - role: tool\n    tool_calls: [{name: a}]\n")
    fresh = MockProvider("mock", tmp_path)
    earlier = ToolCall(id="call_7", name="a", arguments="{}")
    req = request(
        "x",
        AssistantMessage(tool_calls=[earlier]),
        ToolResultMessage(call_id="call_7", name="a", content="ok"),
    )
    events = await collect(fresh, req)
    assert [e.call.id for e in events if isinstance(e, ToolCallEvent)] == ["call_8"]


async def test_usage_scripted_partial_and_estimated(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: scripted
    response: ok
    usage: {input_tokens: 10, output_tokens: 5}
  - match: partial
    response: "12345678"
    usage: {input_tokens: 99}
  - match: estimated
    response: "12345678"
""",
    )

    async def usage(text: str, system: str = "sys") -> Usage:
        req = GenerationRequest(model="m", system=system, messages=[UserMessage(text=text)])
        found = [e for e in await collect(provider, req) if isinstance(e, Usage)]
        assert len(found) == 1
        return found[0]

    assert (await usage("scripted")).model_dump() == {
        "type": "usage",
        "input_tokens": 10,
        "output_tokens": 5,
    }
    partial = await usage("partial")
    assert (partial.input_tokens, partial.output_tokens) == (99, 2)
    estimated = await usage("estimated", system="x" * 391)  # 391 + 9 chars of input
    assert (estimated.input_tokens, estimated.output_tokens) == (100, 2)


async def test_delay_before_first_event_and_between_chunks(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: slow
    response: "a b c d"
    delay_ms: 30
    chunk_delay_ms: 10
""",
    )
    start = time.monotonic()
    seen: list[tuple[str, float]] = []
    async for event in provider.stream(request("slow")):
        seen.append((event.type, time.monotonic() - start))
    first_text = next(t for kind, t in seen if kind == "text")
    last_text = [t for kind, t in seen if kind == "text"][-1]
    assert first_text >= 0.029
    assert last_text - first_text >= 0.029  # three gaps of 10 ms between four chunks
    assert [kind for kind, _ in seen] == ["text"] * 4 + ["usage", "finish"]


async def test_zero_delay_answer_is_cheap(tmp_path: Path) -> None:
    """The mock drives runtime benchmarks: a scripted answer must not cost milliseconds."""
    entries = [{"match": f"question {i}", "response": f"answer {i}"} for i in range(50)]
    provider = write_script(tmp_path, {"responses": entries})
    req = request("question 49")
    for _ in range(20):
        await collect(provider, req)
    rounds = 300
    start = time.perf_counter()
    for _ in range(rounds):
        await collect(provider, req)
    per_call = (time.perf_counter() - start) / rounds
    assert per_call < 0.002  # observed ~0.05 ms; generous for loaded CI machines


async def test_concurrent_streams_never_share_call_ids(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - default: true
    tool_calls: [{name: a}, {name: b}]
    chunk_delay_ms: 1
    response: "x y"
""",
    )
    results = await asyncio.gather(*(collect(provider, request("go")) for _ in range(5)))
    ids = [e.call.id for events in results for e in events if isinstance(e, ToolCallEvent)]
    assert len(ids) == 10
    assert len(set(ids)) == 10
