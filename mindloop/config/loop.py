"""`loop:` in team.yaml — the work loop's configuration, one strict model per area
(`loop_<area>.py`), composed here. Defaults are agent-loop.md's; a team.yaml without a
`loop:` block gets them all."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mindloop.config.loop_memory import LoopMemoryConfig
from mindloop.config.loop_retries import LoopRetriesConfig


class LoopConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    memory: LoopMemoryConfig = Field(default_factory=LoopMemoryConfig)
    retries: LoopRetriesConfig = Field(default_factory=LoopRetriesConfig)
