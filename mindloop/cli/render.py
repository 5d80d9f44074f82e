"""Renders runtime events as a compact live transcript in the terminal.

Assistant text streams as it comes; tool calls, results, errors, notes and provider
retries take one line each; side dialogs are indented by depth. While a generation has
produced nothing visible yet, a live status line (`status.WorkingStatus`, terminals only)
says who works on which model and for how long. With `tag_lines` (`run --watch`, where
many trees interleave) every line starts with its dialog id and member instead.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from mindloop.cli.status import WorkingStatus
from mindloop.events.bus import EventBus
from mindloop.events.types import (
    ApprovalRequested,
    ApprovalResolved,
    DialogCreated,
    DriveEnded,
    DriveStarted,
    ErrorRaised,
    Event,
    GenerationEnded,
    GenerationRestarted,
    GenerationStarted,
    NoteAdded,
    ProviderRetried,
    QuestionAnswered,
    QuestionAsked,
    TaskdocChanged,
    TellaskResponded,
    TextChunk,
    ThinkingChunk,
    ToolCalled,
    ToolResulted,
    WaitReminded,
    WaitResolved,
)
from mindloop.store import DialogRecord

_PREVIEW = 160
# How long nothing must run before `run --watch` says it is idle.
IDLE_AFTER = 2.0


def _one_line(text: str, limit: int = _PREVIEW) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def retry_line(ev: ProviderRetried) -> str:
    """`↻ retry 2 of 5 in 1.2s · 127.0.0.1:8000 · HTTP 503 · <the error>` (plain text)."""
    parts = [f"↻ retry {ev.attempt} of {ev.max_attempts} in {ev.delay:.1f}s"]
    parts.append(ev.host or f"provider {ev.provider}")
    if ev.status is not None:
        parts.append(f"HTTP {ev.status}")
    parts.append(_one_line(ev.error, 200))
    return " · ".join(parts)


class TranscriptRenderer:
    """Subscribes to a bus and prints assistant text as it streams, tool calls and their
    results on one line each, and errors. Side dialogs are indented by depth."""

    def __init__(
        self,
        console: Console,
        *,
        show_thinking: bool = False,
        out: TextIO | None = None,
        tag_lines: bool = False,
        status: WorkingStatus | None = None,
    ) -> None:
        self.console = console
        self.out = out or sys.stdout
        self.show_thinking = show_thinking
        self.tag_lines = tag_lines
        self.status = status or WorkingStatus(console)
        self._in_text: str | None = None  # the stream being written: `text:<id>` …
        self._depth: dict[str, int] = {}
        self._names: dict[str, str] = {}
        self._line_start = True  # the streamed text's cursor is at the start of a line
        self._driving: set[str] = set()
        self._quiet_since: float | None = time.monotonic()  # nothing runs since then
        self._idle_told = False

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

    # ------------------------------------------------------------------ line starts

    def _indent(self, did: str | None) -> str:
        return "  " * self._depth.get(did or "", 0)

    def _tag(self, did: str | None) -> str:
        """`<dialog id> @<member>: ` in tagged mode, else nothing."""
        if not self.tag_lines or not did:
            return ""
        return f"{did} @{self._names.get(did, '?')}: "

    def _lead(self, did: str | None) -> str:
        """What a printed (markup) line of `did` starts with."""
        tag = self._tag(did)
        return (f"[dim]{escape(tag)}[/]" if tag else "") + self._indent(did)

    # ------------------------------------------------------------------ streamed text

    def _end_text(self) -> None:
        if self._in_text is not None:
            if not self._line_start:
                self.out.write("\n")
            self.out.flush()
            self._in_text = None
            self._line_start = True

    def _write_text(self, lead: str, text: str) -> None:
        """Streamed text, every line led like its dialog (a nested reply's tellask lines
        stay under it); the lead is written lazily, when a line gets text."""
        for i, part in enumerate(text.split("\n")):
            if i:
                self.out.write("\n")
                self._line_start = True
            if part:
                if self._line_start:
                    self.out.write(lead)
                    self._line_start = False
                self.out.write(part)

    def _stream(self, did: str | None, text: str, *, thinking: bool = False) -> None:
        """Streamed text or (with `--thinking`) thinking of `did`, after a label line
        start (`@dev: `, `@dev (thinking): `) when the stream changes."""
        key = did or ""
        stream = f"{'thinking' if thinking else 'text'}:{key}"
        if self._in_text != stream:
            self._end_text()
            self.status.hide()
            who = self._names.get(key, "assistant")
            label = f"@{who} (thinking): " if thinking else f"@{who}: "
            lead = self._tag(did) + self._indent(did)
            if self.tag_lines:
                label = "(thinking) " if thinking else ""
            self.out.write(lead + label)
            self._in_text = stream
            self._line_start = False
        self.status.stop(key)
        self._write_text(self._tag(did) + self._indent(did), text)
        self.out.flush()

    # ------------------------------------------------------------------ events

    def handle(self, ev: Event) -> None:
        did = ev.dialog_id
        if isinstance(ev, TextChunk):
            self._stream(did, ev.text)
            return
        if isinstance(ev, ThinkingChunk):
            if self.show_thinking:
                self._stream(did, ev.text, thinking=True)
            else:
                self.status.set_doing(did or "", "is thinking")
            return
        self._track(ev)
        line = self._line(ev)
        if line is None:  # nothing to print: the status lines stay as they are
            if isinstance(ev, GenerationEnded | DriveEnded) and self._streaming(did):
                self._end_text()  # its text is complete: the line ends
            self._show_status()
            return
        self._end_text()
        self.status.hide()
        self.console.print(line)
        self._show_status()

    def _track(self, ev: Event) -> None:
        """Who works, and whether anything runs at all (for the status lines)."""
        key = ev.dialog_id or ""
        match ev:
            case GenerationStarted(member=member, model=model):
                self._names.setdefault(key, member)  # a dialog another process created
                self.status.start(key, member, model, self._tag(key) + self._indent(key))
            case ToolCalled() | GenerationEnded() | ErrorRaised():
                self.status.stop(key)
            case ProviderRetried(attempt=attempt, max_attempts=most, delay=delay):
                self.status.retrying(key, attempt, most, delay)
            case DriveStarted(member=member):
                self._names.setdefault(key, member)
                self._driving.add(key)
            case DriveEnded():
                self._driving.discard(key)
                self.status.stop(key)
            case _:
                pass
        busy = bool(self._driving)
        if busy:
            self._quiet_since = None
            self._idle_told = False
            self.status.set_idle(None)
        elif self._quiet_since is None:
            self._quiet_since = time.monotonic()

    def _streaming(self, did: str | None) -> bool:
        return self._in_text is not None and self._in_text.split(":", 1)[1] == (did or "")

    def _show_status(self) -> None:
        if self._in_text is None:
            self.status.show()

    def _line(self, ev: Event) -> str | None:
        """The transcript line (rich markup) of an event, or None for one not shown."""
        did = ev.dialog_id
        lead = self._lead(did)
        match ev:
            case DialogCreated(parent_id=parent, member=member, kind=kind, session=session):
                depth = self._depth.get(parent, -1) + 1 if parent else 0
                self.set_dialog(did or "", member, depth)
                if not parent:
                    return None
                what = "FBR side dialog (tool-less)" if kind == "fbr" else "side dialog"
                sess = f" session {session}" if session else ""
                return f"{self._lead(did)}[cyan]↳ {what} {did} @{escape(member)}{escape(sess)}[/]"
            case ToolCalled(name=name, arguments=arguments):
                return f"{lead}[yellow]⚙ {escape(name)}[/] {escape(_one_line(arguments, 100))}"
            case ToolResulted(text=text, is_error=is_error):
                mark = "[red]✗[/]" if is_error else "[green]✓[/]"
                return f"{lead}  {mark} {escape(_one_line(text))}"
            case ErrorRaised(message=message):
                return f"{lead}[red]error:[/] {escape(message)}"
            case NoteAdded(text=text):
                return f"{lead}[magenta]{escape(text)}[/]"
            case GenerationRestarted(attempt=attempt, reason=reason):
                return f"{lead}[dim]… retrying generation (attempt {attempt}): {escape(reason)}[/]"
            case ProviderRetried():
                return f"{lead}[yellow]{escape(retry_line(ev))}[/]"
            case TaskdocChanged(section=section):
                return f"{lead}[blue]✎ Taskdoc section {escape(section)} changed[/]"
            case TellaskResponded(side_id=side, call_type=call_type):
                what = "answer" if call_type == "tellask_back" else "reply"
                who = escape(self._names.get(side, "?"))
                return f"{lead}[cyan]← {what} from @{who} ({side}) delivered[/]"
            case QuestionAsked(question_id=qid, headline=headline):
                return (
                    f"{lead}[cyan]? question {qid} for the human:[/] {escape(_one_line(headline))}"
                )
            case QuestionAnswered(question_id=qid):
                return f"{lead}[cyan]✓ question {qid} answered[/]"
            case ApprovalRequested(approval_id=aid, tool=tool):
                return f"{lead}[cyan]? approval {aid}: {escape(tool)} waits for the human[/]"
            case ApprovalResolved(approval_id=aid, decision=decision, by=by):
                done = "rejected" if decision == "reject" else "approved"
                return f"{lead}[cyan]✓ approval {aid} {done} by {escape(by)}[/]"
            case WaitReminded(text=text):
                return f"{lead}[yellow]⏰ {escape(text)}[/]"
            case WaitResolved(status="expired", kind=kind, detail=detail):
                return f"{lead}[yellow]⏱ {kind} wait timed out: {escape(detail or '')}[/]"
            case _:
                return None

    # ------------------------------------------------------------------ watching

    def tick(self, now: float | None = None) -> None:
        """Called every so often by `run --watch`: once nothing has run for `IDLE_AFTER`
        seconds, say so — a live idle line on a terminal, one line otherwise (once per
        quiet spell)."""
        now = time.monotonic() if now is None else now
        since = self._quiet_since
        if since is None or self._idle_told or now - since < IDLE_AFTER:
            return
        self._idle_told = True
        if self.status.enabled:
            self.status.set_idle(since)
            self._show_status()
        else:
            self._end_text()
            self.console.print(
                f"[dim]idle since {time.strftime('%H:%M:%S')}: watching for work (Ctrl-C stops)[/]"
            )

    def close(self) -> None:
        self.status.hide()
        self._end_text()
