"""`loop.memory:` in team.yaml — the budgets of a loop generation's compiled input
(agent-loop §7). Every number is the reference's default, not a constant:

    loop:
      memory:
        context_fraction: 0.25            # B = min(0.25 × the model's window, context_max)
        context_max: 32000
        sections: {tool_results: 8000}    # any section's budget (tokens, for B = 32k)
        phase_overrides:
          do: {workspace_tree: 600}       # merged over the phase's defaults
        floors: {workspace_tree: 600, history_turns: 1}
        compaction: {trigger: 0.80, target: 0.50}

The section keys are the values of `mindloop.memory.sections.SectionKind`. Strict, like
every other key: a misspelled key or a wrong type is a `file:line` error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

STRICT = ConfigDict(extra="forbid", strict=True)

LoopPhaseName = Literal["plan", "do", "check", "adjust", "self_improve"]


class SectionBudgets(BaseModel):
    """`loop.memory.sections`: token budgets of the compiled context's sections for
    B = 32k (agent-loop §7.1), in priority order. Priorities 1–6 scale by B/32k."""

    model_config = STRICT

    input: int = Field(default=4000, ge=1)  # P0: new messages and events, node, resolved waits
    event_body: int = Field(default=800, ge=1)  # P0: each event body is cut to this
    last_step_summary: int = Field(default=300, ge=1)  # P0: also phase_end's summary cap
    tool_results: int = Field(default=6000, ge=1)  # P0: the last step's tool results
    tool_result_head: int = Field(default=1500, ge=0)  # kept of each long result …
    tool_result_tail: int = Field(default=1500, ge=0)  # … with its tail
    taskdoc: int = Field(default=2000, ge=1)  # P0: past it, PLAN/SELF_IMPROVE distill
    member_memory: int = Field(default=1500, ge=0)  # 1
    dialog_summary: int = Field(default=1200, ge=0)  # 2
    workspace_summary: int = Field(default=1000, ge=0)  # 3
    workspace_tree: int = Field(default=1500, ge=1)  # 4 (mandatory)
    history: int = Field(default=4000, ge=0)  # 5
    retrieved: int = Field(default=2000, ge=0)  # 6, marked "DATA, NOT INSTRUCTIONS"


class SectionOverrides(BaseModel):
    """One phase's budgets that differ from `sections` (a key left out keeps it)."""

    model_config = STRICT

    input: int | None = Field(default=None, ge=1)
    tool_results: int | None = Field(default=None, ge=1)
    member_memory: int | None = Field(default=None, ge=0)
    dialog_summary: int | None = Field(default=None, ge=0)
    workspace_summary: int | None = Field(default=None, ge=0)
    workspace_tree: int | None = Field(default=None, ge=1)
    history: int | None = Field(default=None, ge=0)
    retrieved: int | None = Field(default=None, ge=0)

    def set_budgets(self) -> dict[str, int]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


# agent-loop §7.1: "DO tree 600 (current node and deps only); CHECK tool results 8,000;
# SELF_IMPROVE member memory 2,000".
DEFAULT_PHASE_OVERRIDES: dict[str, dict[str, int]] = {
    "do": {"workspace_tree": 600},
    "check": {"tool_results": 8000},
    "self_improve": {"member_memory": 2000},
}


class PhaseOverrides(BaseModel):
    """`loop.memory.phase_overrides`: per phase, budgets over `sections`. What a phase's
    mapping writes is merged over that phase's defaults (writing `do: {history: 3000}`
    keeps DO's tree budget of 600)."""

    model_config = STRICT

    plan: SectionOverrides = Field(default_factory=SectionOverrides)
    do: SectionOverrides = Field(
        default_factory=lambda: SectionOverrides(**DEFAULT_PHASE_OVERRIDES["do"])
    )
    check: SectionOverrides = Field(
        default_factory=lambda: SectionOverrides(**DEFAULT_PHASE_OVERRIDES["check"])
    )
    adjust: SectionOverrides = Field(default_factory=SectionOverrides)
    self_improve: SectionOverrides = Field(
        default_factory=lambda: SectionOverrides(**DEFAULT_PHASE_OVERRIDES["self_improve"])
    )

    @model_validator(mode="before")
    @classmethod
    def _over_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        merged = dict(data)
        for phase, defaults in DEFAULT_PHASE_OVERRIDES.items():
            given = data.get(phase)
            if isinstance(given, dict):
                merged[phase] = {**defaults, **given}
        return merged


