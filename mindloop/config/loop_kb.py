"""`loop.kb:` in team.yaml — the one knowledge-base dialog of an rtws (DESIGN.md §8.11)
that `kb_request` messages are delivered to, and the default `kb` member.

    loop:
      kb:
        member: kb            # who keeps the knowledge base
        task_slug: kb         # its dialog works on tasks/<task_slug>.tsk/
        max_content_tokens: 1500
        retry_hours: 24       # a request not delivered by then is DEAD
        backoff_cap_seconds: 3600

When team.yaml declares no member with that id, a **default `kb` member** is used: hidden
from teammates' rosters, with the default responder's provider, model and model params,
the `fs` and `control` toolsets, allowed to write only under `kb/`. Its job is stated by
its task package's goals (`tasks/kb.tsk/goals.md`, written on first use). Declare a
member `kb` in team.yaml to choose another model, persona or ACLs. The default member is
built by `Config.member` (`config.default_kb_member`).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

STRICT = ConfigDict(extra="forbid", strict=True)

_MEMBER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_SLUG = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]*(?:\.[a-zA-Z0-9_-]+)*")

KB_WRITE_DIRS: tuple[str, ...] = ("kb/**",)
KB_TOOLSETS: tuple[str, ...] = ("fs", "control")


class KbConfig(BaseModel):
    """`loop.kb`: where KB requests go and how hard delivery tries."""

    model_config = STRICT

    member: str = "kb"
    task_slug: str = "kb"
    max_content_tokens: int = Field(default=1500, gt=0)
    retry_hours: float = Field(default=24.0, gt=0)
    backoff_cap_seconds: float = Field(default=3600.0, gt=0)
    # a sent request the KB has not answered after this long is redelivered (§9.2)
    reply_timeout_seconds: float = Field(default=3600.0, gt=0)

    @field_validator("member")
    @classmethod
    def _member(cls, value: str) -> str:
        if not _MEMBER_ID.fullmatch(value) or value.casefold() in ("self", "human", "tellasker"):
            raise ValueError(
                f"must be a member id (letters, digits, '_', '-', '.'; not self, human or "
                f"tellasker), got {value!r}"
            )
        return value

    @field_validator("task_slug")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _SLUG.fullmatch(value):
            raise ValueError(
                f"must be a task slug (letters, digits, '-', '_' and inner dots; the package "
                f"is tasks/<slug>.tsk), got {value!r}"
            )
        return value

    @property
    def task_path(self) -> str:
        return f"tasks/{self.task_slug}.tsk"
