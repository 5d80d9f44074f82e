"""How a compiled section becomes messages, and what it costs: one definition for both,
so a budget checked against `section_cost` is never less than what the request spends.

A text section renders as one user message: its heading, then its parts one per line
(retrieved passages are fenced as data). A message section (history turns, the last
step) renders as its messages, in order.

Costs are additive — a section's cost is a fixed part plus the sum of its parts' costs —
so the trim rules can drop or shorten parts one by one without re-rendering the whole
section. For a text section the sum is an upper bound of the rendered text's count for
any subadditive counter (characters / 4 and its calibrated form are): the rendered
request never costs more than the budget it was checked against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mindloop.i18n import Lang
from mindloop.memory.sections import MESSAGE_SECTIONS, SECTIONS, Part, Section, SectionKind
from mindloop.memory.tokens import (
    MESSAGE_OVERHEAD,
    TokenCounter,
    chars,
    message_tokens,
    messages_costs,
)
from mindloop.providers.base import ChatMessage, UserMessage

# What joins a section's lines. It is text like any other: under a calibrated ratio above
# 1 one break costs more than one token, so costs count it with the counter.
BREAK = "\n"

_DATA_FENCE: dict[Lang, str] = {"en": "--- data ---", "zh": "--- 数据 ---"}


def heading(kind: SectionKind, lang: Lang) -> str:
    found = _HEADINGS.get((kind, lang))
    if found is None:
        spec = SECTIONS[kind]
        found = _HEADINGS[kind, lang] = f"## {spec.heading.get(lang, spec.heading['en'])}"
    return found


_HEADINGS: dict[tuple[SectionKind, Lang], str] = {}  # (each request writes and counts them)


def fence(lang: Lang) -> str:
    return _DATA_FENCE.get(lang, _DATA_FENCE["en"])


def section_text(section: Section, lang: Lang = "en") -> str:
    """A text section as the model reads it ("" when empty)."""
    if not section.parts:
        return ""
    lines = [heading(section.kind, lang)]
    if section.kind is SectionKind.RETRIEVED:
        for p in section.parts:
            lines += [fence(lang), p.text]
        lines.append(fence(lang))
    else:
        lines += [p.text for p in section.parts]
    return BREAK.join(lines)


def section_messages(section: Section, lang: Lang = "en") -> list[ChatMessage]:
    """The section as the request's messages (shared: a list not to change)."""
    if section.kind in MESSAGE_SECTIONS:
        return [m for p in section.parts for m in p.messages]
    held = _TEXT_MESSAGES.get(id(section))
    if held is not None and held[0] is section and held[1] == lang:
        return held[2]
    text = section_text(section, lang)
    out: list[ChatMessage] = [UserMessage(text=text)] if text else []
    if len(_TEXT_MESSAGES) >= TEXT_MESSAGES_KEPT:
        _TEXT_MESSAGES.clear()
    _TEXT_MESSAGES[id(section)] = (section, lang, out)
    return out


# A text section's message, by the section (immutable; the entry holds it, so its id is
# not reused while it stands): a section shown at several steps (the workspace summary,
# an entry's input and last step summary) is written once. Emptied when full.
TEXT_MESSAGES_KEPT = 256
_TEXT_MESSAGES: dict[int, tuple[Section, Lang, list[ChatMessage]]] = {}


def base_cost(kind: SectionKind, counter: TokenCounter, lang: Lang = "en") -> int:
    """What a non-empty section costs beyond its parts."""
    if kind in MESSAGE_SECTIONS:
        return 0
    cost = MESSAGE_OVERHEAD + counter.count(heading(kind, lang))
    if kind is SectionKind.RETRIEVED:
        cost += counter.count(BREAK) + counter.count(fence(lang))
    return cost


def part_cost(kind: SectionKind, part: Part, counter: TokenCounter, lang: Lang = "en") -> int:
    """What one part adds to its section (a line break included)."""
    if kind in MESSAGE_SECTIONS:
        return sum(message_tokens(m, counter) for m in part.messages)
    return text_cost(kind, part.text, counter, lang)


