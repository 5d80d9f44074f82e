"""OpenTelemetry spans built from the runtime's events (GenAI semantic conventions).

The engine carries no tracing code: this one bus subscriber turns the typed events into
spans, keeping the open ones per dialog and per call. It needs `opentelemetry-api` only;
what is done with the spans (an SDK, an exporter) is the tracer provider's business (see
`events.otel_setup` for the one `mindloop chat`/`run` build from `OTEL_*` variables).

The spans, each with `mindloop.dialog.id`, `mindloop.task` and `mindloop.member`:

- a drive: `invoke_agent {member}` (INTERNAL), from `DriveStarted` to `DriveEnded`;
- a generation: `chat {model}` (CLIENT), a child of its drive: provider, model, token
  usage, finish reason and cost (`mindloop.usage.cost_usd`);
- a tool call: `execute_tool {tool}` (INTERNAL), a child of its drive, with the call id;
- a tellask: `tellask {call type}` (INTERNAL), a child of the caller's drive, from the
  call to the reply; the drives of the side dialog it started are its children, so one
  trace holds a whole dialog tree; a question to the human is `tellask human`, from the
  question to the answer.

A drive that resumes a dialog after the replies it waited for came in is a child of the
dialog's previous drive (which ended waiting), so one chat is one trace. Times are the
events' own timestamps. Message content — generated text and reasoning, tool arguments
and results, tellask headlines and questions — is recorded only with `capture_content`
(the GenAI conventions' opt-in); the prompt itself is never on a span (it is in the
store, `mindloop dialogs show`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context

from mindloop.events.types import (
    DriveEnded,
    DriveStarted,
    ErrorRaised,
    Event,
    GenerationEnded,
    GenerationRestarted,
    GenerationStarted,
    NoteAdded,
    PhaseEnded,
    PhaseStarted,
    QuestionAnswered,
    QuestionAsked,
    TellaskCalled,
    TellaskResponded,
    TextChunk,
    ThinkingChunk,
    ToolCalled,
    ToolResulted,
)

# The GenAI semantic conventions' attribute names (development status, v1.37+).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # the name before v1.37, still read by many backends
REQUEST_MODEL = "gen_ai.request.model"
CONVERSATION = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

DIALOG = "mindloop.dialog.id"
TASK = "mindloop.task"
MEMBER = "mindloop.member"

# How many dialogs that ended a drive waiting are remembered, to continue their trace.
MAX_RESUMABLE = 10_000


@dataclass
class _Drive:
    span: Span
    context: Context
    common: dict[str, str]  # copied onto every child span
    generation: Span | None = None
    text: list[str] = field(default_factory=list)  # with capture_content only
    thinking: list[str] = field(default_factory=list)
    error: str | None = None  # the last error the generation raised


def _ns(ts: float) -> int:
    return int(ts * 1_000_000_000)


class SpanRecorder:
    """A bus listener (`bus.subscribe(recorder)`) that records spans on `tracer`.

    `provider_names` maps llm.yaml provider names to `gen_ai.provider.name` values
    (`openai`, `anthropic` …). Call `close()` when the runtime stops: spans still open
    (a drive cut off by Ctrl-C) end there."""

    def __init__(
        self,
        tracer: Tracer,
        *,
        capture_content: bool = False,
        provider_names: Mapping[str, str] | None = None,
    ) -> None:
        self._tracer = tracer
        self._capture = capture_content
        self._providers = dict(provider_names or {})
        self._drives: dict[str, _Drive] = {}
        self._tools: dict[tuple[str, str], Span] = {}
        self._tellasks: dict[tuple[str, str], Span] = {}
        self._questions: dict[str, Span] = {}
        # side dialog -> the open tellask that asks it (its key in `_tellasks`, its context)
        self._callers: dict[str, tuple[tuple[str, str], Context]] = {}
        self._resume: OrderedDict[str, Context] = OrderedDict()  # dialog -> last drive
        self._phases: dict[str, tuple[Span, Context]] = {}  # loop root -> its open phase
        handlers: dict[type[Event], Callable[[Any], None]] = {
            DriveStarted: self._drive_started,
            DriveEnded: self._drive_ended,
            GenerationStarted: self._generation_started,
            GenerationRestarted: self._generation_restarted,
            GenerationEnded: self._generation_ended,
            ErrorRaised: self._error,
            NoteAdded: self._note,
            ToolCalled: self._tool_called,
            ToolResulted: self._tool_resulted,
            TellaskCalled: self._tellask_called,
            TellaskResponded: self._tellask_responded,
            QuestionAsked: self._question_asked,
            QuestionAnswered: self._question_answered,
            PhaseStarted: self._phase_started,
            PhaseEnded: self._phase_ended,
        }
        if capture_content:
            handlers[TextChunk] = self._text
            handlers[ThinkingChunk] = self._thinking
        self._handlers = handlers

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def close(self) -> None:
        """End every span still open, now: drives, generations and tool calls an interrupt
        cut off (with an error status); tellasks and questions still waiting for their
        reply (marked `mindloop.unanswered`: a later process receives the reply)."""
        cut = [d.generation for d in self._drives.values() if d.generation is not None]
        cut += [*self._tools.values(), *(d.span for d in self._drives.values())]
        cut += [span for span, _ in self._phases.values()]
        for span in cut:
            span.set_status(Status(StatusCode.ERROR, "not finished when the runtime stopped"))
            span.end()
        for span in [*self._tellasks.values(), *self._questions.values()]:
            span.set_attribute("mindloop.unanswered", True)
            span.end()
        self._drives.clear()
        self._tools.clear()
        self._tellasks.clear()
        self._questions.clear()
        self._callers.clear()
        self._resume.clear()
        self._phases.clear()

    # ------------------------------------------------------------------ loop phases

    def _phase_started(self, ev: PhaseStarted) -> None:
        root = ev.dialog_id or ""
        stale = self._phases.pop(root, None)
        if stale is not None:  # its end was never published (a crash)
            stale[0].end(_ns(ev.ts))
        attrs: dict[str, Any] = {
            DIALOG: root,
            TASK: ev.task,
            "mindloop.loop.phase": ev.phase,
            "mindloop.loop.entry": ev.entry,
        }
        if ev.member:
            attrs[MEMBER] = ev.member
        if ev.node:
            attrs["mindloop.loop.node"] = ev.node
        span = self._tracer.start_span(
            f"loop_phase {ev.phase}",
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=_ns(ev.ts),
        )
        self._phases[root] = (span, set_span_in_context(span))

    def _phase_ended(self, ev: PhaseEnded) -> None:
        found = self._phases.pop(ev.dialog_id or "", None)
        if found is None:
            return
        span = found[0]
        span.set_attribute("mindloop.loop.ended_by", ev.by)
        if ev.hint:
            span.set_attribute("mindloop.loop.hint", ev.hint)
        span.end(_ns(ev.ts))

    # ------------------------------------------------------------------ drives

    def _drive_started(self, ev: DriveStarted) -> None:
        did = ev.dialog_id or ""
        stale = self._drives.pop(did, None)
        if stale is not None:  # its end was never published (the claim was lost)
            stale.span.end(_ns(ev.ts))
        resumed = self._resume.pop(did, None)
        caller = self._callers.get(did)
        phase = self._phases.get(did)
        parent = caller[1] if caller is not None else phase[1] if phase is not None else resumed
        common = {DIALOG: did, MEMBER: ev.member}
        if ev.task:
            common[TASK] = ev.task
        attrs: dict[str, Any] = {
            OPERATION: "invoke_agent",
            AGENT_NAME: ev.member,
            CONVERSATION: did,
            **common,
        }
        if ev.kind:
            attrs["mindloop.dialog.kind"] = ev.kind
        if ev.root_id:
            attrs["mindloop.dialog.root_id"] = ev.root_id
        span = self._tracer.start_span(
            f"invoke_agent {ev.member}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=_ns(ev.ts),
        )
        self._drives[did] = _Drive(span=span, context=set_span_in_context(span), common=common)

    def _drive_ended(self, ev: DriveEnded) -> None:
        did = ev.dialog_id or ""
        drive = self._drives.pop(did, None)
        if drive is None:  # a drive that found nothing to answer never started a span
            return
        end = _ns(ev.ts)
        if drive.generation is not None:  # cut off mid-stream
            drive.generation.set_status(Status(StatusCode.ERROR, f"drive ended: {ev.reason}"))
            drive.generation.end(end)
        for key in [k for k in self._tools if k[0] == did]:
            tool = self._tools.pop(key)
            tool.set_status(Status(StatusCode.ERROR, f"drive ended: {ev.reason}"))
            tool.end(end)
        span = drive.span
        span.set_attribute("mindloop.drive.end", ev.reason)
        span.set_attribute("mindloop.drive.steps", ev.steps)
        if ev.error is not None:
            span.set_attribute(ERROR_TYPE, "_OTHER")
            span.set_status(Status(StatusCode.ERROR, ev.error))
        span.end(end)
        if ev.reason == "waiting":  # its next drive continues this trace
            self._resume[did] = drive.context
            self._resume.move_to_end(did)
            while len(self._resume) > MAX_RESUMABLE:
                self._resume.popitem(last=False)

    def _error(self, ev: ErrorRaised) -> None:
        drive = self._drives.get(ev.dialog_id or "")
        if drive is None:
            return
        if drive.generation is not None:
            drive.error = ev.message
        attrs = (
            {"message": ev.message} if ev.code is None else {"message": ev.message, "code": ev.code}
        )
        drive.span.add_event("mindloop.error", attrs, timestamp=_ns(ev.ts))

    def _note(self, ev: NoteAdded) -> None:
        drive = self._drives.get(ev.dialog_id or "")
        if drive is not None:  # runtime-written (step limit, cap reached, new course)
            drive.span.add_event("mindloop.note", {"text": ev.text}, timestamp=_ns(ev.ts))

    # ------------------------------------------------------------------ generations

    def _generation_started(self, ev: GenerationStarted) -> None:
        drive = self._drives.get(ev.dialog_id or "")
        if drive is None:
            return
        provider = self._providers.get(ev.provider or "", ev.provider or "unknown")
        attrs: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: provider,
            SYSTEM: provider,
            REQUEST_MODEL: ev.model,
            CONVERSATION: ev.dialog_id or "",
            **drive.common,
        }
        if ev.provider:
            attrs["mindloop.provider"] = ev.provider
        drive.generation = self._tracer.start_span(
            f"chat {ev.model}",
            context=drive.context,
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=_ns(ev.ts),
        )
        drive.text.clear()
        drive.thinking.clear()
        drive.error = None

    def _text(self, ev: TextChunk) -> None:
        drive = self._drives.get(ev.dialog_id or "")
        if drive is not None and drive.generation is not None:
            drive.text.append(ev.text)

    def _thinking(self, ev: ThinkingChunk) -> None:
        drive = self._drives.get(ev.dialog_id or "")
        if drive is not None and drive.generation is not None:
            drive.thinking.append(ev.text)

    def _generation_restarted(self, ev: GenerationRestarted) -> None:
        drive = self._drives.get(ev.dialog_id or "")
        if drive is None or drive.generation is None:
            return
        drive.text.clear()  # what was streamed before the retry is void
        drive.thinking.clear()
        drive.generation.add_event(
            "mindloop.retry", {"attempt": ev.attempt, "reason": ev.reason}, timestamp=_ns(ev.ts)
        )

    def _generation_ended(self, ev: GenerationEnded) -> None:
        drive = self._drives.get(ev.dialog_id or "")
        if drive is None or drive.generation is None:
            return
        span, drive.generation = drive.generation, None
        span.set_attribute(FINISH_REASONS, [ev.finish_reason])
        if ev.input_tokens is not None:
            span.set_attribute(INPUT_TOKENS, ev.input_tokens)
        if ev.output_tokens is not None:
            span.set_attribute(OUTPUT_TOKENS, ev.output_tokens)
        if ev.cost_usd is not None:
            span.set_attribute("mindloop.usage.cost_usd", ev.cost_usd)
        span.set_attribute("mindloop.generation.tool_calls", ev.tool_calls)
        if ev.finish_reason == "error":
            span.set_attribute(ERROR_TYPE, "_OTHER")
            span.set_status(Status(StatusCode.ERROR, drive.error or "the generation failed"))
        if self._capture:
            parts = []
            if drive.thinking:
                parts.append({"type": "reasoning", "content": "".join(drive.thinking)})
            if drive.text:
                parts.append({"type": "text", "content": "".join(drive.text)})
            message = {"role": "assistant", "parts": parts, "finish_reason": ev.finish_reason}
            span.set_attribute(OUTPUT_MESSAGES, json.dumps([message], ensure_ascii=False))
            drive.text.clear()
            drive.thinking.clear()
        span.end(_ns(ev.ts))

    # ------------------------------------------------------------------ tools

    def _tool_called(self, ev: ToolCalled) -> None:
        drive = self._drives.get(ev.dialog_id or "")
        attrs: dict[str, Any] = {
            OPERATION: "execute_tool",
            TOOL_NAME: ev.name,
            TOOL_CALL_ID: ev.call_id,
            TOOL_TYPE: "function",
        }
        if drive is not None:
            attrs.update(drive.common)
        if self._capture:
            attrs[TOOL_ARGUMENTS] = ev.arguments
        self._tools[(ev.dialog_id or "", ev.call_id)] = self._tracer.start_span(
            f"execute_tool {ev.name}",
            context=drive.context if drive is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=_ns(ev.ts),
        )

    def _tool_resulted(self, ev: ToolResulted) -> None:
        span = self._tools.pop((ev.dialog_id or "", ev.call_id), None)
        if span is None:
            return
        if ev.is_error:
            span.set_attribute(ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR))
        if self._capture:
            span.set_attribute(TOOL_RESULT, ev.text)
        span.end(_ns(ev.ts))

    # ------------------------------------------------------------------ tellasks

    def _tellask_called(self, ev: TellaskCalled) -> None:
        caller = ev.dialog_id or ""
        drive = self._drives.get(caller)
        attrs: dict[str, Any] = {
            "mindloop.tellask.call_type": ev.call_type,
            "mindloop.tellask.side_id": ev.side_id,
        }
        if drive is not None:
            attrs.update(drive.common)
        if self._capture:
            attrs["mindloop.tellask.headline"] = ev.headline
        span = self._tracer.start_span(
            f"tellask {ev.call_type}",
            context=drive.context if drive is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=_ns(ev.ts),
        )
        stale = self._tellasks.pop((caller, ev.side_id), None)
        if stale is not None:
            stale.end(_ns(ev.ts))
        self._tellasks[(caller, ev.side_id)] = span
        self._callers[ev.side_id] = ((caller, ev.side_id), set_span_in_context(span))

    def _tellask_responded(self, ev: TellaskResponded) -> None:
        key = (ev.dialog_id or "", ev.side_id)
        span = self._tellasks.pop(key, None)
        if span is None:
            return
        asking = self._callers.get(ev.side_id)
        if asking is not None and asking[0] == key:  # not a later tellask to the same dialog
            del self._callers[ev.side_id]
        span.add_event("mindloop.reply", {"side_id": ev.side_id}, timestamp=_ns(ev.ts))
        span.end(_ns(ev.ts))

    def _question_asked(self, ev: QuestionAsked) -> None:
        drive = self._drives.get(ev.dialog_id or "")
        attrs: dict[str, Any] = {
            "mindloop.tellask.call_type": "human",
            "mindloop.question.id": ev.question_id,
        }
        if drive is not None:
            attrs.update(drive.common)
        if self._capture:
            attrs["mindloop.tellask.headline"] = ev.headline
            attrs["mindloop.question.body"] = ev.body
        self._questions[ev.question_id] = self._tracer.start_span(
            "tellask human",
            context=drive.context if drive is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=_ns(ev.ts),
        )

    def _question_answered(self, ev: QuestionAnswered) -> None:
        span = self._questions.pop(ev.question_id, None)
        if span is not None:
            span.end(_ns(ev.ts))
