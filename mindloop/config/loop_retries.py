"""`loop.retries:` in team.yaml — the retry ladder and the stuck detector of agent-loop §8.

    loop:
      retries:
        format_requeries: 2      # L0: repair prompts per step, then FORMAT_EXHAUSTED
        identical_errors: 2      # L1: a third identical failing call is refused
        do_repairs: 2            # L2: self-repair attempts per DO entry, then DO_EXHAUSTED
        adjust_cycles: 3         # L3: ADJUST cycles per node, then FAILED (the user is told)
        adjust_to_plan: 1        # ADJUST → PLAN per task
        drive_steps: 200         # model steps per drive, then a question to the human
        drive_max_cost: 2.5      # optional: US dollars per drive, then the same question
        transient_backoff: [1, 2, 4]
        reflections: 3           # a node's last reflections shown in the prompt
        stuck: {identical_pairs: 4, identical_errors: 3}

Strict, like every other key: a misspelled key or a wrong type is a `file:line` error.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

STRICT = ConfigDict(extra="forbid", strict=True)


class StuckSpec(BaseModel):
    """The stuck detector's thresholds (agent-loop §8.1, after OpenHands' `stuck.py`)."""

    model_config = STRICT

    identical_pairs: int = Field(default=4, ge=2)  # identical action/observation pairs
    identical_errors: int = Field(default=3, ge=2)  # identical actions that each errored


class LoopRetriesConfig(BaseModel):
    """`loop.retries`: the ladder's limits, task caps and the stuck detector."""

    model_config = STRICT

    format_requeries: int = Field(default=2, ge=0)
    identical_errors: int = Field(default=2, ge=1)
    do_repairs: int = Field(default=2, ge=0)
    adjust_cycles: int = Field(default=3, ge=1)
    adjust_to_plan: int = Field(default=1, ge=0)
    drive_steps: int = Field(default=200, gt=0)
    drive_max_cost: float | None = Field(default=None, gt=0)
    transient_backoff: list[float] = Field(default_factory=lambda: [1.0, 2.0, 4.0])
    reflections: int = Field(default=3, ge=0)
    stuck: StuckSpec = Field(default_factory=StuckSpec)
