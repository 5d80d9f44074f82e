"""Renders runtime events as a compact live transcript in the terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from mindloop.events.bus import EventBus
from mindloop.events.types import (
    DialogCreated,
    ErrorRaised,
    Event,
    GenerationRestarted,
    NoteAdded,
    QuestionAnswered,
    QuestionAsked,
    TaskdocChanged,
    TellaskResponded,
    TextChunk,
    ThinkingChunk,
    ToolCalled,
    ToolResulted,
)
from mindloop.store import DialogRecord

_PREVIEW = 160


def _one_line(text: str, limit: int = _PREVIEW) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class TranscriptRenderer:
    """Subscribes to a bus and prints assistant text as it streams, tool calls and their
    results on one line each, and errors. Side dialogs are indented by depth."""

    def __init__(
        self, console: Console, *, show_thinking: bool = False, out: TextIO | None = None
    ) -> None:
        self.console = console
        self.out = out or sys.stdout
        self.show_thinking = show_thinking
        self._in_text: str | None = None
        self._depth: dict[str, int] = {}
        self._names: dict[str, str] = {}
        self._line_start = True  # the streamed text's cursor is at the start of a line

    def attach(self, bus: EventBus) -> None:
        bus.subscribe(self.handle)

    def set_dialog(self, dialog_id: str, member: str, depth: int = 0) -> None:
        self._depth[dialog_id] = depth
        self._names[dialog_id] = member

    def know_dialogs(self, records: Iterable[DialogRecord]) -> None:
        """Register existing dialogs (e.g. a tree resumed by `mindloop run`), each indented
        by its depth below its root."""
        recs = {r.id: r for r in records}

        def depth(rec: DialogRecord) -> int:
            n, seen = 0, {rec.id}
            while rec.parent_id and rec.parent_id in recs and rec.parent_id not in seen:
                rec = recs[rec.parent_id]
                seen.add(rec.id)
                n += 1
            return n

        for rec in recs.values():
            self.set_dialog(rec.id, rec.member, depth(rec))

    def _indent(self, did: str | None) -> str:
        return "  " * self._depth.get(did or "", 0)

    def _end_text(self) -> None:
        if self._in_text is not None:
            if not self._line_start:
                self.out.write("\n")
            self.out.flush()
            self._in_text = None
            self._line_start = True

    def _write_text(self, indent: str, text: str) -> None:
        """Streamed text, every line indented like its dialog (a nested reply's tellask
        lines stay under it); indentation is written lazily, when a line gets text."""
        for i, part in enumerate(text.split("\n")):
            if i:
                self.out.write("\n")
                self._line_start = True
            if part:
                if self._line_start:
                    self.out.write(indent)
                    self._line_start = False
                self.out.write(part)

    def handle(self, ev: Event) -> None:
        did = ev.dialog_id
        ind = self._indent(did)
        if isinstance(ev, TextChunk):
            if self._in_text != did:
                self._end_text()
                who = self._names.get(did or "", "assistant")
                self.out.write(f"{ind}@{who}: ")
                self._in_text = did
                self._line_start = False
            self._write_text(ind, ev.text)
            self.out.flush()
            return
        if isinstance(ev, ThinkingChunk) and not self.show_thinking:
            return
        self._end_text()
        p = self.console.print
        match ev:
            case DialogCreated(parent_id=parent, member=member, kind=kind, session=session):
                depth = self._depth.get(parent, -1) + 1 if parent else 0
                self.set_dialog(did or "", member, depth)
                if parent:
                    what = "FBR side dialog (tool-less)" if kind == "fbr" else "side dialog"
                    sess = f" session {session}" if session else ""
                    p(f"{self._indent(did)}[cyan]↳ {what} {did} @{escape(member)}{escape(sess)}[/]")
            case ToolCalled(name=name, arguments=arguments):
                p(f"{ind}[yellow]⚙ {escape(name)}[/] {escape(_one_line(arguments, 100))}")
            case ToolResulted(text=text, is_error=is_error):
                mark = "[red]✗[/]" if is_error else "[green]✓[/]"
                p(f"{ind}  {mark} {escape(_one_line(text))}")
            case ErrorRaised(message=message):
                p(f"{ind}[red]error:[/] {escape(message)}")
            case NoteAdded(text=text):
                p(f"{ind}[magenta]{escape(text)}[/]")
            case GenerationRestarted(attempt=attempt, reason=reason):
                p(f"{ind}[dim]… retrying generation (attempt {attempt}): {escape(reason)}[/]")
            case TaskdocChanged(section=section):
                p(f"{ind}[blue]✎ Taskdoc section {escape(section)} changed[/]")
            case TellaskResponded(side_id=side, call_type=call_type):
                what = "answer" if call_type == "tellask_back" else "reply"
                who = escape(self._names.get(side, "?"))
                p(f"{ind}[cyan]← {what} from @{who} ({side}) delivered[/]")
            case QuestionAsked(question_id=qid, headline=headline):
                p(f"{ind}[cyan]? question {qid} for the human:[/] {escape(_one_line(headline))}")
            case QuestionAnswered(question_id=qid):
                p(f"{ind}[cyan]✓ question {qid} answered[/]")
            case _:
                pass

    def close(self) -> None:
        self._end_text()
