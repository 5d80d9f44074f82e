"""`loop.memory:` in team.yaml — the budgets of a loop generation's compiled input.

Every number is agent-loop.md §7's default (a configuration default, not a constant):

    loop:
      memory:
        budget: {window_fraction: 0.25, max_tokens: 32000}   # B = min(0.25 × window, 32k)
        system_prompt_tokens: 6000
        sections: {tool_results: 8000}                        # any of the ten sections
        history_turns: 6
        phases:
          DO: {workspace_tree: 600}
        compaction: {trigger: 0.80, target: 0.50}

The keys of `sections` are the section kinds of `mindloop.memory.sections.SectionKind`
(the same words); a phase override names a phase of agent-loop §3. Strict, like every
other key: a misspelled key or a wrong type is a `file:line` error.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

STRICT = ConfigDict(extra="forbid", strict=True)

# The phases of agent-loop §3 (a phase override names one).
PhaseName = Literal["ROUTER", "PLAN", "DO", "CHECK", "ADJUST", "SELF_IMPROVE"]


class SectionBudgets(BaseModel):
    """Tokens per section (agent-loop §7.1, for B = 32k); a key left out keeps its default."""

    model_config = STRICT

    input: int = Field(default=4000, gt=0)
    last_step_summary: int = Field(default=300, gt=0)
    tool_results: int = Field(default=6000, gt=0)
    taskdoc: int = Field(default=2000, gt=0)
    member_memory: int = Field(default=1500, gt=0)
    dialog_summary: int = Field(default=1200, gt=0)
    workspace_summary: int = Field(default=1000, gt=0)
    workspace_tree: int = Field(default=1500, gt=0)
    recent_history: int = Field(default=4000, gt=0)
    retrieved: int = Field(default=2000, gt=0)


class SectionOverrides(BaseModel):
    """A phase's budgets that differ from `sections` (agent-loop §7.1 "Phase overrides")."""

    model_config = STRICT

    input: int | None = Field(default=None, gt=0)
    last_step_summary: int | None = Field(default=None, gt=0)
    tool_results: int | None = Field(default=None, gt=0)
    taskdoc: int | None = Field(default=None, gt=0)
    member_memory: int | None = Field(default=None, gt=0)
    dialog_summary: int | None = Field(default=None, gt=0)
    workspace_summary: int | None = Field(default=None, gt=0)
    workspace_tree: int | None = Field(default=None, gt=0)
    recent_history: int | None = Field(default=None, gt=0)
    retrieved: int | None = Field(default=None, gt=0)


# Agent-loop §7.1's phase overrides. A phase written under `phases:` changes only the keys
# it sets: `phases: {DO: {input: 3000}}` keeps DO's tree at 600.
DEFAULT_PHASE_OVERRIDES: dict[str, dict[str, int]] = {
    "DO": {"workspace_tree": 600},
    "CHECK": {"tool_results": 8000},
    "SELF_IMPROVE": {"member_memory": 2000},
}


class BudgetSpec(BaseModel):
    """B = min(window_fraction × the model's context window, max_tokens)."""

    model_config = STRICT

    window_fraction: float = Field(default=0.25, gt=0, le=1)
    max_tokens: int = Field(default=32000, gt=0)


class CompactionSpec(BaseModel):
    """Agent-loop §7.2: a dialog at `trigger` × window is compacted to `target` × window;
    at least `min_turns_between` turns between compactions, unless at `urgent` × window."""

    model_config = STRICT

    trigger: float = Field(default=0.80, gt=0, le=1)
    target: float = Field(default=0.50, gt=0, le=1)
    min_turns_between: int = Field(default=2, ge=0)
    urgent: float = Field(default=0.95, gt=0, le=1)
    # Tool results older than the recent turns are folded to a reference of this size.
    folded_result_tokens: int = Field(default=60, ge=0)
    # Old texts longer than this are cut to their head and tail when compacting.
    long_text_tokens: int = Field(default=400, gt=0)
    # The LLM summary of what compaction dropped is asked to stay within this.
    summary_tokens: int = Field(default=1200, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> CompactionSpec:
        if not self.target < self.trigger <= self.urgent:
            raise ValueError(
                f"needs target < trigger <= urgent, got target {self.target}, "
                f"trigger {self.trigger}, urgent {self.urgent}"
            )
        return self


class LoopMemoryConfig(BaseModel):
    """`loop.memory`: budgets, trim parameters and compaction of agent-loop §7."""

    model_config = STRICT

    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    system_prompt_tokens: int = Field(default=6000, gt=0)
    sections: SectionBudgets = Field(default_factory=SectionBudgets)
    phases: dict[PhaseName, SectionOverrides] = Field(default_factory=dict)
    history_turns: int = Field(default=6, gt=0)  # K
    # Floors of the reverse-priority pass (scaled budgets never go below them).
    tree_floor: int = Field(default=600, ge=0)
    history_floor_turns: int = Field(default=1, ge=0)
    # Trim rules' parameters.
    event_body_tokens: int = Field(default=800, gt=0)
    tool_result_head: int = Field(default=1500, gt=0)
    tool_result_tail: int = Field(default=1500, ge=0)
    # Member memory below this confidence is not written (agent-loop §7.3).
    min_confidence: float = Field(default=0.55, ge=0, le=1)
    compaction: CompactionSpec = Field(default_factory=CompactionSpec)

    def section_budgets(self, phase: str | None = None) -> dict[str, int]:
        """Tokens per section kind for `phase` (None: no phase): `sections`, then the
        default overrides of agent-loop §7.1, then what `phases:` sets for it."""
        out = self.sections.model_dump()
        if phase is not None:
            out.update(DEFAULT_PHASE_OVERRIDES.get(phase, {}))
            own = self.phases.get(phase)  # type: ignore[call-overload]
            if own is not None:
                out.update(own.model_dump(exclude_none=True))
        return out
