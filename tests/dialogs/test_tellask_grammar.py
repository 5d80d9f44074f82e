"""Grammar details of §5 beyond the acceptance statements: line kinds, mention ids,
collective mentions, session slugs, fences, CRLF, and the human error messages."""

from __future__ import annotations

import pytest

from mindloop.dialogs.tellask import TellaskErrorCode, TellaskErrorReason, parse_message


@pytest.mark.parametrize(
    "text",
    ["!\n", "!", "!x\n", "!!?@a\n", "? !?@a\n", "\n\n", "!\r\n", " !?@a", "\r!?@a\n"],
)
def test_lines_that_are_markdown(text: str) -> None:
    parsed = parse_message(text)
    assert parsed.calls == []
    assert parsed.markdown == text


@pytest.mark.parametrize(
    ("text", "mention"),
    [
        ("!?@pangu do\n", "pangu"),
        ("!?@pangu.\n", "pangu"),
        ("!?@pangu...!\n", "pangu"),
        ("!?@a.b-c_d x\n", "a.b-c_d"),
        ("!?@张三 请帮忙\n", "张三"),
        ("!?@ñandú.\n", "ñandú"),
        ("!?@x١٢,y\n", "x١٢"),
        ("!?@Ⅻ\n", "Ⅻ"),
        ("!?@pangu`\n", "pangu"),
        ("!?@pangu\r\n", "pangu"),
        ("!?@pangu", "pangu"),
    ],
)
def test_first_mention(text: str, mention: str) -> None:
    [call] = parse_message(text).calls
    assert call.error is None
    assert call.mention == mention


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("!?\n", TellaskErrorReason.MISSING_MENTION_PREFIX),
        ("!?", TellaskErrorReason.MISSING_MENTION_PREFIX),
        ("!? @pangu\n", TellaskErrorReason.MISSING_MENTION_PREFIX),
        ("!?hello @pangu\n", TellaskErrorReason.MISSING_MENTION_PREFIX),
        ("!?@\n", TellaskErrorReason.INVALID_MENTION_ID),
        ("!?@", TellaskErrorReason.INVALID_MENTION_ID),
        ("!?@ pangu\n", TellaskErrorReason.INVALID_MENTION_ID),
        ("!?@...\n", TellaskErrorReason.INVALID_MENTION_ID),
        ("!?@!tellaskSession s\n", TellaskErrorReason.INVALID_MENTION_ID),
    ],
)
def test_malformed_first_lines(text: str, reason: TellaskErrorReason) -> None:
    [call] = parse_message(text).calls
    assert call.error is not None
    assert call.error.code is TellaskErrorCode.MALFORMED
    assert call.error.reason is reason
    assert (call.mention, call.session, call.mentions) == ("", None, [])


def test_malformed_message_says_what_is_wrong_and_how_to_fix_it() -> None:
    [missing] = parse_message("!?hello there\n!?body\n").calls
    assert missing.error is not None
    assert "`!?hello there`" in missing.error.message
    assert "`!?@reviewer" in missing.error.message
    [invalid] = parse_message("!?@.\n").calls
    assert invalid.error is not None
    assert "`!?@.`" in invalid.error.message
    assert "member id" in invalid.error.message
    [long] = parse_message("!?" + "x" * 500 + "\n").calls
    assert long.error is not None and len(long.error.message) < 400


def test_malformed_blocks_count_in_the_index() -> None:
    calls = parse_message("!?hello\n\n!?@a x\n").calls
    assert [(c.index, c.mention) for c in calls] == [(0, ""), (1, "a")]


def test_collective_mentions_in_order_without_duplicates() -> None:
    text = (
        "!?@alice `@bob` mail a@c.com, @carol.\n!?@bob and @alice again, @@dave\n!?body for @eve\n"
    )
    [call] = parse_message(text).calls
    assert call.mentions == ["alice", "bob", "carol", "dave"]


