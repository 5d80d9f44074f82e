"""The examples in docs/mock-provider.md work as documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    Finish,
    GenerationRequest,
    PartialOutput,
    ProviderError,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from mindloop.providers.mock import MockProvider
from mindloop.providers.mock_script import validate_script
from mindloop.providers.retry import stream_with_retry

DOC = Path(__file__).resolve().parents[2] / "docs" / "mock-provider.md"


def yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def script_from_doc(tmp_path: Path, containing: str) -> MockProvider:
    (block,) = [b for b in yaml_blocks() if containing in b]
    (tmp_path / "mock-model.yaml").write_text(block, encoding="utf-8")
    assert validate_script(tmp_path / "mock-model.yaml") == []
    return MockProvider("mock", tmp_path)


async def collect(provider: MockProvider, messages: list[ChatMessage]) -> list[StreamEvent]:
    req = GenerationRequest(model="mock-model", system="sys", messages=messages, member="dev")
    return [e async for e in provider.stream(req)]


async def test_worked_two_step_tool_exchange(tmp_path: Path) -> None:
    provider = script_from_doc(tmp_path, "step 1")
    user = UserMessage(text="Summarise README.md")
    step1 = await collect(provider, [user])
    assert "".join(e.text for e in step1 if isinstance(e, ThinkingDelta)) == (
        "I need to read the file first."
    )
    assert "".join(e.text for e in step1 if isinstance(e, TextDelta)) == "Let me read it."
    (call,) = [e.call for e in step1 if isinstance(e, ToolCallEvent)]
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "call_1",
        "read_file",
        {"path": "README.md"},
    )
    assert step1[-1] == Finish(reason="tool_calls")

    history: list[ChatMessage] = [
        user,
        AssistantMessage(text="Let me read it.", tool_calls=[call]),
        ToolResultMessage(call_id=call.id, name=call.name, content="# mindloop\n..."),
    ]
    step2 = await collect(provider, history)
    assert "".join(e.text for e in step2 if isinstance(e, TextDelta)) == (
        "README.md explains how to install and run the demo."
    )
    assert step2[-1] == Finish(reason="stop")

    with pytest.raises(ProviderError, match="Mock Response Not Found"):
        await collect(provider, [UserMessage(text="something else")])


async def test_rate_limited_once_example(tmp_path: Path) -> None:
    provider = script_from_doc(tmp_path, "rate limited")
    with pytest.raises(ProviderError) as info:
        await collect(provider, [UserMessage(text="summarise README.md")])
    assert info.value.retriable and info.value.status == 429
    events = await collect(provider, [UserMessage(text="summarise README.md")])
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "README.md describes the project."
    )


async def test_failing_mid_answer_example(tmp_path: Path) -> None:
    provider = script_from_doc(tmp_path, "after_chunks: 2")
    received: list[StreamEvent] = []
    req = GenerationRequest(
        model="mock-model", system="sys", messages=[UserMessage(text="write the summary")]
    )
    with pytest.raises(ProviderError) as info:
        async for event in stream_with_retry(provider, req):
            received.append(event)
    assert [e.text for e in received if isinstance(e, TextDelta)] == ["PARTIAL ", "one "]
    assert info.value.status == 400 and not info.value.retriable
    assert info.value.partial == PartialOutput(text="PARTIAL one ")


def test_every_script_block_in_the_doc_is_valid(tmp_path: Path) -> None:
    for number, block in enumerate(yaml_blocks()):
        if not block.lstrip().startswith(("responses:", "# .minds/mock/")):
            continue  # the llm.yaml excerpt
        path = tmp_path / f"block{number}.yaml"
        path.write_text(block, encoding="utf-8")
        assert validate_script(path) == [], block


async def test_the_router_example_answers_only_the_routers_call(tmp_path: Path) -> None:
    provider = script_from_doc(tmp_path, "offers_tool: route_message")
    tool = ToolSpec(name="route_message", description="route", parameters={"type": "object"})
    routed = GenerationRequest(
        model="mock-model",
        system="router",
        messages=[UserMessage(text="Continue the  login work")],
        tools=[tool],
    )
    [call] = [e.call for e in [e async for e in provider.stream(routed)] if e.type == "tool_call"]
    assert call.name == "route_message"
    assert json.loads(call.arguments)["target_task_id"] == "tasks/login.tsk"
    in_a_dialog = routed.model_copy(update={"tools": []})
    with pytest.raises(ProviderError, match="Mock Response Not Found"):
        [e async for e in provider.stream(in_a_dialog)]
