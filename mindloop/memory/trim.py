"""The trim rules of agent-loop §7.1: how each section shrinks to a token target.

`trim(section, target, params)` returns the section within `target` and a record of
what it cut, folded or dropped (None when it already fitted). Each rule first does what
the reference says (cut the input's parts — to what fits, never under 800 tokens while
that fits — each with a note naming the tool that reads it whole; keep each tool
result's head and tail; drop the lowest-confidence memory first; fold terminal nodes to
`id status title`; drop the oldest turns; keep the best-scored passages), then
shortens further and finally drops parts — pinned ones last — so any target, even 0, is
met. Whether a section may go that low is the compiler's business (floors, P0).

Pure functions: nothing here reads or writes anything but its arguments (a part's folded
form is kept by the part, which never changes: `_folded`). A cap search weighs each cap
it tries; with a counter that counts by length alone it does so by the cut texts'
lengths, and makes texts only at the cap it chose (`_TextCuts`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter
from typing import Any

from pydantic import BaseModel, ConfigDict

from mindloop.i18n import Lang
from mindloop.memory.render import base_cost, part_cost, part_costs, section_cost, text_cost
from mindloop.memory.sections import SECTIONS, Part, Section, SectionKind, TrimRule
from mindloop.memory.tokens import TokenCounter, chars, count_length
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

_CUT_NOTE: dict[Lang, str] = {
    "en": "\n[… {n} tokens cut{where}]\n",
    "zh": "\n[……已截去 {n} 个 token{where}]\n",
}
_READ_WHOLE: dict[Lang, str] = {
    "en": "; read it whole with {whole}",
    "zh": "；用 {whole} 读取全文",
}
_IN_WORKLOG: dict[Lang, str] = {
    "en": "; the full text is in the worklog ({id})",
    "zh": "；全文见工作日志（{id}）",
}
_OMITTED: dict[Lang, str] = {
    "en": "[{n} earlier turns not shown; the dialog summary covers them]",
    "zh": "[省略了之前的 {n} 轮；对话摘要涵盖了它们]",
}


class TrimReason(StrEnum):
    OWN_BUDGET = "own_budget"  # the section passed its own budget
    TOTAL = "total"  # the compiled input passed B: the reverse-priority pass
    FLOOR_BREACHED = "floor_breached"  # B is below the floors: cut under them, logged


class TrimRecord(BaseModel):
    """What one trim did to one section: the trim log's entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    section: SectionKind
    rule: TrimRule
    reason: TrimReason
    budget: int  # the target it was trimmed to
    tokens_before: int
    tokens_after: int
    cut: tuple[str, ...] = ()  # ids of parts shortened
    folded: tuple[str, ...] = ()  # ids of parts replaced by their short form
    dropped: tuple[str, ...] = ()  # ids of parts left out


@dataclass(frozen=True)
class TrimParams:
    counter: TokenCounter
    lang: Lang = "en"
    event_body_tokens: int = 800
    tool_result_head: int = 1500
    tool_result_tail: int = 1500


@dataclass
class _Work:
    """A section being trimmed: its parts, their costs, and what happened to them."""

    kind: SectionKind
    parts: list[Part]
    costs: list[int]
    base: int
    params: TrimParams
    cut: set[str]
    folded: set[str]
    dropped: list[str]

    @property
    def total(self) -> int:
        return self.base + sum(self.costs) if self.parts else 0

    def cost_of(self, part: Part) -> int:
        return part_cost(self.kind, part, self.params.counter, self.params.lang)

    def text_cost(self, text: str) -> int:
        """`cost_of` a text part of `text` (a text section's)."""
        return text_cost(self.kind, text, self.params.counter, self.params.lang)

    def replace(self, i: int, part: Part) -> None:
        self.parts[i] = part
        self.costs[i] = self.cost_of(part)

    def drop(self, i: int) -> None:
        self.dropped.append(self.parts[i].id)
        del self.parts[i]
        del self.costs[i]

    def drop_in_order(self, order: Sequence[int], target: int) -> None:
        """Drop parts at `order`'s indexes (into the current list) until within target."""
        gone: list[int] = []
        total = self.total
        for i in order:
            if total <= target:
                break
            gone.append(i)
            total -= self.costs[i]
            if len(gone) == len(self.parts):
                total = 0
        self.dropped += [self.parts[i].id for i in gone]  # in the order they went
        for i in sorted(gone, reverse=True):
            del self.parts[i]
            del self.costs[i]


