"""`loop:` in team.yaml — the work loop's settings, one block per area.

Each area is a strict model in its own file (`loop_<area>.py`) with agent-loop's defaults;
this model composes them. A block left out takes every default.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mindloop.config.loop_waits import WaitsConfig


class LoopConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    waits: WaitsConfig = Field(default_factory=WaitsConfig)
