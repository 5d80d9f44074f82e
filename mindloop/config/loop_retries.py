"""`loop.retries:` in team.yaml — the retry ladder and the stuck detector (agent-loop §8):

    loop:
      retries: {format_requeries: 2, identical_tool_errors: 2, do_repairs: 2,
                adjust_per_node: 3, plan_reentries: 1, transient_backoff: [1s, 2s, 4s],
                stuck_identical_pairs: 4, stuck_identical_errors: 3,
                reflections_in_prompt: 3, reflection_tokens: 120, drive_steps: 200}

The optional cost cap per drive is `caps.drive.max_cost` (`config.caps`). Strict, like
every other key: a misspelled key or a wrong type is a `file:line` error.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mindloop.config.duration import Duration

STRICT = ConfigDict(extra="forbid", strict=True)


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
