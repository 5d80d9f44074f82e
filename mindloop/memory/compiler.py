"""Compiles a generation's input from budgeted sections (agent-loop §7.1).

`MemoryCompiler.compile(sections, window=…, model=…, phase=…, taskdoc=…)`:

1. B and each section's budget for the model's window and the phase (`budget.py`);
2. each section trimmed to its own budget by its rule (`trim.py`); a section that had
   to be trimmed asks for a background compaction of itself (§7.2 trigger 1);
3. while the total passes B, sections 6 → 1 are trimmed, never under their floors (600
   tokens for the tree, the newest turn for the history); P0 sections keep their budgets;
4. only if B is smaller than the floors: cut below them, every section in reverse
   priority, logged as `floor_breached` — the compiled input never passes B.

The Taskdoc is measured, never trimmed (DESIGN.md §8, decision 4): it stays whole in the
system prompt, outside B. Passing its budget gives a typed `TaskdocOverBudget` the loop
turns into the "distill progress.md through change_mind" ask.

Token counts come from a pluggable counter (characters / 4 by default) scaled by the
model's ratio learned from provider-reported usage (`tokens.Calibration`).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from mindloop.config.loop_memory import MemoryConfig
from mindloop.i18n import Lang
from mindloop.memory.budget import Budgets, budgets
from mindloop.memory.render import part_cost, section_messages, sections_costs
from mindloop.memory.sections import SECTIONS, Section, SectionKind
from mindloop.memory.tokens import (
    CalibratedCounter,
    Calibration,
    CharCounter,
    TokenCounter,
)
from mindloop.memory.trim import OMITTED_ID, TrimParams, TrimReason, TrimRecord, omitted_part, trim
from mindloop.providers.base import ChatMessage

# Where each section goes in the request. The slow-changing context first (so a
# provider's prompt cache keeps it), then the history and the last step's calls and
# results, then what is new for this step. An input anchored in the history (the work
# loop's phase input: `compile(anchor=…)`) stands where it happened instead, with the
# last step summary before it: among the turns by their place in the dialog, or before
# them all once they are newer (so the request's last message is always the latest).
RENDER_ORDER: tuple[SectionKind, ...] = (
    SectionKind.MEMBER_MEMORY,
    SectionKind.DIALOG_SUMMARY,
    SectionKind.WORKSPACE_SUMMARY,
    SectionKind.WORKSPACE_TREE,
    SectionKind.RETRIEVED,
    SectionKind.RECENT_HISTORY,
    SectionKind.TOOL_RESULTS,
    SectionKind.LAST_STEP_SUMMARY,
    SectionKind.INPUT,
)

# The reverse-priority pass: 6 → 1; below the floors, then the P0 sections, the last
# step's results first and the input last.
_REVERSE = sorted(
    (k for k in SECTIONS if SECTIONS[k].priority > 0), key=lambda k: -SECTIONS[k].priority
)
_P0_LAST = (SectionKind.TOOL_RESULTS, SectionKind.LAST_STEP_SUMMARY, SectionKind.INPUT)
_ANCHORED = (SectionKind.LAST_STEP_SUMMARY, SectionKind.INPUT)  # placed at the anchor
_TURNS = (SectionKind.RECENT_HISTORY, SectionKind.TOOL_RESULTS)

_DISTILL: dict[Lang, str] = {
    "en": "[mindloop] The Taskdoc is {tokens:,} tokens, over its budget of {budget:,}. "
    "Distill progress.md through change_mind: keep what later work needs, drop the rest.",
    "zh": "[mindloop] 任务文档有 {tokens:,} 个 token，超出其预算 {budget:,}。"
    "请通过 change_mind 精简 progress.md：保留后续工作需要的内容，删去其余部分。",
}


class TaskdocOverBudget(BaseModel):
    """The effective Taskdoc passed its budget: it is still sent whole; the loop asks
    PLAN / SELF_IMPROVE to distill `progress.md` (`ask`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int
    budget: int

    def ask(self, lang: Lang = "en") -> str:
        return _DISTILL.get(lang, _DISTILL["en"]).format(tokens=self.tokens, budget=self.budget)


class CompiledContext(BaseModel):
    """A compiled input: its sections as sent, what it costs, and what was trimmed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    budgets: Budgets
    lang: Lang
    sections: tuple[Section, ...]  # in RENDER_ORDER, empty ones left out
    tokens: int  # what the sections cost (≤ budgets.total)
    by_section: dict[SectionKind, int]
    trims: tuple[TrimRecord, ...]
    taskdoc_tokens: int
    taskdoc_over: TaskdocOverBudget | None
    # Sections that overflowed their own budget: a background compaction of each is due
    # (agent-loop §7.2, trigger 1); the dialog summary is re-summarised.
    compact: tuple[SectionKind, ...]
    # Where the input happened in the dialog (the index of its message; -1: before every
    # turn shown), or None: it is new for this step and goes last.
    anchor: int | None = None

    def messages(self) -> list[ChatMessage]:
        lang = self.lang
        anchor = self.anchor
        if anchor is None:
            return [m for s in self.sections for m in section_messages(s, lang)]
        out: list[ChatMessage] = []
        told = False  # the turns and the anchored input written
        for s in self.sections:
            if s.kind in _TURNS or s.kind in _ANCHORED:
                if not told:
                    out += self._in_order(anchor)
                    told = True
            else:
                out += section_messages(s, lang)
        return out

    def _in_order(self, anchor: int) -> list[ChatMessage]:
        """The history's turns and the last step's in the dialog's order (the "turns not
        shown" note first), the last step summary and the input at the anchor."""
        anchored = [
            m for s in self.sections if s.kind in _ANCHORED for m in section_messages(s, self.lang)
        ]
        turns = sorted(
            (p for s in self.sections if s.kind in _TURNS for p in s.parts),
            key=lambda p: -1 if p.at is None else p.at,
        )
        out: list[ChatMessage] = []
        for p in turns:
            if anchored and p.at is not None and p.at > anchor:
                out += anchored
                anchored = []
            out += p.messages
        return out + anchored

    def section(self, kind: SectionKind) -> Section:
        for s in self.sections:
            if s.kind is kind:
                return s
        return Section(kind=kind)


class MemoryCompiler:
    """One per runtime (or per loop): the config, the counter and what calibration
    learned. `compile` is pure but for reading the calibration."""

    def __init__(
        self,
        config: MemoryConfig,
        counter: TokenCounter | None = None,
        calibration: Calibration | None = None,
        lang: Lang = "en",
    ) -> None:
        self.config = config
        self.base_counter: TokenCounter = counter or CharCounter(config.chars_per_token)
        self.calibration = calibration or Calibration()
        self.lang: Lang = lang
        # B and the section budgets by (window, phase): the same for every step of a
        # phase, so computed once (again if `config` is replaced).
        self._budgets: dict[tuple[int, str | None], Budgets] = {}
        self._budgets_of: MemoryConfig = config
        self._counters: dict[str, CalibratedCounter] = {}  # by model, at its last ratio

    def budgets(self, window: int, phase: str | None) -> Budgets:
        """`budget.budgets` for this compiler's config, kept by (window, phase)."""
        if self._budgets_of is not self.config:
            self._budgets, self._budgets_of = {}, self.config
        key = (window, phase)
        found = self._budgets.get(key)
        if found is None:
            found = self._budgets[key] = budgets(self.config, window, phase)
        return found

    def counter(self, model: str | None) -> TokenCounter:
        """The base counter scaled by `model`'s learned ratio (fixed for one compile;
        the same counter while the ratio and the base counter are)."""
        if model is None:
            return self.base_counter
        ratio = self.calibration.ratio(model)
        held = self._counters.get(model)
        if held is None or held.ratio != ratio or held.base is not self.base_counter:
            held = self._counters[model] = CalibratedCounter(self.base_counter, ratio)
        return held

    def compile(
        self,
        sections: Iterable[Section],
        *,
        window: int,
        model: str | None = None,
        phase: str | None = None,
        taskdoc: str = "",
        anchor: int | None = None,
    ) -> CompiledContext:
        """`sections` within B (see the module doc); `anchor`: where the input happened
        in the dialog, when it is not new for this step (see `RENDER_ORDER`)."""
        counter = self.counter(model)
        lang = self.lang
        cfg = self.config
        b = self.budgets(window, phase)
        by_kind: dict[SectionKind, Section] = {}
        for s in sections:
            if s.kind is SectionKind.TASKDOC:
                continue  # measured below; it lives in the system prompt
            if s.kind in by_kind:
                raise ValueError(f"section {s.kind} given twice")
            by_kind[s.kind] = s
        trims: list[TrimRecord] = []
        compact: list[SectionKind] = []
        # each section's cost, counted once and again only after a trim changed it, and
        # its parts' (what a trim starts from)
        costs: dict[SectionKind, int] = {}
        each: dict[SectionKind, list[int]] = {}
        for k, (cost, parts) in zip(
            by_kind, sections_costs(list(by_kind.values()), counter, lang), strict=True
        ):
            costs[k], each[k] = cost, parts

        params: list[TrimParams] = []  # made when a section is first cut

        def cut(kind: SectionKind, target: int, reason: TrimReason) -> None:
            if not params:
                params.append(
                    TrimParams(
                        counter=counter,
                        lang=lang,
                        event_body_tokens=cfg.sections.event_body,
                        tool_result_head=cfg.sections.tool_result_head,
                        tool_result_tail=cfg.sections.tool_result_tail,
                    )
                )
            section, record = trim(
                by_kind[kind], target, params[0], reason, cost=costs[kind], costs=each.get(kind)
            )
            if record is not None:
                by_kind[kind] = section
                costs[kind] = record.tokens_after
                each.pop(kind, None)  # counted again by a later trim, if any
                trims.append(record)

        own = b.sections
        for kind in list(by_kind):
            if costs[kind] <= own[kind]:
                continue  # fits: `trim` would leave it as it is
            before = len(trims)
            cut(kind, own[kind], TrimReason.OWN_BUDGET)
            if len(trims) > before:
                compact.append(kind)

        total = sum(costs.values())
        if total > b.total:  # reverse priority, down to the floors
            for kind in _REVERSE:
                if total <= b.total:
                    break
                if kind not in by_kind:
                    continue
                floor = self._floor(kind, by_kind[kind], b, counter)
                target = max(floor, costs[kind] - (total - b.total))
                total -= costs[kind]
                cut(kind, target, TrimReason.TOTAL)
                total += costs[kind]
        if total > b.total:  # B is below the floors: cut under them, logged
            for kind in (*_REVERSE, *_P0_LAST):
                if total <= b.total:
                    break
                if kind not in by_kind:
                    continue
                target = max(0, costs[kind] - (total - b.total))
                total -= costs[kind]
                cut(kind, target, TrimReason.FLOOR_BREACHED)
                total += costs[kind]

        taskdoc_tokens = counter.count(taskdoc) if taskdoc else 0
        taskdoc_budget = b.sections[SectionKind.TASKDOC]
        over = (
            TaskdocOverBudget(tokens=taskdoc_tokens, budget=taskdoc_budget)
            if taskdoc_tokens > taskdoc_budget
            else None
        )
        ordered = tuple(by_kind[k] for k in RENDER_ORDER if k in by_kind and by_kind[k].parts)
        return CompiledContext(
            budgets=b,
            lang=lang,
            sections=ordered,
            tokens=total,
            by_section={k: c for k, c in costs.items() if c},
            trims=tuple(trims),
            taskdoc_tokens=taskdoc_tokens,
            taskdoc_over=over,
            compact=tuple(compact),
            anchor=anchor,
        )

    def _floor(self, kind: SectionKind, section: Section, b: Budgets, counter: TokenCounter) -> int:
        """The least the reverse-priority pass leaves `kind`: its token floor, and for
        the history its newest `floors.history_turns` turns."""
        if kind is SectionKind.RECENT_HISTORY:
            turns = [p for p in section.parts if p.id != OMITTED_ID]
            keep = min(self.config.floors.history_turns, len(turns))
            if keep == 0:
                return 0
            newest = turns[len(turns) - keep :]
            floor = sum(part_cost(kind, p, counter, self.lang) for p in newest)
            if keep < len(section.parts):  # older turns go: a note says so
                floor += part_cost(kind, omitted_part(len(section.parts), self.lang), counter)
            return floor
        return b.floors.get(kind, 0)
