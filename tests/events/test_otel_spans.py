"""The spans of a chat, exported by the SDK's in-memory exporter: names, parents,
GenAI attributes, and message content only when the user opts in."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mindloop import service
from mindloop.events.otel_setup import CAPTURE_CONTENT_ENV
from mindloop.testing import ScriptedModel, Turn, call
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"
SECRET = "the-secret-headline"


def _turns() -> dict[str, list[Turn | str]]:
    return {
        "lead": [
            Turn(tool_calls=[call("list_dir", path=".")], input_tokens=100, output_tokens=10),
            Turn(text=f"!?@helper {SECRET}\n!?Count the files.\n", input_tokens=120),
            Turn(text="There are three.", input_tokens=150, output_tokens=15),
        ],
        "helper": [Turn(text="three", input_tokens=50, output_tokens=5)],
    }


async def _chat(rtws: Path) -> tuple[list[ReadableSpan], str]:
    write_team(rtws, {"lead": {"toolsets": ["fs"]}, "helper": {"toolsets": ["fs"]}})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(_turns())
    async with service.open_project(
        rtws, providers={"mock": model}, tracer_provider=provider
    ) as project:
        posted = service.start_chat(project, "how many files?", task=TASK)
        report = await service.run(project, root_id=posted.dialog.id)
        assert report.outcome is service.Outcome.DONE and model.remaining == 0
    return list(exporter.get_finished_spans()), posted.dialog.id


def _named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def _parent(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


async def test_a_chat_is_one_trace_of_drives_generations_tools_and_tellasks(rtws: Path) -> None:
    spans, root_id = await _chat(rtws)
    assert len({s.context.trace_id for s in spans}) == 1  # the whole tree is one trace
    lead_drives = _named(spans, "invoke_agent lead")
    helper_drives = _named(spans, "invoke_agent helper")
    chats = _named(spans, "chat mock-model")
    [tool] = _named(spans, "execute_tool list_dir")
    [tellask] = _named(spans, "tellask fresh")
    assert len(lead_drives) == 2 and len(helper_drives) == 1 and len(chats) == 4
    first, resumed = sorted(lead_drives, key=lambda s: s.start_time or 0)

    # Parents: the first drive is the root; the tool, the tellask and the lead's first two
    # generations are its children; the helper's drive is the tellask's child; the lead's
    # drive after the reply continues the trace under its previous drive.
    assert first.parent is None
    assert _parent(tool, spans) is first and _parent(tellask, spans) is first
    [helper] = helper_drives
    assert _parent(helper, spans) is tellask
    assert _parent(resumed, spans) is first
    by_drive = {id(d): [c for c in chats if _parent(c, spans) is d] for d in spans}
    assert len(by_drive[id(first)]) == 2
    assert len(by_drive[id(helper)]) == 1 and len(by_drive[id(resumed)]) == 1

    # The drive: GenAI agent attributes and mindloop's own.
    attrs = dict(first.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "lead" and attrs["mindloop.member"] == "lead"
    assert attrs["mindloop.dialog.id"] == root_id and attrs["mindloop.task"] == TASK
    assert attrs["mindloop.drive.end"] == "waiting"
    assert dict(resumed.attributes or {})["mindloop.drive.end"] == "done"
    helper_attrs = dict(helper.attributes or {})
    assert helper_attrs["mindloop.dialog.kind"] == "side"
    assert helper_attrs["mindloop.dialog.root_id"] == root_id
    assert helper_attrs["mindloop.task"] == TASK

    # A generation: the GenAI inference attributes.
    gen = by_drive[id(first)][0]
    g = dict(gen.attributes or {})
    assert gen.kind is SpanKind.CLIENT
    assert g["gen_ai.operation.name"] == "chat"
    assert g["gen_ai.provider.name"] == g["gen_ai.system"] == "mindloop.mock"
    assert g["gen_ai.request.model"] == "mock-model"
    assert (g["gen_ai.usage.input_tokens"], g["gen_ai.usage.output_tokens"]) == (100, 10)
    assert tuple(g["gen_ai.response.finish_reasons"]) == ("tool_calls",)  # type: ignore[arg-type]
    assert g["mindloop.usage.cost_usd"] == 0.0  # the mock runs nothing: free
    assert g["mindloop.dialog.id"] == root_id and g["mindloop.member"] == "lead"
    tellask_gen = dict(by_drive[id(first)][1].attributes or {})
    assert tellask_gen["gen_ai.usage.input_tokens"] == 120

    # The tool call: the execute_tool attributes, and its time inside its drive's.
    t = dict(tool.attributes or {})
    assert t["gen_ai.operation.name"] == "execute_tool" and t["gen_ai.tool.name"] == "list_dir"
    assert t["gen_ai.tool.call.id"] == "call_1" and t["mindloop.task"] == TASK
    assert (first.start_time or 0) <= (tool.start_time or 0) <= (tool.end_time or 0)
    assert (tool.end_time or 0) <= (first.end_time or 0)

    # The tellask: from the call to the reply, after the helper's drive ended.
    ta = dict(tellask.attributes or {})
    assert ta["mindloop.tellask.call_type"] == "fresh"
    assert ta["mindloop.tellask.side_id"] == helper_attrs["mindloop.dialog.id"]
    assert [e.name for e in tellask.events] == ["mindloop.reply"]
    assert (tellask.end_time or 0) >= (helper.start_time or 0)
    assert all(s.status.status_code is not StatusCode.ERROR for s in spans)


async def test_message_content_stays_off_the_spans_by_default(
    rtws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    spans, _ = await _chat(rtws)
    text = json.dumps([dict(s.attributes or {}) for s in spans])
    for key in ("gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"):
        assert key not in text
    assert SECRET not in text and "There are three" not in text


async def test_message_content_is_recorded_when_the_user_opts_in(
    rtws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    spans, _ = await _chat(rtws)
    [tool] = _named(spans, "execute_tool list_dir")
    t = dict(tool.attributes or {})
    assert json.loads(str(t["gen_ai.tool.call.arguments"])) == {"path": "."}
    assert "README.md" in str(t["gen_ai.tool.call.result"])
    [tellask] = _named(spans, "tellask fresh")
    assert dict(tellask.attributes or {})["mindloop.tellask.headline"] == f"@helper {SECRET}"
    outputs = [
        json.loads(str(dict(s.attributes or {})["gen_ai.output.messages"]))
        for s in _named(spans, "chat mock-model")
    ]
    final = [o for o in outputs if o[0]["parts"] and "three." in o[0]["parts"][0]["content"]]
    assert final == [
        [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "There are three."}],
                "finish_reason": "stop",
            }
        ]
    ]
