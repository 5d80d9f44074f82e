"""`loop:` in team.yaml: every number of the work loop, with the reference's defaults.

`reference/agent-loop.md` says "every number is a configuration default, not a
constant; configuration keys live in the team config under `loop:`" (DESIGN.md §8.12).
`LoopConfig` is a composition of one small strict model per area, so an area is read as
`config.team.loop.<area>.<knob>` and a new area is one more field here:

    loop:
      phases: {do: 16}                 # step caps per phase entry (§3)
      memory: {sections: {history: 6000}}   # token budgets of the compiled context (§7)
      waits: {user_input: {timeout: 24h}}   # wait kinds' timeouts and reminders (§6.2)
      retries: {adjust_per_node: 2}    # the retry ladder (§8)
      self_md: {git_commit: true}      # self-improvement's self.md writes (§9.1)
      router: {recent_tasks: 10}       # the Router (§4)

Unknown keys, wrong types and explicit nulls are errors with the file, line and key path,
like every other key of team.yaml (the loader validates `TeamSpec`, which holds this).
Durations are written `30s`, `10m`, `48h`, `7d` or as seconds (`config.duration`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from mindloop.config.duration import Duration
from mindloop.config.loop_kb import KbConfig
from mindloop.config.loop_self_md import SelfMdConfig

STRICT = ConfigDict(extra="forbid", strict=True)

LoopPhaseName = Literal["plan", "do", "check", "adjust", "self_improve"]


# ---------------------------------------------------------------- phases and nodes (§3, §5)


class PhaseSteps(BaseModel):
    """`loop.phases`: model steps one entry into a phase may take (agent-loop §3). The
    Router's attempts are `loop.router.max_attempts` (it is one call, not a phase)."""

    model_config = STRICT

    plan: int = Field(default=8, ge=1)
    do: int = Field(default=12, ge=1)
    check: int = Field(default=8, ge=1)
    adjust: int = Field(default=6, ge=1)
    self_improve: int = Field(default=6, ge=1)

    def for_phase(self, phase: LoopPhaseName) -> int:
        return int(getattr(self, phase))


class NodeDefaults(BaseModel):
    """`loop.nodes`: a node's DO step budget per attempt, and how far PLAN may raise it
    (agent-loop §5.1 `step_budget`)."""

    model_config = STRICT

    step_budget: int = Field(default=12, ge=1)
    max_step_budget: int = Field(default=30, ge=1)

    @model_validator(mode="after")
    def _budget_within_max(self) -> NodeDefaults:
        if self.step_budget > self.max_step_budget:
            raise PydanticCustomError(
                "config",
                "step_budget ({budget}) is above max_step_budget ({most})",
                {"budget": self.step_budget, "most": self.max_step_budget},
            )
        return self


# ---------------------------------------------------------------- memory (§7)


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
    """`loop.memory.floors`: what trimming never goes below (agent-loop §7.1)."""

    model_config = STRICT

    workspace_tree: int = Field(default=600, ge=1)
    history_turns: int = Field(default=1, ge=1)


class Compaction(BaseModel):
    """`loop.memory.compaction`: when a dialog is compacted, and to what (agent-loop §7.2)."""

    model_config = STRICT

    trigger: float = Field(default=0.80, gt=0, le=1)  # dialog tokens ≥ trigger × window …
    target: float = Field(default=0.50, gt=0, lt=1)  # … compact to ≤ target × window
    min_turns_between: int = Field(default=2, ge=0)  # spacing between compactions …
    force_at: float = Field(default=0.95, gt=0, le=1)  # … waived at ≥ force_at × window
    idle_task_end: Duration = 86400.0  # a task idle this long ends (→ SELF_IMPROVE)

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
    window, context_max) tokens; the system prompt is capped on its own. The effective
    Taskdoc stays whole in the system prompt (DESIGN.md §8.4): `sections.taskdoc` is the
    size past which the runtime asks for `progress.md` to be distilled."""

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

    def budget(self, context_window: int) -> int:
        """B for a model with this context window."""
        return min(int(self.context_fraction * context_window), self.context_max)

    def sections_for(self, phase: LoopPhaseName) -> SectionBudgets:
        """The section budgets in one phase (its overrides applied, before scaling)."""
        overrides: SectionOverrides = getattr(self.phase_overrides, phase)
        return self.sections.model_copy(update=overrides.set_budgets())


# ---------------------------------------------------------------- waits (§6)


class UserInputWait(BaseModel):
    """WAIT_USER_INPUT: after `timeout` the stated default is assumed (the user is told)
    if the question has one, else a reminder every `remind_every`."""

    model_config = STRICT

    timeout: Duration = 48 * 3600.0
    remind_every: Duration = 48 * 3600.0


class ApprovalWait(BaseModel):
    """WAIT_USER_APPROVAL: never times out, never auto-approved; reminded."""

    model_config = STRICT

    remind_every: Duration = 72 * 3600.0


class SubagentWait(BaseModel):
    """WAIT_SUBAGENT: cancelled (→ FAIL) after `active` of the side dialog's own working
    time (its own Q4H waits excluded) or `wall_clock`, whichever comes first."""

    model_config = STRICT

    active: Duration = 30 * 60.0
    wall_clock: Duration = 24 * 3600.0


class ToolWait(BaseModel):
    """WAIT_TOOL: an async tool's default timeout (a tool may declare its own)."""

    model_config = STRICT

    timeout: Duration = 10 * 60.0


