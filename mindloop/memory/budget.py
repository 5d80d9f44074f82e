"""The budgets of one compilation: B and each section's share (agent-loop §7.1).

B = min(window_fraction × the model's context window, max_tokens). Below the reference
B (`budget.max_tokens`, 32k) the sections of priorities 1–6 scale by B / 32k, never under
their floors (600 tokens for the tree); P0 sections keep their budgets. Phase overrides
(DO's tree 600, CHECK's tool results 8,000, SELF_IMPROVE's member memory 2,000) come from
`MemoryConfig.sections_for`; floors from `floors`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from mindloop.config.loop_memory import LoopPhaseName, MemoryConfig
from mindloop.memory.sections import SECTIONS, SectionKind


class Budgets(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    total: int  # B
    window: int  # the model's context window
    sections: dict[SectionKind, int]
    # The least the reverse-priority pass leaves a section (tokens; the history's floor
    # of whole turns is applied to its content by the compiler).
    floors: dict[SectionKind, int]


PHASES: tuple[LoopPhaseName, ...] = ("plan", "do", "check", "adjust", "self_improve")


def phase_name(phase: str | None) -> LoopPhaseName | None:
    """A phase as `loop.memory.phase_overrides` names it (`DO` or `do`); None for none
    (the Router, or a policy outside the loop)."""
    if phase is None or phase.lower() == "router":
        return None
    for name in PHASES:
        if name == phase.lower():
            return name
    raise ValueError(f"unknown phase {phase!r}; phases: {', '.join(PHASES)}")


def total_budget(config: MemoryConfig, window: int) -> int:
    if window <= 0:
        raise ValueError(f"a model's context window must be > 0, got {window}")
    return max(1, config.budget(window))


def budgets(config: MemoryConfig, window: int, phase: str | None = None) -> Budgets:
    total = total_budget(config, window)
    scale = min(1.0, total / config.context_max)
    raw = config.sections_for(phase_name(phase)).model_dump()
    sections: dict[SectionKind, int] = {}
    floors: dict[SectionKind, int] = {}
    for kind, spec in SECTIONS.items():
        budget = raw[kind.value]
        floor = 0
        if kind is SectionKind.WORKSPACE_TREE:
            floor = min(config.floors.workspace_tree, budget)
        if spec.priority == 0:
            floors[kind] = budget  # P0: never trimmed below its own budget
        else:
            budget = max(floor, int(budget * scale))
            floors[kind] = floor
        sections[kind] = budget
    return Budgets(total=total, window=window, sections=sections, floors=floors)
