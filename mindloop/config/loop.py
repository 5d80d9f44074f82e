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
      check: {test_runners: [pytest]}  # what CHECK's shell may run (§3)

Unknown keys, wrong types and explicit nulls are errors with the file, line and key path,
like every other key of team.yaml (the loader validates `TeamSpec`, which holds this).
Durations are written `30s`, `10m`, `48h`, `7d` or as seconds (`config.duration`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from mindloop.config.duration import Duration
from mindloop.config.loop_check import CheckConfig
from mindloop.config.loop_kb import KbConfig
from mindloop.config.loop_memory import LoopPhaseName, MemoryConfig
from mindloop.config.loop_retries import RetriesConfig
from mindloop.config.loop_self_md import SelfMdConfig

STRICT = ConfigDict(extra="forbid", strict=True)

__all__ = ["CheckConfig", "LoopConfig", "LoopPhaseName", "MemoryConfig", "RetriesConfig"]


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


# ---------------------------------------------------------------- self-improve (§9)


class SelfImproveConfig(BaseModel):
    """`loop.self_improve`: the cursored pass over the root dialog (agent-loop §9.3): the
    messages one run reads, and how many of its tool calls may fail in a row before the
    run stops (its messages then wait for the next run)."""

    model_config = STRICT

    batch_messages: int = Field(default=40, ge=1)
    max_consecutive_errors: int = Field(default=4, ge=1)


# ---------------------------------------------------------------- router (§4)


class RouterConfig(BaseModel):
    """`loop.router`: the standalone call that routes a message without a task to one
    (`mindloop ask`). It runs on `member`'s provider, model and model_params (default:
    `default_responder`), sees the `recent_tasks` most recently active tasks, and is
    called again when its answer is refused (an id that is not a candidate, a malformed
    decision), up to `max_attempts` calls in all: agent-loop §3 gives the Router 3 steps."""

    model_config = STRICT

    member: str | None = None
    recent_tasks: int = Field(default=20, ge=1)
    max_attempts: int = Field(default=3, ge=1)


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
    check: CheckConfig = Field(default_factory=CheckConfig)
