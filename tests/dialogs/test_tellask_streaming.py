"""Streaming behaviour: chunking invariance (hypothesis), nothing lost, agreement with a
line-by-line reference reading of the grammar, early emission, and bounded buffering."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.dialogs.tellask import (
    CallFinishEvent,
    CallLineEvent,
    CallStartEvent,
    MarkdownEvent,
    TellaskEvent,
    TellaskStreamParser,
    parse_message,
)

# --- helpers -----------------------------------------------------------------------------


def _feed(text: str, sizes: list[int]) -> list[TellaskEvent]:
    parser = TellaskStreamParser()
    events: list[TellaskEvent] = []
    pos, i = 0, 0
    while pos < len(text):
        step = sizes[i % len(sizes)]
        events += parser.feed(text[pos : pos + step])
        pos, i = pos + step, i + 1
    return events + parser.finish()


def _canonical(events: list[TellaskEvent]) -> list[TellaskEvent]:
    out: list[TellaskEvent] = []
    for event in events:
        if isinstance(event, MarkdownEvent) and out and isinstance(out[-1], MarkdownEvent):
            out[-1] = MarkdownEvent(text=out[-1].text + event.text)
        else:
            out.append(event)
    return out


def _reconstruct(events: list[TellaskEvent]) -> str:
    parts = []
    for event in events:
        if isinstance(event, MarkdownEvent):
            parts.append(event.text)
        elif isinstance(event, CallLineEvent):
            parts.append("!?" + event.text)
    return "".join(parts)


def _reference(text: str) -> tuple[str, list[tuple[str, str]]]:
    """A plain line-by-line reading of §5 plus the fence decision, as an oracle."""
    pieces = text.split("\n")
    lines = [p + "\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    markdown: list[str] = []
    blocks: list[dict[str, list[str]]] = []
    block: dict[str, list[str]] | None = None
    fence: tuple[str, int] | None = None
    for line in lines:
        if fence is None and line.startswith("!?"):
            rest = line[2:]
            if block is None:
                block = {"head": [], "body": []}
                blocks.append(block)
            if block["head"] and (block["body"] or not rest.startswith("@")):
                block["body"].append(rest)
            else:
                block["head"].append(rest)
            continue
        block = None
        markdown.append(line)
        content = line.removesuffix("\n")
        if fence is None:
            m = re.match(r" {0,3}(`{3,}|~{3,})(.*)", content)
            if m and not (m[1][0] == "`" and "`" in m[2]):
                fence = (m[1][0], len(m[1]))
        else:
            m = re.fullmatch(r" {0,3}(`+|~+)[ \t\r]*", content)
            if m and m[1][0] == fence[0] and len(m[1]) >= fence[1]:
                fence = None
    return "".join(markdown), [("".join(b["head"]), "".join(b["body"])) for b in blocks]


# --- message generator -------------------------------------------------------------------

_free = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\n"),
    max_size=12,
)
_ids = st.sampled_from(
    ["pangu", "a", "alice", "bob", "张三", "ñandú", "x١٢", "a.b", "t-1", "x_y", ".", "", "p."]
)
_markdown_line = st.one_of(
    _free,
    st.sampled_from(["!", "", "x `!?@a`", "  !?@x", "!x", "!!?", "hello !?@bob", "?", "\r"]),
)
_tellask_line = st.one_of(
    st.builds(lambda i, r: f"!?@{i}{r}", _ids, _free),
    st.builds(lambda r: "!?" + r, _free),
    st.sampled_from(
        [
            "!?",
            "!?body",
            "!?@",
            "!?```",
            "!?@pangu !tellaskSession env.check_1",
            "!?@pangu !tellaskSession 1bad",
            "!?@ !tellaskSession other",
            "!?@alice @bob `@carol` review",
        ]
    ),
)
_fence_line = st.sampled_from(
    ["```", "```py", "~~~", "~~~~", "````", "   ```", "    ```", "``` a`b", "~~~ x`y", "```  "]
)
_line = st.one_of(_markdown_line, _tellask_line, _tellask_line, _fence_line)
_fence_heavy_line = st.one_of(_fence_line, st.sampled_from(["!?@a", "!?b", "x"]))


@st.composite
def messages(draw: st.DrawFn, line: st.SearchStrategy[str] = _line) -> str:
    endings = st.sampled_from(["\n", "\r\n"])
    lines, drop_final = draw(
        st.tuples(st.lists(st.tuples(line, endings), max_size=30), st.booleans())
    )
    text = "".join(content + end for content, end in lines)
    if lines and drop_final:
        text = text.removesuffix(lines[-1][1])  # no final newline
    return text


_sizes = st.lists(st.integers(min_value=1, max_value=23), min_size=1, max_size=50)


# --- properties --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.one_of(messages(), messages(_fence_heavy_line)), _sizes)
def test_any_chunking_gives_the_same_result(text: str, sizes: list[int]) -> None:
    whole = _canonical(_feed(text, [max(1, len(text))]))
    assert _canonical(_feed(text, sizes)) == whole
    assert _canonical(_feed(text, [1])) == whole


@settings(max_examples=300, deadline=None)
@given(messages())
def test_nothing_is_lost(text: str) -> None:
    events = _feed(text, [5])
    assert _reconstruct(events) == text
    parsed = parse_message(text)
    call_newlines = sum(c.headline.count("\n") + c.body.count("\n") for c in parsed.calls)
    assert parsed.markdown.count("\n") + call_newlines == text.count("\n")


@settings(max_examples=300, deadline=None)
@given(st.one_of(messages(), messages(_fence_heavy_line)))
def test_agrees_with_the_line_by_line_reading(text: str) -> None:
    parsed = parse_message(text)
    markdown, blocks = _reference(text)
    assert parsed.markdown == markdown
    assert [(c.headline, c.body) for c in parsed.calls] == blocks
    assert [c.index for c in parsed.calls] == list(range(len(blocks)))


@settings(max_examples=200, deadline=None)
@given(messages(), _sizes)
def test_call_ids_are_stable_and_follow_the_formula(text: str, sizes: list[int]) -> None:
    first = parse_message(text).calls
    streamed = [e.call for e in _feed(text, sizes) if isinstance(e, CallFinishEvent)]
    assert [c.call_id for c in first] == [c.call_id for c in streamed]
    for call in first:
        payload = f"tellask\n{call.mention}\n{call.headline}\n{call.body}\n{call.index}"
        digest = hashlib.md5(payload.encode("utf-8", "surrogatepass")).hexdigest()
        assert call.call_id == digest[:8]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_markdown_line, _tellask_line), max_size=20))
def test_everything_inside_a_fence_is_markdown(lines: list[str]) -> None:
    text = "intro\n~~~~\n" + "".join(line + "\n" for line in lines) + "~~~~\n"
    parsed = parse_message(text)
    assert parsed.calls == []
    assert parsed.markdown == text


@settings(max_examples=200, deadline=None)
@given(messages(), _sizes)
def test_every_block_opens_then_lines_then_finishes(text: str, sizes: list[int]) -> None:
    open_index: int | None = None
    seen = 0
    for event in _feed(text, sizes):
        if isinstance(event, CallStartEvent):
            assert open_index is None and event.index == seen
            open_index = event.index
        elif isinstance(event, CallLineEvent):
            assert event.index == open_index
        elif isinstance(event, CallFinishEvent):
            assert event.call.index == open_index
            open_index, seen = None, seen + 1
        else:
            assert open_index is None
    assert open_index is None


# --- early emission ----------------------------------------------------------------------


def test_markdown_is_emitted_as_soon_as_the_line_is_decided() -> None:
    parser = TellaskStreamParser()
    assert parser.feed("hello wor") == [MarkdownEvent(text="hello wor")]
    assert parser.feed("ld\n!") == [MarkdownEvent(text="ld\n")]
    assert parser.buffered_chars == 1
    assert parser.feed("x") == [MarkdownEvent(text="!x")]
    assert parser.buffered_chars == 0
    assert parser.finish() == []


def test_a_block_finishes_when_the_next_line_is_known_not_to_be_tellask() -> None:
    parser = TellaskStreamParser()
    assert parser.feed("!") == []
    assert parser.feed("?") == [CallStartEvent(index=0)]
    assert parser.feed("@a x") == []
    assert parser.buffered_chars == 4
    assert parser.feed("\n") == [CallLineEvent(index=0, role="headline", text="@a x\n")]
    assert parser.feed("!") == []  # might still be `!?`
    events = parser.feed("y")
    assert [type(e) for e in events] == [CallFinishEvent, MarkdownEvent]
    assert events[1] == MarkdownEvent(text="!y")


def test_end_of_input_closes_an_open_block_and_a_pending_bang() -> None:
    parser = TellaskStreamParser()
    parser.feed("!?@a x\n!?body")
    events = parser.finish()
    assert [type(e) for e in events] == [CallLineEvent, CallFinishEvent]
    assert parser.calls[0].body == "body"
    parser = TellaskStreamParser()
    parser.feed("!?@a x\n!")
    events = parser.finish()
    assert [type(e) for e in events] == [CallFinishEvent, MarkdownEvent]


def test_feed_after_finish_is_refused() -> None:
    parser = TellaskStreamParser()
    parser.finish()
    try:
        parser.feed("x")
    except RuntimeError as err:
        assert "after finish" in str(err)
    else:
        raise AssertionError("feed after finish was accepted")


# --- linear work: buffering bounded by the current line ----------------------------------

_UNIT = (
    "Plain markdown line with some words in it.\n"
    "!?@pangu please look at this !tellaskSession perf.run\n"
    "!?@ and @alice too\n"
    "!?body line one\n"
    "!?body line two with @bob\n"
    "\n"
    "```python\n"
    "!?@pangu fenced, not a call\n"
    "```\n"
    "!not a tellask\n"
)


def test_a_megabyte_in_ten_char_chunks_buffers_at_most_one_line() -> None:
    text = _UNIT * (1_000_000 // len(_UNIT) + 1)
    longest = max(len(line) for line in text.splitlines(keepends=True))
    parser = TellaskStreamParser()
    markdown: list[str] = []
    most = 0
    for pos in range(0, len(text), 10):
        for event in parser.feed(text[pos : pos + 10]):
            if isinstance(event, MarkdownEvent):
                markdown.append(event.text)
        most = max(most, parser.buffered_chars)
    parser.finish()
    assert most <= longest
    expected = parse_message(text)
    assert "".join(markdown) == expected.markdown
    assert [c.call_id for c in parser.calls] == [c.call_id for c in expected.calls]
    assert len(parser.calls) == text.count("!?@pangu please")


def test_a_megabyte_markdown_line_is_streamed_not_held() -> None:
    parser = TellaskStreamParser()
    chunk = "0123456789"
    total = 0
    for _ in range(100_000):
        for event in parser.feed(chunk):
            assert isinstance(event, MarkdownEvent)
            total += len(event.text)
        assert parser.buffered_chars == 0
    parser.finish()
    assert total == 1_000_000


def test_a_megabyte_tellask_line_is_held_only_as_that_line() -> None:
    parser = TellaskStreamParser()
    parser.feed("!?@pangu go\n!?")
    for _ in range(100_000):
        assert parser.feed("abcdefghij") == []
    assert parser.buffered_chars == 1_000_000
    parser.feed("\n")
    assert parser.buffered_chars == 0
    parser.finish()
    [call] = parser.calls
    assert len(call.body) == 1_000_001
