"""The span recorder on event sequences the engine publishes: failures, questions to the
human, retries, drives cut off, and events it must tolerate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from mindloop.events.otel import SpanRecorder
from mindloop.events.types import (
    DriveEnded,
    DriveStarted,
    ErrorRaised,
    GenerationEnded,
    GenerationRestarted,
    GenerationStarted,
    NoteAdded,
    QuestionAnswered,
    QuestionAsked,
    TellaskCalled,
    TellaskResponded,
    TextChunk,
    ToolCalled,
    ToolResulted,
)

D = "d1"


@pytest.fixture
def traced() -> Iterator[tuple[SpanRecorder, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield SpanRecorder(provider.get_tracer("test"), provider_names={"p": "openai"}), exporter
    provider.shutdown()


def _by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {s.name: s for s in exporter.get_finished_spans()}


def _start(rec: SpanRecorder, ts: float = 1.0) -> None:
    rec(DriveStarted(dialog_id=D, member="m", task="tasks/t.tsk", ts=ts))


def test_a_failed_generation_and_its_drive_carry_the_error(
    traced: tuple[SpanRecorder, InMemorySpanExporter],
) -> None:
    rec, exporter = traced
    _start(rec)
    rec(GenerationStarted(dialog_id=D, member="m", model="gpt-x", provider="p", ts=2.0))
    rec(GenerationRestarted(dialog_id=D, attempt=2, reason="HTTP 503", ts=2.5))
    rec(ErrorRaised(dialog_id=D, message="HTTP 500: upstream down", ts=3.0))
    rec(GenerationEnded(dialog_id=D, finish_reason="error", ts=3.0))
    rec(DriveEnded(dialog_id=D, reason="error", steps=1, error="HTTP 500: upstream down", ts=4.0))
    spans = _by_name(exporter)
    gen, drive = spans["chat gpt-x"], spans["invoke_agent m"]
    assert gen.status.status_code is StatusCode.ERROR
    assert gen.status.description == "HTTP 500: upstream down"
    assert dict(gen.attributes or {})["error.type"] == "_OTHER"
    assert dict(gen.attributes or {})["gen_ai.provider.name"] == "openai"
    assert [(e.name, dict(e.attributes or {})) for e in gen.events] == [
        ("mindloop.retry", {"attempt": 2, "reason": "HTTP 503"})
    ]
    assert drive.status.status_code is StatusCode.ERROR
    assert (drive.start_time, drive.end_time) == (1_000_000_000, 4_000_000_000)
    assert [e.name for e in drive.events] == ["mindloop.error"]


def test_a_question_to_the_human_is_a_span_until_it_is_answered(
    traced: tuple[SpanRecorder, InMemorySpanExporter],
) -> None:
    rec, exporter = traced
    _start(rec)
    rec(QuestionAsked(dialog_id=D, question_id="q4h-1", headline="Which DB?", body="pg?", ts=2))
    rec(DriveEnded(dialog_id=D, reason="waiting", ts=3.0))
    assert set(_by_name(exporter)) == {"invoke_agent m"}  # the question is still open
    rec(QuestionAnswered(dialog_id=D, question_id="q4h-1", ts=9.0))
    _start(rec, ts=9.5)  # the dialog resumes: the same trace, under its previous drive
    rec(DriveEnded(dialog_id=D, reason="done", ts=10.0))
    spans = exporter.get_finished_spans()
    question = next(s for s in spans if s.name == "tellask human")
    first, second = (s for s in spans if s.name == "invoke_agent m")
    assert question.parent is not None and question.parent.span_id == first.context.span_id
    assert dict(question.attributes or {})["mindloop.question.id"] == "q4h-1"
    assert "mindloop.tellask.headline" not in dict(question.attributes or {})  # content: off
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    assert second.context.trace_id == first.context.trace_id


def test_close_ends_what_an_interrupt_cut_off(
    traced: tuple[SpanRecorder, InMemorySpanExporter],
) -> None:
    rec, exporter = traced
    _start(rec)
    rec(GenerationStarted(dialog_id=D, member="m", model="x", ts=2.0))
    rec(TextChunk(dialog_id=D, text="half a"))
    rec(ToolCalled(dialog_id="other", call_id="c1", name="shell", arguments="{}"))
    rec(TellaskCalled(dialog_id=D, side_id="s1", call_type="fresh", headline="@w go"))
    assert exporter.get_finished_spans() == ()
    rec.close()
    spans = _by_name(exporter)
    assert set(spans) == {"invoke_agent m", "chat x", "execute_tool shell", "tellask fresh"}
    for name in ("invoke_agent m", "chat x", "execute_tool shell"):
        assert spans[name].status.status_code is StatusCode.ERROR
    assert dict(spans["tellask fresh"].attributes or {})["mindloop.unanswered"] is True
    assert spans["tellask fresh"].status.status_code is StatusCode.UNSET


def test_events_without_an_open_drive_are_tolerated(
    traced: tuple[SpanRecorder, InMemorySpanExporter],
) -> None:
    rec, exporter = traced
    rec(DriveEnded(dialog_id=D, reason="idle"))  # a drive that found nothing to answer
    rec(GenerationEnded(dialog_id=D, finish_reason="stop"))
    rec(ToolResulted(dialog_id=D, call_id="nope", name="x", text=""))
    rec(NoteAdded(dialog_id=D, text="note"))
    rec(QuestionAnswered(dialog_id=D, question_id="q-unknown"))
    assert exporter.get_finished_spans() == ()
    _start(rec)
    _start(rec, ts=2.0)  # the first drive's end was never published (its claim was lost)
    rec(DriveEnded(dialog_id=D, reason="done", ts=3.0))
    assert [s.name for s in exporter.get_finished_spans()] == ["invoke_agent m"] * 2


def test_a_tool_error_marks_its_span(traced: tuple[SpanRecorder, InMemorySpanExporter]) -> None:
    rec, exporter = traced
    _start(rec)
    rec(ToolCalled(dialog_id=D, call_id="c1", name="read_file", arguments='{"path": "x"}'))
    rec(
        ToolResulted(
            dialog_id=D, call_id="c1", name="read_file", text="no such file", is_error=True
        )
    )
    [tool] = exporter.get_finished_spans()
    assert tool.status.status_code is StatusCode.ERROR
    assert dict(tool.attributes or {})["error.type"] == "tool_error"
    assert "gen_ai.tool.call.result" not in dict(tool.attributes or {})


def test_a_side_dialog_s_drives_are_children_of_the_tellask_asking_it(
    traced: tuple[SpanRecorder, InMemorySpanExporter],
) -> None:
    rec, exporter = traced
    rec(DriveStarted(dialog_id="a", member="m"))
    rec(DriveStarted(dialog_id="b", member="m"))
    rec(TellaskCalled(dialog_id="a", side_id="s", call_type="session", headline="x"))
    rec(TellaskCalled(dialog_id="b", side_id="s", call_type="session", headline="y"))
    rec(TellaskResponded(dialog_id="a", side_id="s", call_type="session"))  # a's is answered
    rec(DriveStarted(dialog_id="s", member="w"))  # still asked by b
    rec(DriveEnded(dialog_id="s", reason="done"))
    spans = exporter.get_finished_spans()
    [side] = [s for s in spans if s.name == "invoke_agent w"]
    [asked_by_a] = [s for s in spans if s.name == "tellask session"]
    rec.close()
    [asked_by_b] = [
        s
        for s in exporter.get_finished_spans()
        if s.name == "tellask session" and s is not asked_by_a
    ]
    assert side.parent is not None and side.parent.span_id == asked_by_b.context.span_id
    assert asked_by_a.context.span_id != asked_by_b.context.span_id