def trim(
    section: Section,
    target: int,
    params: TrimParams,
    reason: TrimReason,
    *,
    cost: int | None = None,
    costs: Sequence[int] | None = None,
) -> tuple[Section, TrimRecord | None]:
    """`section` within `target` tokens by its kind's rule, and what was done. `cost`:
    the section's `section_cost` when the caller has it already; `costs`: its parts'
    `part_costs` likewise (`render.section_costs` gives both)."""
    counter, lang = params.counter, params.lang
    before = section_cost(section, counter, lang) if cost is None else cost
    rule = SECTIONS[section.kind].rule
    if before <= target or rule is TrimRule.NEVER:
        return section, None
    work = _Work(
        kind=section.kind,
        parts=list(section.parts),
        costs=(
            part_costs(section.kind, section.parts, counter, lang) if costs is None else list(costs)
        ),
        base=base_cost(section.kind, counter, lang),
        params=params,
        cut=set(),
        folded=set(),
        dropped=[],
    )
    _RULES[rule](work, max(target, 0))
    _drop_rest(work, target)  # whatever the rule left over: oldest, unpinned first
    out = Section(kind=section.kind, parts=tuple(work.parts))
    record = TrimRecord(
        section=section.kind,
        rule=rule,
        reason=reason,
        budget=target,
        tokens_before=before,
        tokens_after=work.total,  # `section_cost(out)`: costs are additive (`render`)
        cut=_ids_in(work.parts, work.cut),
        folded=_ids_in(work.parts, work.folded),
        dropped=tuple(work.dropped),
    )
    return out, record


def _ids_in(parts: Sequence[Part], ids: set[str]) -> tuple[str, ...]:
    """The ids of `parts` that are in `ids`, in the parts' order (a tree's 200 parts:
    taken and kept by C iterators)."""
    if not ids:
        return ()
    return tuple(filter(ids.__contains__, map(_ID, parts)))


_ID = attrgetter("id")


# ---------------------------------------------------------------- the rules


def _cut_each(w: _Work, target: int) -> None:
    """INPUT: each part cut to the largest common cap that fits (never below
    `event_body_tokens` while that fits), with a note naming how to read it whole when a
    tool shows it (`Part.whole`); then lower."""
    p = w.params
    hints = {id(part): _whole_hint(part, p.lang) for part in w.parts}

    def at(part: Part, c: int) -> Cut:
        return c, 0, hints[id(part)]

    floor = p.event_body_tokens
    if _fits(w, target, floor, at):
        _lower_text_cap(w, target, _largest(w), at, lo=floor)
    else:
        _lower_text_cap(w, target, floor, at)


def _whole_hint(part: Part, lang: Lang) -> str:
    if part.whole is None:
        return ""
    return _READ_WHOLE.get(lang, _READ_WHOLE["en"]).format(whole=part.whole)


def _fits(w: _Work, target: int, cap: int, at: Callable[[Part, int], Cut]) -> bool:
    return w.base + _TextCuts(w, at).weigh(cap) <= target


def _head_only(part: Part, c: int) -> Cut:
    """A part's text cut to a cap from its start (the note after it)."""
    return c, 0, ""


def _hard_cap(w: _Work, target: int) -> None:
    """LAST_STEP_SUMMARY (a schema-bounded text): cut to the target."""
    _lower_text_cap(w, target, _largest(w), _head_only)


def _head_tail(w: _Work, target: int) -> None:
    """TOOL_RESULTS: each result's head and tail; the full text stays in the worklog."""
    p = w.params
    head, tail = p.tool_result_head, p.tool_result_tail
    for i, part in enumerate(w.parts):
        cut = _clip_turn(part, head, tail, p, results_only=True)
        if cut is not part:
            w.replace(i, cut)
            w.cut.add(part.id)
    if w.total > target:
        span = head + tail

        def at(part: Part, c: int) -> Part:
            h = c * head // span if span else 0
            return _clip_turn(part, h, c - h, p, results_only=False)

        _lower_cap(w, target, span, at)


def _lowest_score(w: _Work, target: int) -> None:
    """MEMBER_MEMORY (lowest confidence first) and RETRIEVED (top-k by score)."""
    order = sorted(range(len(w.parts)), key=lambda i: (w.parts[i].pinned, w.parts[i].score, i))
    w.drop_in_order(order, target)


