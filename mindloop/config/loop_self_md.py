"""`loop.self_md:` in team.yaml — how the work loop's SELF_IMPROVE phase may change a
member's `.minds/team/<member>/self.md` through `self_md_patch` (agent-loop §9.1).

    loop:
      self_md:
        protected_sections: ["Hard rules"]   # humans only (titles, case-insensitive)
        git_commit: false                    # commit self.md + its history on each change
        max_tokens: 1500                     # the whole file
        max_net_tokens_per_call: 200         # growth of one call
        max_calls_per_run: 3                 # accepted calls per SELF_IMPROVE run
        require_approval: false              # calls are proposed; `mindloop approve` applies

A section is protected when its title is listed here or when its heading ends with
`(protected)` (`## Safety (protected)`); see `toolsets.self_md`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

STRICT = ConfigDict(extra="forbid", strict=True)

DEFAULT_PROTECTED_SECTIONS: tuple[str, ...] = ("Hard rules",)


class SelfMdConfig(BaseModel):
    """`loop.self_md`: limits and traceability of `self_md_patch`."""

    model_config = STRICT

    # Section titles (the text after `## `) only humans edit; compared case-insensitively.
    protected_sections: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED_SECTIONS))
    # Commit self.md and its history file (only those two) after each change, when the
    # rtws is a git repository. Off by default: a runtime committing into a user's
    # repository is opted into, not discovered.
    git_commit: bool = False
    max_tokens: int = Field(default=1500, gt=0)  # the whole file, characters / 4
    max_net_tokens_per_call: int = Field(default=200, gt=0)
    # Accepted (applied or proposed) calls per SELF_IMPROVE run — one entry of the phase:
    # a later pass over the task has its own — counted from the history file, so a
    # resumed run counts what it already did.
    max_calls_per_run: int = Field(default=3, gt=0)
    # Each call is PROPOSED (a `proposed` history entry and an approval, self.md
    # unchanged); SELF_IMPROVE does not wait: `mindloop approve` applies it exactly as
    # proposed, once, `reject` records it rejected. Off by default (agent-loop §9.1).
    require_approval: bool = False

    @field_validator("protected_sections")
    @classmethod
    def _titles(cls, titles: list[str]) -> list[str]:
        for title in titles:
            if not title.strip():
                raise ValueError("a protected section title must not be empty")
            if "\n" in title:
                raise ValueError(f"a section title is one line, got {title!r}")
        return titles
