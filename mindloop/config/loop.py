"""`loop:` in team.yaml — the work loop's configuration, one strict model per area
(`loop_<area>.py`), composed here. Defaults are agent-loop.md's; a team.yaml without a
`loop:` block gets them all."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mindloop.config.loop_memory import MemoryConfig
from mindloop.config.loop_retries import RetriesConfig


class LoopConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    retries: RetriesConfig = Field(default_factory=RetriesConfig)
