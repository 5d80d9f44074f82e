"""`loop:` in team.yaml — the work loop's configuration, one strict model per area
(`loop_<area>.py`), composed here (DESIGN.md §8.12)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mindloop.config.loop_kb import KbConfig
from mindloop.config.loop_self_md import SelfMdConfig


class LoopConfig(BaseModel):
    """`loop:` — every key has the reference's default (agent-loop.md)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    self_md: SelfMdConfig = Field(default_factory=SelfMdConfig)
    kb: KbConfig = Field(default_factory=KbConfig)
