"""The tellask grammar's rules as data, plus the small pure functions that apply them.

Kept apart from the stream machine so the rules (id charset, slug shape, error codes,
malformed reasons and their human texts) can be read and checked in one place. The rules
follow the anchor (`reference/dominds.md` §5); the fence rule is mindloop decision 1.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from enum import StrEnum
from functools import lru_cache
from typing import Final

# --- lines and blocks --------------------------------------------------------------------

TELLASK_PREFIX: Final = "!?"  # only at column 0; leading whitespace makes a markdown line
MENTION_SIGIL: Final = "@"  # a headline line after the first extends the headline iff `!?@`

# --- mention ids -------------------------------------------------------------------------

# Id characters: ASCII letters and digits, these extras, and any Unicode letter (\p{L}) or
# number (\p{N}), i.e. a code point whose general category starts with one of these.
ID_ASCII_EXTRA: Final = frozenset("_-.")
ID_UNICODE_CATEGORIES: Final = frozenset("LN")
ID_TRAILING_TRIM: Final = "."  # `@pangu.` at the end of a sentence addresses `pangu`

# --- `!tellaskSession <slug>` ----------------------------------------------------------

# Read on any headline line (the headline text, with newlines, is searched as one string).
SESSION_DIRECTIVE_RE: Final = re.compile(r"(^|\s)!tellaskSession\s+(\S+)")
# The slug is cut to its longest prefix of this shape …
SLUG_PREFIX_RE: Final = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]*(?:\.[a-zA-Z0-9_-]+)*")
# … and every dot-separated segment must then start with a letter.
SLUG_SEGMENT_RE: Final = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]*$")

# --- code fences (mindloop decision 1) ---------------------------------------------------

FENCE_CHARS: Final = frozenset("`~")
FENCE_MIN_RUN: Final = 3  # a fence marker is at least three backticks or tildes
FENCE_MAX_INDENT: Final = 3  # spaces allowed before a fence marker (four is indented code)
FENCE_CLOSE_TRAILING_OK: Final = " \t\r\n"  # a closing fence may be followed only by these

# --- a question's fields (`!?@human`, agent-loop §6.2 WAIT_USER_INPUT) -----------------------


class Q4hField(StrEnum):
    """What a body line of a `!?@human` question may set on the question's wait."""

    DEFAULT = "default_assumption"  # assumed (the user told) if no answer comes in time
    OPTIONS = "options"  # the answers offered


# A body line `<label>: <value>` (the label in any case, an ASCII or a full-width colon)
# sets the field; the first line of a field counts. The lines stay in the question's text.
Q4H_FIELD_LABELS: Final[dict[str, Q4hField]] = {
    "default": Q4hField.DEFAULT,
    "默认": Q4hField.DEFAULT,
    "options": Q4hField.OPTIONS,
    "选项": Q4hField.OPTIONS,
}
Q4H_FIELD_RE: Final = re.compile(r"^\s*([^\s:：]+)\s*[:：]\s*(.*?)\s*$")
Q4H_OPTIONS_SEPARATOR: Final = "|"  # `Options: SQLite | PostgreSQL`

# --- errors ------------------------------------------------------------------------------


class TellaskErrorCode(StrEnum):
    """Stable codes a failed call carries; the routing layer shows them to the model."""

    MALFORMED = "ERR_MALFORMED_TELLASK"
    INVALID_SESSION = "ERR_INVALID_TELLASK_SESSION_DIRECTIVE"
    MULTIPLE_SESSIONS = "ERR_MULTIPLE_TELLASK_SESSION_DIRECTIVES"


class TellaskErrorReason(StrEnum):
    """Why a call failed, finer than the code (the first two are the anchor's reasons)."""

    MISSING_MENTION_PREFIX = "missing_mention_prefix"
    INVALID_MENTION_ID = "invalid_mention_id"
    INVALID_SESSION_SLUG = "invalid_session_slug"
    MULTIPLE_SESSION_SLUGS = "multiple_session_slugs"


REASON_CODES: Final[dict[TellaskErrorReason, TellaskErrorCode]] = {
    TellaskErrorReason.MISSING_MENTION_PREFIX: TellaskErrorCode.MALFORMED,
    TellaskErrorReason.INVALID_MENTION_ID: TellaskErrorCode.MALFORMED,
    TellaskErrorReason.INVALID_SESSION_SLUG: TellaskErrorCode.INVALID_SESSION,
    TellaskErrorReason.MULTIPLE_SESSION_SLUGS: TellaskErrorCode.MULTIPLE_SESSIONS,
}

# Human texts: what is wrong, and how to write it correctly. `{first_line}` is the block's
# first line as written (shortened), `{raw}` the offending slug, `{slugs}` the slugs found.
REASON_MESSAGES: Final[dict[TellaskErrorReason, str]] = {
    TellaskErrorReason.MISSING_MENTION_PREFIX: (
        "The first line of a tellask block must start with `!?@<member>`, but this block "
        "starts with `{first_line}`. Put the target right after `!?`, e.g. "
        "`!?@reviewer Please review src/app.py`, and write details on the following `!?` "
        "lines. Nothing was sent."
    ),
    TellaskErrorReason.INVALID_MENTION_ID: (
        "`!?@` must be followed directly by a member id (letters, digits, `_`, `-`, `.`), "
        "but this block starts with `{first_line}`. Write e.g. "
        "`!?@reviewer Please review src/app.py`. Nothing was sent."
    ),
    TellaskErrorReason.INVALID_SESSION_SLUG: (
        "`!tellaskSession {raw}` does not name a valid session: a slug starts with a "
        "letter, uses only letters, digits, `_` and `-`, and each dot-separated part starts "
        "with a letter (e.g. `!tellaskSession env-check` or `!tellaskSession api.review`). "
        "Nothing was sent."
    ),
    TellaskErrorReason.MULTIPLE_SESSION_SLUGS: (
        "The headline names several sessions ({slugs}); a tellask may carry at most one "
        "`!tellaskSession <slug>` (for a collective tellask it applies to every target). "
        "Keep one and send again. Nothing was sent."
    ),
}

