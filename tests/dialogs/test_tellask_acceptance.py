"""Acceptance statements 1–11 and 53 of reference/dominds.md §21 (tellask parsing), and
the worked examples at the end of §5, with their exact inputs and outputs."""

from __future__ import annotations

import hashlib
import random

from mindloop.dialogs.routing import RouteKind, route_message
from mindloop.dialogs.tellask import (
    CallFinishEvent,
    CallLineEvent,
    CallStartEvent,
    MarkdownEvent,
    TellaskCall,
    TellaskEvent,
    TellaskStreamParser,
    parse_message,
)


def _feed_sizes(text: str, sizes: list[int]) -> list[TellaskEvent]:
    parser = TellaskStreamParser()
    events: list[TellaskEvent] = []
    pos, i = 0, 0
    while pos < len(text):
        step = sizes[i % len(sizes)]
        events += parser.feed(text[pos : pos + step])
        pos, i = pos + step, i + 1
    return events + parser.finish()


def _canonical(events: list[TellaskEvent]) -> list[TellaskEvent]:
    """Adjacent markdown events merged: the only chunking-dependent part of the stream."""
    out: list[TellaskEvent] = []
    for event in events:
        if isinstance(event, MarkdownEvent) and out and isinstance(out[-1], MarkdownEvent):
            out[-1] = MarkdownEvent(text=out[-1].text + event.text)
        else:
            out.append(event)
    return out


def _route(calls: list[TellaskCall]) -> list[RouteKind]:
    routes = route_message(
        list(calls),
        caller_member="tester",
        caller_is_root=True,
        members=["tester", "pangu"],
        fbr_effort=3,
    )
    return [r.kind for r in routes]


def test_1_only_column_zero_bang_question_starts_a_tellask_line() -> None:
    for text in ["x `!?@a`\n", "  !?@x\n", "\t!?@x\n", "say !?@pangu now\n"]:
        parsed = parse_message(text)
        assert parsed.calls == []
        assert parsed.markdown == text


def test_2_markdown_call_markdown() -> None:
    text = "before\n!?@pangu do\n!?body 1\n!?body 2\nafter\n"
    parsed = parse_message(text)
    assert parsed.markdown == "before\nafter\n"
    [call] = parsed.calls
    assert (call.mention, call.headline, call.body) == ("pangu", "@pangu do\n", "body 1\nbody 2\n")
    assert call.error is None
    events = _canonical(_feed_sizes(text, [3]))
    assert events == [
        MarkdownEvent(text="before\n"),
        CallStartEvent(index=0),
        CallLineEvent(index=0, role="headline", text="@pangu do\n"),
        CallLineEvent(index=0, role="body", text="body 1\n"),
        CallLineEvent(index=0, role="body", text="body 2\n"),
        CallFinishEvent(call=call),
        MarkdownEvent(text="after\n"),
    ]


def test_3_headline_extends_over_following_mention_lines() -> None:
    [call] = parse_message("!?@pangu first\n!?@ more\n!?body\n").calls
    assert call.headline == "@pangu first\n@ more\n"
    assert call.body == "body\n"
    assert call.mention == "pangu"


def test_4_after_the_body_starts_every_line_is_body() -> None:
    [call] = parse_message("!?@pangu h\n!?b\n!?@still body\n").calls
    assert call.headline == "@pangu h\n"
    assert call.body == "b\n@still body\n"


def test_5_non_tellask_line_separates_two_calls() -> None:
    text = "!?@a one\nseparator\n!?@b two\n"
    events = _canonical(_feed_sizes(text, [1]))
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "CallStartEvent",
        "CallLineEvent",
        "CallFinishEvent",
        "MarkdownEvent",
        "CallStartEvent",
        "CallLineEvent",
        "CallFinishEvent",
    ]
    assert events[3] == MarkdownEvent(text="separator\n")
    parsed = parse_message(text)
    assert [(c.index, c.mention, c.headline) for c in parsed.calls] == [
        (0, "a", "@a one\n"),
        (1, "b", "@b two\n"),
    ]


def test_6_malformed_blocks_fail_and_create_nothing() -> None:
    [missing] = parse_message("!?hello\n!?body\n").calls
    [invalid] = parse_message("!?@.\n!?body\n").calls
    assert missing.error is not None and invalid.error is not None
    assert missing.error.code == "ERR_MALFORMED_TELLASK"
    assert missing.error.reason == "missing_mention_prefix"
    assert (missing.headline, missing.body) == ("hello\n", "body\n")
    assert invalid.error.code == "ERR_MALFORMED_TELLASK"
    assert invalid.error.reason == "invalid_mention_id"
    assert (invalid.headline, invalid.body) == ("@.\n", "body\n")
    # The routing layer turns them into failed results: no dialog, no question.
    assert _route([missing, invalid]) == [RouteKind.FAIL, RouteKind.FAIL]