@pytest.mark.parametrize(
    ("headline", "session"),
    [
        ("!?@p !tellaskSession env-check\n", "env-check"),
        ("!?@p !tellaskSession env-check, please\n", "env-check"),
        ("!?@p !tellaskSession a..b\n", "a"),
        ("!?@p !tellaskSession a.\n", "a"),
        ("!?@p !tellaskSession Ab_c.d-1.e\n", "Ab_c.d-1.e"),
        ("!?@p !tellaskSession s1\r\n", "s1"),
        ("!?@p !tellaskSession\tt\n", "t"),
        ("!?@p !tellaskSession same\n!?@ !tellaskSession same\n", "same"),
        ("!?@p x!tellaskSession s\n", None),
        ("!?@p hi\n!?!tellaskSession s\n", None),
        ("!?@p\n!?@ q\n!?b\n!?@ !tellaskSession s\n", None),
        ("!?@p !tellaskSession", None),
    ],
)
def test_session_slug_rules(headline: str, session: str | None) -> None:
    [call] = parse_message(headline).calls
    assert call.error is None
    assert call.session == session


@pytest.mark.parametrize(
    ("headline", "code"),
    [
        ("!?@p !tellaskSession 1bad\n", TellaskErrorCode.INVALID_SESSION),
        ("!?@p !tellaskSession a.1b\n", TellaskErrorCode.INVALID_SESSION),
        ("!?@p !tellaskSession _x\n", TellaskErrorCode.INVALID_SESSION),
        ("!?@p !tellaskSession ok !tellaskSession 2bad\n", TellaskErrorCode.INVALID_SESSION),
        ("!?@p !tellaskSession a !tellaskSession b\n", TellaskErrorCode.MULTIPLE_SESSIONS),
        ("!?@p !tellaskSession a\n!?@ !tellaskSession b\n", TellaskErrorCode.MULTIPLE_SESSIONS),
    ],
)
def test_session_directive_errors(headline: str, code: TellaskErrorCode) -> None:
    [call] = parse_message(headline).calls
    assert call.error is not None
    assert call.error.code is code
    assert call.session is None


def test_session_error_messages_name_the_problem() -> None:
    [bad] = parse_message("!?@p !tellaskSession 1bad\n").calls
    assert bad.error is not None and "`!tellaskSession 1bad`" in bad.error.message
    assert "starts with a letter" in bad.error.message
    [two] = parse_message("!?@p !tellaskSession a !tellaskSession b\n").calls
    assert two.error is not None and "`a`, `b`" in two.error.message


def test_crlf_is_kept_verbatim() -> None:
    parsed = parse_message("hi\r\n!?@pangu do\r\n!?b\r\nafter\r\n")
    [call] = parsed.calls
    assert parsed.markdown == "hi\r\nafter\r\n"
    assert (call.mention, call.headline, call.body) == ("pangu", "@pangu do\r\n", "b\r\n")


@pytest.mark.parametrize(
    ("text", "live"),
    [
        # A tellask block never opens a fence: its fence-like lines are body.
        ("!?@a x\n!?```\n!?@b\n\n!?@c y\n", ["a", "c"]),
        # Only the same char closes, and only with at least the opening length.
        ("````\n```\n!?@a\n````\n!?@b\n", ["b"]),
        ("```\n~~~\n!?@a\n```\n!?@b\n", ["b"]),
        # A closer carries nothing but whitespace after its run.
        ("```\n``` x\n!?@a\n```  \r\n!?@b\n", ["b"]),
        # Four spaces are indented code, not a fence; a tab is not fence indentation.
        ("    ```\n!?@a\n", ["a"]),
        ("\t```\n!?@a\n", ["a"]),
        # A backtick info string with a backtick is inline code, not a fence.
        ("``` a`b\n!?@a\n", ["a"]),
        ("~~~ a`b\n!?@a\n~~~\n!?@b\n", ["b"]),
        # Two fence chars are not a fence.
        ("``\n!?@a\n", ["a"]),
        # An unclosed fence runs to the end of the message.
        ("```\n!?@a\n\n!?@b\n", []),
        # A closing fence may be indented up to three spaces too.
        ("```\n!?@a\n   ```\n!?@b\n", ["b"]),
    ],
)
def test_fences(text: str, live: list[str]) -> None:
    parsed = parse_message(text)
    assert [c.mention for c in parsed.calls] == live
