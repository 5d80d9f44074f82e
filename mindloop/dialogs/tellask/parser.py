"""Streaming tellask parser: assistant text in arbitrary chunks → markdown and tellask calls.

Why a stream machine and not a regex over the finished message: the CLI renders a reply
while it streams, and a call can start as soon as its block ends. The machine decides
every line at the earliest moment it can:

- a line is markdown as soon as its first character rules out `!?` (or, inside a code
  fence, at once), and its text is emitted immediately, so the only markdown ever held
  back is a lone `!` at column 0 waiting for its next character;
- a tellask line (`!?` at column 0 outside a fence) is held until its newline (or end of
  input), then becomes one headline or body line of the open block.

So the held-back text is bounded by the current line, work is linear in the input, and the
result (concatenated markdown, calls, call ids) is identical for every chunking. Carriage
returns are kept verbatim, as the anchor does; `\\n` alone ends a line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mindloop.dialogs.tellask.grammar import (
    FENCE_CHARS,
    FENCE_CLOSE_TRAILING_OK,
    FENCE_MAX_INDENT,
    FENCE_MIN_RUN,
    MENTION_SIGIL,
    REASON_CODES,
    TELLASK_PREFIX,
    TellaskErrorCode,
    TellaskErrorReason,
    collect_mentions,
    compute_call_id,
    error_message,
    parse_first_mention,
    parse_session_directive,
)

# --- data models -------------------------------------------------------------------------


class TellaskError(BaseModel):
    """Why a call must not run; the caller's model is shown `code` and `message`."""

    model_config = ConfigDict(frozen=True)

    code: TellaskErrorCode
    reason: TellaskErrorReason
    message: str


class TellaskCall(BaseModel):
    """One tellask block of a message, as written (prefixes stripped, whitespace kept)."""

    model_config = ConfigDict(frozen=True)

    index: int  # 0-based block counter within the message (malformed blocks count too)
    mention: str  # first mention, trailing dots trimmed; "" when malformed
    headline: str  # headline lines, newline-terminated except a last line at end of input
    body: str  # body lines, likewise
    call_id: str  # stable: depends only on mention, headline, body and index
    session: str | None = None  # the `!tellaskSession` slug
    mentions: list[str] = Field(default_factory=list)  # collective targets, first included
    error: TellaskError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class MarkdownEvent(BaseModel):
    """Free text outside tellask blocks (verbatim, newlines included)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["markdown"] = "markdown"
    text: str


class CallStartEvent(BaseModel):
    """A tellask block started (its first `!?` was seen); validation comes at finish."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["call_start"] = "call_start"
    index: int


class CallLineEvent(BaseModel):
    """One complete line of the open block, `!?` stripped, in the role it was given."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["call_line"] = "call_line"
    index: int
    role: Literal["headline", "body"]
    text: str


class CallFinishEvent(BaseModel):
    """The block ended (a non-`!?` line or end of input); the call is complete."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["call_finish"] = "call_finish"
    call: TellaskCall


# Each event carries a literal `kind`, so a list of them (de)serialises unambiguously.
TellaskEvent = MarkdownEvent | CallStartEvent | CallLineEvent | CallFinishEvent


class ParsedMessage(BaseModel):
    """A whole message parsed: its markdown (all non-tellask text) and its calls."""

    model_config = ConfigDict(frozen=True)

    markdown: str
    calls: list[TellaskCall]


# --- fence tracking ----------------------------------------------------------------------


@dataclass
class _FenceLine:
    """Classifies one markdown line as a fence opener/closer while its text streams by.

    Holds O(1) state, so a markdown line never needs buffering to be classified."""

    open_char: str | None  # the enclosing fence's char, None outside a fence
    open_len: int
    indent: int = 0
    char: str = ""
    run: int = 0
    state: Literal["indent", "run", "rest", "dead"] = "indent"

    def feed(self, text: str) -> None:
        i = 0
        while i < len(text) and self.state in ("indent", "run"):
            c = text[i]
            if self.state == "indent":
                if c == " ":
                    self.indent += 1
                    if self.indent > FENCE_MAX_INDENT:
                        self.state = "dead"
                elif c in FENCE_CHARS and self.open_char in (None, c):
                    self.char, self.run, self.state = c, 1, "run"
                else:
                    self.state = "dead"
            elif c == self.char:
                self.run += 1
            else:
                self.state = "rest" if self.run >= FENCE_MIN_RUN else "dead"
                break
            i += 1
        if self.state == "rest":
            rest = text[i:]
            if self.open_char is None:
                # A backtick opener's info string may not contain a backtick (inline code).
                if self.char == "`" and "`" in rest:
                    self.state = "dead"
            elif rest.strip(FENCE_CLOSE_TRAILING_OK):
                self.state = "dead"

    def is_marker(self) -> bool:
        """At end of line: does this line open (outside) or close (inside) a fence?"""
        if self.state not in ("run", "rest") or self.run < FENCE_MIN_RUN:
            return False
        return self.open_char is None or self.run >= self.open_len


# --- the stream machine ------------------------------------------------------------------


@dataclass
class _OpenBlock:
    index: int
    lines: int = 0
    in_body: bool = False
    first_line: str = ""
    head: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)