class TimerWait(BaseModel):
    """WAIT_TIMER: how far ahead `wait_for{fire_at}` may be set."""

    model_config = STRICT

    max_ahead: Duration = 24 * 3600.0


class SystemEventWait(BaseModel):
    """WAIT_SYSTEM_EVENT: fails after `timeout`."""

    model_config = STRICT

    timeout: Duration = 24 * 3600.0


class WaitsConfig(BaseModel):
    """`loop.waits`: timeouts and reminders of the six wait kinds (agent-loop §6.2), and
    how long a wait may last before resuming counts as stale (§6.3, step 4)."""

    model_config = STRICT

    user_input: UserInputWait = Field(default_factory=UserInputWait)
    approval: ApprovalWait = Field(default_factory=ApprovalWait)
    subagent: SubagentWait = Field(default_factory=SubagentWait)
    tool: ToolWait = Field(default_factory=ToolWait)
    timer: TimerWait = Field(default_factory=TimerWait)
    system_event: SystemEventWait = Field(default_factory=SystemEventWait)
    stale_after: Duration = 24 * 3600.0


# ---------------------------------------------------------------- retries (§8)


class RetriesConfig(BaseModel):
    """`loop.retries`: the retry ladder and the stuck detector (agent-loop §8)."""

    model_config = STRICT

    format_requeries: int = Field(default=2, ge=0)  # L0: repair prompts per step
    identical_tool_errors: int = Field(default=2, ge=1)  # L1: the next identical call is refused
    do_repairs: int = Field(default=2, ge=0)  # L2: per DO entry
    adjust_per_node: int = Field(default=3, ge=1)  # L3: then FAILED, the user told
    plan_reentries: int = Field(default=1, ge=0)  # ADJUST → PLAN, per task
    transient_backoff: list[Duration] = Field(
        default_factory=lambda: [1.0, 2.0, 4.0], min_length=1
    )  # TRANSIENT failures: waits, then TOOL_ERROR
    stuck_identical_pairs: int = Field(default=4, ge=2)  # identical action/observation pairs
    stuck_identical_errors: int = Field(default=3, ge=2)  # identical erroring actions
    reflections_in_prompt: int = Field(default=3, ge=0)  # a node's last reflections shown
    reflection_tokens: int = Field(default=120, ge=1)
    drive_steps: int = Field(default=200, ge=1)  # model steps per drive, then a Q4H asks


# ---------------------------------------------------------------- self-improve (§9)


class SelfImproveConfig(BaseModel):
    """`loop.self_improve`: the cursored pass over the root dialog (agent-loop §9.3)."""

    model_config = STRICT

    batch_messages: int = Field(default=40, ge=1)
    max_consecutive_errors: int = Field(default=4, ge=1)


# ---------------------------------------------------------------- router (§4)


class RouterConfig(BaseModel):
    """`loop.router`: the standalone call that routes a message without a task to one
    (`mindloop ask`). It runs on `member`'s provider, model and model_params (default:
    `default_responder`), sees the `recent_tasks` most recently active tasks, and is
    called again once (`max_attempts: 2`) when its answer is refused (an id that is not a
    candidate, a malformed decision)."""

    model_config = STRICT

    member: str | None = None
    recent_tasks: int = Field(default=20, ge=1)
    max_attempts: int = Field(default=2, ge=1)


# ---------------------------------------------------------------- the composition


class LoopConfig(BaseModel):
    """`loop:` — one field per area (add an area with one line)."""

    model_config = STRICT

    phases: PhaseSteps = Field(default_factory=PhaseSteps)
    nodes: NodeDefaults = Field(default_factory=NodeDefaults)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    waits: WaitsConfig = Field(default_factory=WaitsConfig)
    retries: RetriesConfig = Field(default_factory=RetriesConfig)
    self_md: SelfMdConfig = Field(default_factory=SelfMdConfig)
    kb: KbConfig = Field(default_factory=KbConfig)
    self_improve: SelfImproveConfig = Field(default_factory=SelfImproveConfig)
    router: RouterConfig = Field(default_factory=RouterConfig)
