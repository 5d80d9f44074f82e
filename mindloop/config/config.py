"""`Config`: the loaded team and providers of one rtws, with the lookups the runtime needs."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mindloop.config.llm import LlmConfig, ModelInfo, ProviderConfig
from mindloop.config.loop_kb import KB_TOOLSETS, KB_WRITE_DIRS
from mindloop.config.mcp import McpConfig
from mindloop.config.team import MemberConfig, TeamConfig
from mindloop.errors import MindloopError


def default_kb_member(team: TeamConfig, member_id: str) -> MemberConfig:
    """The `kb` member used when team.yaml declares none (`config.loop_kb`): hidden, with
    the default responder's provider, model and params, `fs` and `control`, writing only
    under `kb/`."""
    base = team.members[team.default_responder]
    return MemberConfig(
        id=member_id,
        name="Knowledge base",
        provider=base.provider,
        model=base.model,
        model_params=base.model_params,
        toolsets=list(KB_TOOLSETS),
        write_dirs=list(KB_WRITE_DIRS),
        gofor="keeps the team's knowledge base (kb/)",
        hidden=True,
    )


class Config(BaseModel):
    """Everything `.minds/team.yaml`, `.minds/llm.yaml` and (when present) `.minds/mcp.yaml`
    say, resolved and cross-checked."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    rtws: Path
    team: TeamConfig
    llm: LlmConfig
    mcp: McpConfig = Field(default_factory=McpConfig)

    def member(self, member_id: str) -> MemberConfig:
        """The member with this id (the default `kb` member when team.yaml declares none
        under `loop.kb.member`); a clear error naming the known members otherwise."""
        found = self.team.members.get(member_id)
        if found is None and member_id == self.team.loop.kb.member:
            return default_kb_member(self.team, member_id)
        if found is None:
            known = ", ".join(self.team.members) or "(none)"
            raise MindloopError(
                f"unknown member {member_id!r}; members in .minds/team.yaml: {known}"
            )
        return found

    def provider_for(self, member_id: str) -> ProviderConfig:
        member = self.member(member_id)
        provider = self.llm.providers.get(member.provider)
        if provider is None:
            raise MindloopError(
                f"member {member_id!r} uses provider {member.provider!r}, "
                "which .minds/llm.yaml does not define"
            )
        return provider

    def model_info(self, member_id: str) -> ModelInfo:
        member = self.member(member_id)
        provider = self.provider_for(member_id)
        info = provider.models.get(member.model)
        if info is None:
            raise MindloopError(
                f"member {member_id!r} uses model {member.model!r}, which provider "
                f"{provider.name!r} in .minds/llm.yaml does not list"
            )
        return info

    def persona_text(self, member_id: str) -> str:
        """The member's persona file, or "" when it does not exist."""
        path = self.rtws / self.member(member_id).persona
        try:
            return path.read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return ""