def _build_call(block: _OpenBlock) -> TellaskCall:
    headline, body = "".join(block.head), "".join(block.body)
    mention, reason = parse_first_mention(block.first_line)
    session: str | None = None
    mentions: list[str] = []
    fields: dict[str, str] = {}
    if reason is None:
        session, reason, fields = parse_session_directive(headline)
        mentions = collect_mentions(headline)
    error = None
    if reason is not None:
        message = error_message(reason, block.first_line, **fields)
        error = TellaskError(code=REASON_CODES[reason], reason=reason, message=message)
    return TellaskCall(
        index=block.index,
        mention=mention or "",
        headline=headline,
        body=body,
        call_id=compute_call_id(mention or "", headline, body, block.index),
        session=session,
        mentions=mentions,
        error=error,
    )


class TellaskStreamParser:
    """Feed assistant text in any chunks; get events back from each `feed` and `finish`.

    One parser per message. Events come in input order; markdown may be split differently
    for different chunkings, everything else is chunking-independent."""

    def __init__(self) -> None:
        self._events: list[TellaskEvent] = []
        self._markdown: list[str] = []  # markdown of this feed not yet wrapped in an event
        self._kind: Literal["markdown", "call"] | None = None  # None: at an undecided line start
        self._bang = False  # a `!` at column 0 waits for its next character
        self._line: list[str] = []  # the current tellask line, `!?` stripped
        self._line_chars = 0
        self._fence_char: str | None = None
        self._fence_len = 0
        self._fence_line: _FenceLine | None = None
        self._block: _OpenBlock | None = None
        self._next_index = 0
        self._calls: list[TellaskCall] = []
        self._finished = False

    @property
    def buffered_chars(self) -> int:
        """Characters received but not yet reflected in any event (at most one line)."""
        return self._line_chars + (1 if self._bang else 0)

    @property
    def calls(self) -> list[TellaskCall]:
        """The calls finished so far, in order."""
        return list(self._calls)

    def feed(self, chunk: str) -> list[TellaskEvent]:
        if self._finished:
            raise RuntimeError("TellaskStreamParser.feed() after finish()")
        pos, size = 0, len(chunk)
        while pos < size:
            if self._kind is None:
                pos = self._decide_line(chunk, pos)
                continue
            newline = chunk.find("\n", pos)
            end = size if newline < 0 else newline + 1
            self._take(chunk[pos:end])
            pos = end
            if newline >= 0:
                self._end_line()
        return self._drain()

    def finish(self) -> list[TellaskEvent]:
        """End of input: a pending `!` is markdown, an unterminated line ends, and so does
        the open block."""
        if self._finished:
            raise RuntimeError("TellaskStreamParser.finish() called twice")
        self._finished = True
        if self._bang:
            self._bang = False
            self._start_markdown_line()
            self._take("!")
        if self._kind is not None:
            self._end_line()
        self._close_block()
        return self._drain()

    # -- line decisions --

    def _decide_line(self, chunk: str, pos: int) -> int:
        """At a line start: decide markdown vs tellask, consuming what the decision used."""
        char = chunk[pos]
        if self._bang:
            self._bang = False
            if char == TELLASK_PREFIX[1]:
                self._start_call_line()
                return pos + 1
            self._start_markdown_line()
            self._take(TELLASK_PREFIX[0])
            return pos
        if self._fence_char is None and char == TELLASK_PREFIX[0]:
            self._bang = True
            return pos + 1
        self._start_markdown_line()
        return pos

    def _start_markdown_line(self) -> None:
        self._close_block()
        self._kind = "markdown"
        self._fence_line = _FenceLine(self._fence_char, self._fence_len)

    def _start_call_line(self) -> None:
        if self._block is None:
            self._flush_markdown()
            self._block = _OpenBlock(index=self._next_index)
            self._next_index += 1
            self._events.append(CallStartEvent(index=self._block.index))
        self._kind = "call"

    def _take(self, text: str) -> None:
        if self._kind == "markdown":
            self._markdown.append(text)
            assert self._fence_line is not None
            self._fence_line.feed(text)
        else:
            self._line.append(text)
            self._line_chars += len(text)

    def _end_line(self) -> None:
        if self._kind == "markdown":
            fence = self._fence_line
            assert fence is not None
            if fence.is_marker():
                if self._fence_char is None:
                    self._fence_char, self._fence_len = fence.char, fence.run
                else:
                    self._fence_char, self._fence_len = None, 0
            self._fence_line = None
        elif self._kind == "call":
            text = "".join(self._line)
            self._line, self._line_chars = [], 0
            self._add_call_line(text)
        self._kind = None

    def _add_call_line(self, text: str) -> None:
        block = self._block
        assert block is not None
        if block.lines == 0:
            block.first_line = text
            role: Literal["headline", "body"] = "headline"
        elif block.in_body or not text.startswith(MENTION_SIGIL):
            block.in_body = True
            role = "body"
        else:
            role = "headline"
        block.lines += 1
        (block.head if role == "headline" else block.body).append(text)
        self._events.append(CallLineEvent(index=block.index, role=role, text=text))

    def _close_block(self) -> None:
        if self._block is None:
            return
        call = _build_call(self._block)
        self._block = None
        self._calls.append(call)
        self._events.append(CallFinishEvent(call=call))

    def _flush_markdown(self) -> None:
        if self._markdown:
            self._events.append(MarkdownEvent(text="".join(self._markdown)))
            self._markdown = []

    def _drain(self) -> list[TellaskEvent]:
        self._flush_markdown()
        events, self._events = self._events, []
        return events


def parse_message(text: str) -> ParsedMessage:
    """Parse a complete message (the stream parser fed once)."""
    parser = TellaskStreamParser()
    markdown = [
        e.text for e in [*parser.feed(text), *parser.finish()] if isinstance(e, MarkdownEvent)
    ]
    return ParsedMessage(markdown="".join(markdown), calls=parser.calls)