FIRST_LINE_PREVIEW_CHARS: Final = 60


# --- functions applying the rules ---------------------------------------------------------


@lru_cache(maxsize=4096)
def _is_unicode_id_char(char: str) -> bool:
    return unicodedata.category(char)[0] in ID_UNICODE_CATEGORIES


def is_id_char(char: str) -> bool:
    """True if `char` (one code point) may appear in a mention id."""
    if char.isascii():
        return char.isalnum() or char in ID_ASCII_EXTRA
    return _is_unicode_id_char(char)


def read_id(text: str, start: int) -> str:
    """The id starting at `start` (possibly empty), trailing dots trimmed."""
    end = start
    while end < len(text) and is_id_char(text[end]):
        end += 1
    return text[start:end].rstrip(ID_TRAILING_TRIM)


def parse_first_mention(first_line: str) -> tuple[str | None, TellaskErrorReason | None]:
    """The first mention of a block from its first line (prefix `!?` already stripped).

    Returns `(mention, None)` or `(None, reason)` for a malformed block."""
    if not first_line.startswith(MENTION_SIGIL):
        return None, TellaskErrorReason.MISSING_MENTION_PREFIX
    mention = read_id(first_line, len(MENTION_SIGIL))
    if not mention:
        return None, TellaskErrorReason.INVALID_MENTION_ID
    return mention, None


def collect_mentions(headline: str) -> list[str]:
    """Every `@id` in the headline that starts it or follows a non-id character, in order,
    without duplicates (the targets of a collective tellask). `a@b` is not a mention; a
    backtick is a non-id character, so `` `@bob` `` is."""
    found: list[str] = []
    pos = headline.find(MENTION_SIGIL)
    while pos >= 0:
        if pos == 0 or not is_id_char(headline[pos - 1]):
            mention = read_id(headline, pos + len(MENTION_SIGIL))
            if mention and mention not in found:
                found.append(mention)
        pos = headline.find(MENTION_SIGIL, pos + 1)
    return found


def _valid_slug(raw: str) -> str | None:
    prefix = SLUG_PREFIX_RE.match(raw)
    slug = prefix.group(0) if prefix else ""
    if slug and all(SLUG_SEGMENT_RE.match(part) for part in slug.split(".")):
        return slug
    return None


def parse_session_directive(
    headline: str,
) -> tuple[str | None, TellaskErrorReason | None, dict[str, str]]:
    """The session slug named by `!tellaskSession` in the headline.

    Returns `(slug_or_None, None, {})` on success (None: no directive), or
    `(None, reason, fields)` where `fields` fill the reason's message. The same slug
    written twice is one slug."""
    slugs: list[str] = []
    for match in SESSION_DIRECTIVE_RE.finditer(headline):
        raw = match.group(2)
        slug = _valid_slug(raw)
        if slug is None:
            return None, TellaskErrorReason.INVALID_SESSION_SLUG, {"raw": raw}
        if slug not in slugs:
            slugs.append(slug)
    if len(slugs) > 1:
        listed = ", ".join(f"`{s}`" for s in slugs)
        return None, TellaskErrorReason.MULTIPLE_SESSION_SLUGS, {"slugs": listed}
    return (slugs[0] if slugs else None), None, {}


def compute_call_id(mention: str, headline: str, body: str, index: int) -> str:
    """First 8 hex chars of md5("tellask\\n<mention>\\n<head>\\n<body>\\n<index>") over UTF-8,
    as the anchor computes it; a malformed call hashes an empty mention."""
    payload = f"tellask\n{mention}\n{headline}\n{body}\n{index}"
    return hashlib.md5(payload.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def error_message(reason: TellaskErrorReason, first_line: str, **fields: str) -> str:
    """The human sentence for `reason`; `first_line` is the block's first line as written
    by the model (without its `!?`), shortened for the note."""
    shown = TELLASK_PREFIX + first_line.rstrip("\r\n")
    if len(shown) > FIRST_LINE_PREVIEW_CHARS:
        shown = shown[: FIRST_LINE_PREVIEW_CHARS - 1] + "…"
    return REASON_MESSAGES[reason].format(first_line=shown, **fields)


def parse_q4h_fields(body: str) -> tuple[list[str], str | None]:
    """The options and the default assumption a `!?@human` body states (`Options: a | b`,
    `Default: a`): ([], None) when it states neither. Empty values state nothing; options
    are trimmed, empty ones and repeats dropped."""
    options: list[str] | None = None
    default: str | None = None
    for line in body.splitlines():
        m = Q4H_FIELD_RE.match(line)
        field = Q4H_FIELD_LABELS.get(m.group(1).casefold()) if m else None
        if m is None or field is None or not m.group(2):
            continue
        if field is Q4hField.DEFAULT and default is None:
            default = m.group(2)
        elif field is Q4hField.OPTIONS and options is None:
            parts = (o.strip() for o in m.group(2).split(Q4H_OPTIONS_SEPARATOR))
            options = list(dict.fromkeys(o for o in parts if o))
    return options or [], default