def text_cost(kind: SectionKind, text: str, counter: TokenCounter, lang: Lang = "en") -> int:
    """What a text part of `text` adds to a text section of `kind` (`part_cost` without
    the part: a trim weighs a shortened text before it makes a part of it)."""
    cost = counter.count(BREAK) + counter.count(text)
    if kind is SectionKind.RETRIEVED:
        cost += counter.count(BREAK) + counter.count(fence(lang))
    return cost


def part_costs(
    kind: SectionKind, parts: Sequence[Part], counter: TokenCounter, lang: Lang = "en"
) -> list[int]:
    """`part_cost` of each of `parts` (of a section of `kind`), with what every part of the
    kind adds counted once."""
    if kind in MESSAGE_SECTIONS:
        return messages_costs([p.messages for p in parts], counter)
    count = counter.count
    each = count(BREAK)
    if kind is SectionKind.RETRIEVED:
        each += count(BREAK) + count(fence(lang))
    way = chars(counter)
    if way is None:
        return [each + count(p.text) for p in parts]
    per, ratio = way  # counted inline (`tokens.chars`): no call per part
    ceil = math.ceil
    if ratio is None:
        return [each + ceil(len(p.text) / per) for p in parts]
    return [each + ceil(ceil(len(p.text) / per) * ratio) for p in parts]


def section_cost(section: Section, counter: TokenCounter, lang: Lang = "en") -> int:
    """Tokens the section adds to a request (0 when empty): `base_cost` plus each part's
    `part_cost`, with what every part of the kind adds counted once."""
    return section_costs(section, counter, lang)[0]


def section_costs(
    section: Section, counter: TokenCounter, lang: Lang = "en"
) -> tuple[int, list[int]]:
    """(`section_cost`, `part_costs` of its parts): a compilation counts each part once and
    hands the list to the trim that needs it."""
    parts = section.parts
    if not parts:
        return 0, []
    kind = section.kind
    costs = part_costs(kind, parts, counter, lang)
    if kind in MESSAGE_SECTIONS:  # no heading: its parts are messages
        return sum(costs), costs
    return base_cost(kind, counter, lang) + sum(costs), costs


def sections_costs(
    sections: Sequence[Section], counter: TokenCounter, lang: Lang = "en"
) -> list[tuple[int, list[int]]]:
    """`section_costs` of each of `sections`: how the counter counts looked up once for
    them all, and for the default counter (or its calibrated form) its arithmetic inline
    (`tokens.chars`), the same as `base_cost` and `part_costs` (a request costs all its
    sections at every step: its calibrated ratio moves with each generation)."""
    way = chars(counter)
    if way is None:
        return [section_costs(s, counter, lang) for s in sections]
    per, ratio = way
    ceil = math.ceil
    out: list[tuple[int, list[int]]] = []
    brk = ceil(len(BREAK) / per)
    if ratio is not None:
        brk = ceil(brk * ratio)
    for section in sections:
        parts = section.parts
        kind = section.kind
        if not parts:
            out.append((0, []))
            continue
        if kind in MESSAGE_SECTIONS:
            costs = messages_costs([p.messages for p in parts], counter)
            out.append((sum(costs), costs))
            continue
        each = brk
        base = ceil(len(heading(kind, lang)) / per)
        if ratio is not None:
            base = ceil(base * ratio)
        base += MESSAGE_OVERHEAD
        if kind is SectionKind.RETRIEVED:
            data = ceil(len(fence(lang)) / per)
            extra = brk + (data if ratio is None else ceil(data * ratio))
            each += extra
            base += extra
        if ratio is None:
            costs = [each + ceil(len(p.text) / per) for p in parts]
        else:
            costs = [each + ceil(ceil(len(p.text) / per) * ratio) for p in parts]
        out.append((base + sum(costs), costs))
    return out