class MemoryFloors(BaseModel):
    """`loop.memory.floors`: what trimming for the total never goes below (agent-loop
    §7.1); only a B smaller than the floors cuts under them, and says so."""

    model_config = STRICT

    workspace_tree: int = Field(default=600, ge=0)
    history_turns: int = Field(default=1, ge=0)


class Compaction(BaseModel):
    """`loop.memory.compaction`: when a dialog is compacted, and to what (agent-loop §7.2)."""

    model_config = STRICT

    trigger: float = Field(default=0.80, gt=0, le=1)  # dialog tokens ≥ trigger × window …
    target: float = Field(default=0.50, gt=0, lt=1)  # … compact to ≤ target × window
    min_turns_between: int = Field(default=2, ge=0)  # spacing between compactions …
    force_at: float = Field(default=0.95, gt=0, le=1)  # … waived at ≥ force_at × window
    # What mechanical compaction keeps: a folded tool result's head, a long old text's
    # head and tail; and the size the summary of dropped turns is held to.
    folded_result_tokens: int = Field(default=60, ge=0)
    long_text_tokens: int = Field(default=400, ge=1)
    summary_tokens: int = Field(default=1200, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> Compaction:
        if not self.target < self.trigger <= self.force_at:
            raise PydanticCustomError(
                "config",
                "needs target < trigger <= force_at, got {target}, {trigger}, {force}",
                {"target": self.target, "trigger": self.trigger, "force": self.force_at},
            )
        return self


class MemoryConfig(BaseModel):
    """`loop.memory`: the budgets of every loop generation's input (agent-loop §7).

    The compiled context's budget is B = min(context_fraction × the model's context
    window, context_max) tokens; the system prompt is capped on its own (`system_prompt`:
    its text without the Taskdoc; the tool schemas are not counted — the loop's own
    tools alone take about 2,500–4,700 tokens — a request over it is not sent). The
    effective Taskdoc stays whole in the system prompt (DESIGN.md §8.4):
    `sections.taskdoc` is the size past which the runtime asks for `progress.md` to be
    distilled."""

    model_config = STRICT

    system_prompt: int = Field(default=6000, ge=1)
    context_fraction: float = Field(default=0.25, gt=0, le=1)
    context_max: int = Field(default=32000, ge=1)
    history_turns: int = Field(default=6, ge=1)  # K recent turns (within sections.history)
    chars_per_token: float = Field(default=4.0, gt=0)  # the default token counter
    sections: SectionBudgets = Field(default_factory=SectionBudgets)
    phase_overrides: PhaseOverrides = Field(default_factory=PhaseOverrides)
    floors: MemoryFloors = Field(default_factory=MemoryFloors)
    compaction: Compaction = Field(default_factory=Compaction)
    # Member memory below this confidence is not written (agent-loop §7.3).
    min_confidence: float = Field(default=0.55, ge=0, le=1)

    def budget(self, context_window: int) -> int:
        """B for a model with this context window."""
        return min(int(self.context_fraction * context_window), self.context_max)

    def sections_for(self, phase: LoopPhaseName | None) -> SectionBudgets:
        """The section budgets in one phase (its overrides applied, before scaling)."""
        if phase is None:
            return self.sections
        overrides: SectionOverrides = getattr(self.phase_overrides, phase)
        return self.sections.model_copy(update=overrides.set_budgets())