def _resummarize(w: _Work, target: int) -> None:
    """DIALOG_SUMMARY: cut to the target now (head and tail), pinned parts (the DONE
    verdicts) last; the compiler asks for a new summary (compaction trigger 1)."""

    def at(part: Part, c: int) -> Cut:
        return c - c // 2, c // 2, ""

    _lower_text_cap(w, target, _largest(w), at, only=lambda part: not part.pinned)
    if w.total > target:
        _lower_text_cap(w, target, _largest(w), at)


def _keep_pinned(w: _Work, target: int) -> None:
    """WORKSPACE_SUMMARY: keep the pinned layout list, drop detail from the end."""
    unpinned = [i for i in reversed(range(len(w.parts))) if not w.parts[i].pinned]
    w.drop_in_order(unpinned, target)
    if w.total > target:
        _lower_text_cap(w, target, _largest(w), _head_only)


def _fold(w: _Work, target: int) -> None:
    """WORKSPACE_TREE: unpinned nodes folded to their short form (oldest first), then
    dropped; pinned ones (current node, ancestors, deps, non-terminal) are kept."""
    # the total kept as the folds change it: a tree of n nodes folds in O(n), not O(n²);
    # a folded part weighed as `replace` would (`cost_of`: a text part's cost), the
    # count of its short form added to what every part of the kind adds
    total, costs, parts = w.total, w.costs, w.parts
    counter = w.params.counter
    count = counter.count
    each = w.text_cost("") - count("")
    way = chars(counter)  # (counted inline where it can be)
    per, ratio = way if way is not None else (1.0, None)
    ceil = math.ceil
    folded = w.folded
    for i, part in enumerate(parts):
        if total <= target:
            return
        held = _folds.get(id(part))  # what `_fold_of(part)` says, its lookup inline
        if held is None or held[0] is not part:
            held = _fold_of(part)
        short = held[1]
        if short is not None:
            if way is None:
                cost = each + count(short.text)
            else:
                n = ceil(held[3] / per)
                cost = each + (n if ratio is None else ceil(n * ratio))
            parts[i] = short
            total += cost - costs[i]
            costs[i] = cost
            folded.add(held[2])
    unpinned = [i for i in range(len(w.parts)) if not w.parts[i].pinned]
    w.drop_in_order(unpinned, target)
    if w.total > target:  # the pinned nodes alone are too long: shorten them
        _lower_text_cap(w, target, _largest(w), _head_only)


# A tree's part as the fold sees it, by the part: (the part, its short form or None when
# it is not folded (pinned, or no shorter form), its id, the short form's length). The
# tree's parts are kept from step to step, so each is looked at once, not at every trim
# (a model's attributes cost three times a plain object's: a 200-node tree's fold read
# six of them from each part it passed). Parts are immutable: the entry holds the part
# itself, so its id is not reused while it stands; the table is emptied at FOLDS_KEPT (a
# fixed amount of memory).
FOLDS_KEPT = 4096  # (a 200-node tree has 200 parts)
_folds: dict[int, tuple[Part, Part | None, str, int]] = {}


def _fold_of(part: Part) -> tuple[Part, Part | None, str, int]:
    held = _folds.get(id(part))
    if held is not None and held[0] is part:
        return held
    if len(_folds) >= FOLDS_KEPT:
        _folds.clear()
    short = None
    if not part.pinned and part.folded is not None and part.folded != part.text:
        short = part.model_copy(update={"text": part.folded})
    held = _folds[id(part)] = (part, short, part.id, len(short.text) if short else 0)
    return held


OMITTED_ID = "omitted"


def omitted_part(n: int, lang: Lang) -> Part:
    """The note that stands first in a history whose `n` oldest turns were dropped."""
    text = _OMITTED.get(lang, _OMITTED["en"]).format(n=n)
    return Part(id=OMITTED_ID, messages=(UserMessage(text=text),), pinned=True, score=n)