def test_7_two_hundred_random_chunkings_agree() -> None:
    text = (
        "Let me get help.\n"
        "!?@pangu Please review src/app.py !tellaskSession review.api\n"
        "!?@ and @alice too\n"
        "!?Focus on error handling;\r\n"
        "!?@not a headline any more\n"
        "!\n"
        "```python\n"
        "!?@pangu inside a fence\n"
        "```\n"
        "!?hello\n"
        "\n"
        "!?@张三. 请帮忙\n"
        "and then\n"
        "!?@human Which database?\n"
        "!?Postgres or SQLite?"
    )
    whole = _canonical(_feed_sizes(text, [len(text)]))
    rng = random.Random(7)
    for _ in range(200):
        sizes = [rng.randint(1, 23) for _ in range(40)]
        assert _canonical(_feed_sizes(text, sizes)) == whole
    calls = [e.call for e in whole if isinstance(e, CallFinishEvent)]
    assert [c.mention for c in calls] == ["pangu", "", "张三", "human"]
    assert len({c.call_id for c in calls}) == 4


def test_8_block_ends_at_end_of_input_and_trailing_dots_are_trimmed() -> None:
    [call] = parse_message("!?@pangu.").calls
    assert call.mention == "pangu"
    assert call.headline == "@pangu."
    [call] = parse_message("intro\n!?@pangu. do it\n!?now").calls
    assert (call.mention, call.headline, call.body) == ("pangu", "@pangu. do it\n", "now")


def test_9_call_id_is_md5_prefix_of_mention_head_body_index() -> None:
    parsed = parse_message("!?@pangu do\n!?body\n\n!?@bob x\n")
    for call, (mention, head, body, index) in zip(
        parsed.calls,
        [("pangu", "@pangu do\n", "body\n", 0), ("bob", "@bob x\n", "", 1)],
        strict=True,
    ):
        payload = f"tellask\n{mention}\n{head}\n{body}\n{index}".encode()
        assert call.call_id == hashlib.md5(payload).hexdigest()[:8]
    # The index takes part: the same block at another position gets another id.
    first = parse_message("!?@pangu do\n").calls[0]
    second = parse_message("!?@x y\n\n!?@pangu do\n").calls[1]
    assert (first.headline, first.body) == (second.headline, second.body)
    assert first.call_id != second.call_id
    # A malformed block hashes an empty mention.
    [bad] = parse_message("!?hello\n").calls
    assert bad.call_id == hashlib.md5(b"tellask\n\nhello\n\n\n0").hexdigest()[:8]


def test_10_session_directive_on_any_headline_line() -> None:
    [call] = parse_message("!?@pangu !tellaskSession env-check\n").calls
    assert (call.mention, call.session, call.error) == ("pangu", "env-check", None)
    [call] = parse_message("!?@pangu hello\n!?@ more !tellaskSession env.check_1\n").calls
    assert call.session == "env.check_1"
    [call] = parse_message("!?@pangu hello\n").calls
    assert call.session is None and call.error is None
    assert _route([call]) == [RouteKind.FRESH]


def test_11_invalid_or_multiple_session_directives_fail() -> None:
    [bad] = parse_message("!?@pangu !tellaskSession 1bad\n!?go\n").calls
    assert bad.error is not None
    assert bad.error.code == "ERR_INVALID_TELLASK_SESSION_DIRECTIVE"
    assert bad.session is None
    [two] = parse_message("!?@pangu !tellaskSession a\n!?@ !tellaskSession b\n!?go\n").calls
    assert two.error is not None
    assert two.error.code == "ERR_MULTIPLE_TELLASK_SESSION_DIRECTIVES"
    assert two.session is None
    assert _route([bad, two]) == [RouteKind.FAIL, RouteKind.FAIL]


def test_53_tellask_inside_a_fence_is_markdown() -> None:
    for fence in ["```", "~~~", "````", "```python", "~~~~ text", "   ```"]:
        text = f"look:\n{fence}\n!?@pangu x\n!?body\n{fence.strip().split()[0]}\nend\n"
        parsed = parse_message(text)
        assert parsed.calls == [], fence
        assert parsed.markdown == text


def test_section5_collective_headline_is_one_call() -> None:
    [call] = parse_message("!?@alice review\n!?@bob too\n").calls
    assert call.headline == "@alice review\n@bob too\n"
    assert call.mentions == ["alice", "bob"]


def test_section5_session_slug_with_dot_and_underscore() -> None:
    [call] = parse_message("!?@pangu !tellaskSession env.check_1\n!?go\n").calls
    assert (call.session, call.body) == ("env.check_1", "go\n")


def test_section5_bare_prefix_is_an_empty_body_line() -> None:
    [call] = parse_message("!?@pangu\n!?\n!?step 2\n").calls
    assert (call.headline, call.body) == ("@pangu\n", "\nstep 2\n")