def _drop_oldest(w: _Work, target: int) -> None:
    """RECENT_HISTORY: drop the oldest turns (a note first says how many), then shorten
    the newest one."""
    if not w.parts:
        return
    lang = w.params.lang
    already = int(w.parts[0].score) if w.parts[0].id == OMITTED_ID else 0
    first = 1 if already else 0  # the first real turn
    turns = len(w.parts) - first
    note_cost = w.cost_of(omitted_part(already + turns, lang))  # an upper bound
    total = w.total - (w.costs[0] if already else 0)
    drop = 0
    while drop < turns - 1 and total + note_cost > target:
        total -= w.costs[first + drop]
        drop += 1
    if drop:
        for _ in range(drop + first):
            if w.parts[0].id == OMITTED_ID:
                del w.parts[0], w.costs[0]
            else:
                w.drop(0)
        note = omitted_part(already + drop, lang)
        w.parts.insert(0, note)
        w.costs.insert(0, w.cost_of(note))
    if w.total > target:
        p = w.params

        def at(part: Part, c: int) -> Part:
            return _clip_turn(part, c - c // 2, c // 2, p, results_only=False)

        _lower_cap(w, target, _largest(w), at)


_RULES: dict[TrimRule, Callable[[_Work, int], None]] = {
    TrimRule.CUT_EACH: _cut_each,
    TrimRule.HARD_CAP: _hard_cap,
    TrimRule.HEAD_TAIL: _head_tail,
    TrimRule.LOWEST_SCORE: _lowest_score,
    TrimRule.TOP_K: _lowest_score,
    TrimRule.RESUMMARIZE: _resummarize,
    TrimRule.KEEP_PINNED: _keep_pinned,
    TrimRule.FOLD: _fold,
    TrimRule.DROP_OLDEST: _drop_oldest,
}


def _drop_rest(w: _Work, target: int) -> None:
    """The last resort of every rule: drop parts, unpinned before pinned, oldest first
    (the newest history turn last)."""
    if w.total <= target:
        return
    order = sorted(range(len(w.parts)), key=lambda i: (w.parts[i].pinned, i))
    if w.kind is SectionKind.RECENT_HISTORY:
        order = sorted(range(len(w.parts)), key=lambda i: i)
    w.drop_in_order(order, target)


# ---------------------------------------------------------------- shortening


def _largest(w: _Work) -> int:
    return max(w.costs, default=0)


def _lower_cap(
    w: _Work,
    target: int,
    hi: int,
    at: Callable[[Part, int], Part],
    only: Callable[[Part], bool] | None = None,
    lo: int = 0,
) -> None:
    """The largest per-part cap in [lo, hi] at which every part (of those `only` selects),
    shortened by `at`, keeps the section within `target` (binary search: cost grows with
    the cap). Parts are shortened from the originals each time, so nothing is cut twice."""
    originals = list(w.parts)
    known = list(w.costs)  # the originals' costs: a part left as it is costs the same
    probed: dict[int, tuple[list[Part], list[int]]] = {}  # each cap tried (made once)

    def shortened(c: int) -> tuple[list[Part], list[int]]:
        found = probed.get(c)
        if found is None:
            parts = [at(p, c) if only is None or only(p) else p for p in originals]
            costs = [
                cost if new is old else w.cost_of(new)
                for new, old, cost in zip(parts, originals, known, strict=True)
            ]
            found = probed[c] = (parts, costs)
        return found

    cap = _search(w, target, lo, hi, lambda c: sum(shortened(c)[1]), known, only)
    parts, costs = shortened(cap)
    for old, new in zip(originals, parts, strict=True):
        if new is not old:
            w.cut.add(old.id)
    w.parts, w.costs = parts, costs


# How `clip` cuts a part at a cap: (head tokens, tail tokens, where to read it whole).
Cut = tuple[int, int, str]


class _TextCuts:
    """A text section's parts cut at a cap (`at` says how): what each would cost, and the
    texts. A counter that counts by length alone (`tokens.count_length`: the default
    counter and its calibrated form) weighs a cut text by its length, so a probe of the
    cap search makes no text; the cap chosen makes them. A probe weighs only the parts a
    cap can cut (`weigh`): the others cost the same at every cap, summed once."""

    def __init__(
        self, w: _Work, at: Callable[[Part, int], Cut], only: Callable[[Part], bool] | None = None
    ) -> None:
        self.w = w
        self.at = at
        self.originals = list(w.parts)
        self.known = list(w.costs)  # a part left as it is costs the same
        self.picked = [only is None or only(p) for p in self.originals]
        self.by_length = count_length(w.params.counter)
        self.way = chars(w.params.counter)  # its count inline, where it can be
        self.note = _note_rest(w.params.lang)  # a cut note's length without its fields
        # what a text part costs beyond its text (its count by length: 0 for "")
        self.fixed = w.text_cost("") if self.by_length is not None else 0
        # each picked text's place, part, length and count (the same at every probe)
        count = w.params.counter.count
        self.items = [
            (i, p, len(p.text), count(p.text) if self.by_length is not None else 0)
            for i, (p, pick) in enumerate(zip(self.originals, self.picked, strict=True))
            if pick
        ]
        # what the parts no cap cuts cost together
        self.rest = sum(
            cost for cost, pick in zip(self.known, self.picked, strict=True) if not pick
        )

    def texts(self, c: int) -> list[str]:
        counter, lang, at = self.w.params.counter, self.w.params.lang, self.at
        out = []
        for p, pick in zip(self.originals, self.picked, strict=True):
            if pick:
                head, tail, where = at(p, c)
                out.append(clip(p.text, head, tail, counter, lang, where))
            else:
                out.append(p.text)
        return out

    def shortened(self, c: int) -> tuple[int | list[str], list[int]]:
        """(the texts at cap `c`, or `c` when none was made; what each part costs)."""
        by_length = self.by_length
        if by_length is None:
            texts = self.texts(c)
            cost_of = self.w.text_cost
            costs = [
                cost if new == old.text else cost_of(new)
                for new, old, cost in zip(texts, self.originals, self.known, strict=True)
            ]
            return texts, costs
        costs = list(self.known)
        self._cut_costs(c, by_length, costs)
        return c, costs

    def weigh(self, c: int) -> int:
        """What the parts cost together at cap `c` (`sum(shortened(c)[1])`)."""
        by_length = self.by_length
        if by_length is None:
            return sum(self.shortened(c)[1])
        return self.rest + self._cut_costs(c, by_length, None)

    def _cut_costs(self, c: int, by_length: Callable[[int], int], into: list[int] | None) -> int:
        """What the picked parts cost together at cap `c`, each weighed by its cut text's
        length (`_clipped_size`, inline: a search probes a dozen caps), and put `into`
        their places when given."""
        at, fixed, known, rest = self.at, self.fixed, self.known, self.note
        way = self.way
        chars_per_token, ratio = way if way is not None else (1.0, None)
        ceil = math.ceil
        total = 0
        for i, p, size, n in self.items:
            head, tail, where = at(p, c)
            if n <= head + tail:  # fits: left as it is
                cost = known[i]
            else:
                per = size / n  # this text's characters per token
                kept = int(head * per) + int(tail * per)
                if not 0 <= kept <= size:  # (never: head + tail < n)
                    kept = _kept_chars(size, n, head, tail)
                cut = kept + rest + len(str(n - head - tail)) + len(where)
                if way is None:
                    cost = fixed + by_length(cut)
                else:  # `by_length(cut)` inline
                    count = ceil(cut / chars_per_token)
                    cost = fixed + (count if ratio is None else ceil(count * ratio))
            total += cost
            if into is not None:
                into[i] = cost
        return total


def _lower_text_cap(
    w: _Work,
    target: int,
    hi: int,
    at: Callable[[Part, int], Cut],
    only: Callable[[Part], bool] | None = None,
    lo: int = 0,
) -> None:
    """`_lower_cap` for a text section, `at` saying how a part is cut at a cap: each
    probe weighs the cut texts (`_TextCuts`), and only the cap chosen makes parts of
    them."""
    cuts = _TextCuts(w, at, only)
    cap = _search(w, target, lo, hi, cuts.weigh, cuts.known, only)
    found, costs = cuts.shortened(cap)
    texts = found if isinstance(found, list) else cuts.texts(cap)
    parts = []
    for old, new in zip(cuts.originals, texts, strict=True):
        if new == old.text:
            parts.append(old)
        else:
            parts.append(old.model_copy(update={"text": new}))
            w.cut.add(old.id)
    w.parts, w.costs = parts, costs


def _search(
    w: _Work,
    target: int,
    lo: int,
    hi: int,
    weigh: Callable[[int], int],
    known: Sequence[int],
    only: Callable[[Part], bool] | None,
) -> int:
    """The binary search of `_lower_cap`: the largest cap in [lo, hi] it finds at which
    the parts weigh (`weigh`: their costs summed) within the target beside the base,
    else 0 (as short as it gets; `_drop_rest` finishes)."""
    base = w.base
    if only is not None:  # the parts no cap shortens already pass the target: none fits
        kept = sum(cost for p, cost in zip(w.parts, known, strict=True) if not only(p))
        if base + kept > target:
            return 0
    best = 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if base + weigh(mid) <= target:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def clip(
    text: str, head: int, tail: int, counter: TokenCounter, lang: Lang, where: str = ""
) -> str:
    """`text` cut to about `head` tokens from its start and `tail` from its end, with a
    note of how much was cut in between (and where to read it whole); unchanged when it
    fits."""
    cut = _cut(text, head, tail, counter, lang, where)
    if cut is None:
        return text
    head_chars, tail_chars, note = cut
    return text[:head_chars] + note + (text[len(text) - tail_chars :] if tail_chars else "")


def clipped_length(
    text: str, head: int, tail: int, counter: TokenCounter, lang: Lang, where: str = ""
) -> int | None:
    """The length of `clip`'s text without making it (None: `text` fits, unchanged)."""
    return _clipped_size(len(text), counter.count(text), head, tail, lang, where)


def _clipped_size(size: int, n: int, head: int, tail: int, lang: Lang, where: str) -> int | None:
    """`clipped_length` of a text of `size` characters that counts `n` tokens (a cap
    search weighs the same text at every probe: counted once)."""
    if n <= head + tail:
        return None
    return _kept_chars(size, n, head, tail) + _note_length(n - head - tail, lang, where)


def _kept_chars(size: int, n: int, head: int, tail: int) -> int:
    """The characters `clip` keeps of a text of `size` characters counting `n` tokens
    (more than `head + tail`): its head and its tail, sliced as the text would be (each
    part shorter than the text, as head + tail < n: their sum)."""
    per = size / n
    head_chars, tail_chars = int(head * per), int(tail * per)
    span = range(size)  # the same lengths as the text's slices
    return len(span[:head_chars]) + (len(span[size - tail_chars :]) if tail_chars else 0)


def _cut(
    text: str, head: int, tail: int, counter: TokenCounter, lang: Lang, where: str
) -> tuple[int, int, str] | None:
    """Where `clip` cuts `text` (characters kept from its head and its tail) and the note
    it puts in between; None when it fits."""
    n = counter.count(text)
    if n <= head + tail:
        return None
    per = len(text) / n  # characters per token of this very text
    note = _CUT_NOTE.get(lang, _CUT_NOTE["en"]).format(n=n - head - tail, where=where)
    return int(head * per), int(tail * per), note


def _note_length(n: int, lang: Lang, where: str) -> int:
    """The length of `_cut`'s note for `n` tokens cut (its template holds `{n}` and
    `{where}` once each: the rest of it, and the two as written)."""
    return _note_rest(lang) + len(str(n)) + len(where)


def _note_rest(lang: Lang) -> int:
    """The length of `_cut`'s note without its two fields."""
    rest = _NOTE_REST.get(lang)
    if rest is None:
        rest = _NOTE_REST[lang] = len(_CUT_NOTE.get(lang, _CUT_NOTE["en"]).format(n="", where=""))
    return rest


_NOTE_REST: dict[Lang, int] = {}


def _clip_turn(part: Part, head: int, tail: int, p: TrimParams, *, results_only: bool) -> Part:
    """A message part with its long texts cut: tool results (the full text stays in the
    worklog), and unless `results_only` also user and assistant texts and long string
    values in tool-call arguments (the arguments stay valid JSON)."""
    where = _IN_WORKLOG.get(p.lang, _IN_WORKLOG["en"]).format(id=part.id)
    msgs: list[ChatMessage] = []
    changed = False
    for msg in part.messages:
        new: ChatMessage = msg
        if isinstance(msg, ToolResultMessage):
            content = clip(msg.content, head, tail, p.counter, p.lang, where)
            if content != msg.content:
                new = msg.model_copy(update={"content": content})
        elif not results_only and isinstance(msg, UserMessage):
            text = clip(msg.text, head, tail, p.counter, p.lang)
            if text != msg.text:
                new = UserMessage(text=text)
        elif not results_only and isinstance(msg, AssistantMessage):
            text = clip(msg.text, head, tail, p.counter, p.lang)
            calls = [_clip_call(c, head, tail, p) for c in msg.tool_calls]
            if text != msg.text or any(
                a is not b for a, b in zip(calls, msg.tool_calls, strict=True)
            ):
                new = AssistantMessage(text=text, tool_calls=calls)
        changed = changed or new is not msg
        msgs.append(new)
    return part.model_copy(update={"messages": tuple(msgs)}) if changed else part


def _clip_call(call: ToolCall, head: int, tail: int, p: TrimParams) -> ToolCall:
    if p.counter.count(call.arguments) <= head + tail:
        return call
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return call.model_copy(
            update={"arguments": clip(call.arguments, head, tail, p.counter, p.lang)}
        )

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return clip(v, head, tail, p.counter, p.lang)
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    args = json.dumps(walk(value), ensure_ascii=False)
    return call.model_copy(update={"arguments": args})
