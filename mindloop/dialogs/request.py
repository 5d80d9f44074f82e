"""Building blocks of one generation's request: tools offered, system prompt, messages,
model params. Turn policies compose them (`policy.DefaultPolicy.compile_request`).

Everything here that does not change within a runtime's life (a member's tool selection,
tool specs, merged model params) is computed once and cached: the config is immutable
for the runtime's life. The history is the in-memory `History`, never re-read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mindloop.config import Config, MemberConfig, ModelInfo
from mindloop.dialogs.context import ContextBuilder
from mindloop.i18n import Lang
from mindloop.providers.base import ChatMessage, ToolSpec, UserMessage
from mindloop.providers.pricing import PriceTable
from mindloop.store import Reminder
from mindloop.tools.base import Tool
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import ROOT_ONLY_TOOLS

if TYPE_CHECKING:
    from mindloop.dialogs.live import LiveDialog


class RequestBuilder:
    """One per runtime: the parts every policy builds requests from."""

    def __init__(
        self, config: Config, tools: ToolRegistry, context: ContextBuilder, lang: Lang
    ) -> None:
        self.config = config
        self.tools = tools
        self.context = context
        self.lang: Lang = lang
        self.prices = PriceTable(config.llm)  # what each generation cost
        self._member_tools: dict[tuple[str, bool], list[Tool]] = {}
        self._specs: dict[str, ToolSpec] = {}
        self._params: dict[tuple[str, bool], dict[str, Any]] = {}
        self._models: dict[str, ModelInfo] = {}

    def member_tools(self, member: MemberConfig, *, is_root: bool) -> list[Tool]:
        """The tools a member's toolsets give it; root-only tools only in a root dialog."""
        key = (member.id, is_root)
        found = self._member_tools.get(key)
        if found is None:
            found = self.tools.select(member.toolsets, member.tools)
            if not is_root:
                found = [t for t in found if t.name not in ROOT_ONLY_TOOLS]
            self._member_tools[key] = found
        return found

    def selected_names(self, member: MemberConfig) -> frozenset[str]:
        """Every tool name the member's toolsets select, root-only ones included."""
        return frozenset(t.name for t in self.member_tools(member, is_root=True))

    def specs(self, tools: Sequence[Tool]) -> list[ToolSpec]:
        out = []
        for tool in tools:
            spec = self._specs.get(tool.name)
            if spec is None:
                spec = self._specs[tool.name] = ToolSpec(
                    name=tool.name, description=tool.description, parameters=tool.schema()
                )
            out.append(spec)
        return out

    def params(self, member: MemberConfig, *, fbr: bool) -> dict[str, Any]:
        """A member's merged model params as requests carry them (shared: providers only
        read them)."""
        key = (member.id, fbr)
        params = self._params.get(key)
        if params is None:
            merged = member.fbr_params() if fbr else member.model_params
            params = self._params[key] = merged.as_request_params()
        return params

    def model_info(self, member: MemberConfig) -> ModelInfo:
        """The member's model as the config lists it (its name, context window)."""
        found = self._models.get(member.id)
        if found is None:
            found = self._models[member.id] = self.config.model_info(member.id)
        return found

    def model_name(self, member: MemberConfig) -> str:
        return self.model_info(member).name or member.model

    def taskdoc(self, live: LiveDialog) -> str:
        """The effective Taskdoc the system prompt carries (whole)."""
        return self.context.taskdoc(live.record, live.root_member)

    def system_prompt(self, live: LiveDialog, *, taskdoc: str | None = None) -> str:
        """`taskdoc`: the dialog's effective Taskdoc when the caller has it (`taskdoc`)."""
        return self.context.system_prompt(
            live.record, live.member, live.root_member, taskdoc=taskdoc
        )

    def messages(self, live: LiveDialog) -> list[ChatMessage]:
        return with_reminders(live.history.messages, live.reminders)


def with_reminders(msgs: list[ChatMessage], reminders: Sequence[Reminder]) -> list[ChatMessage]:
    """Reminders go just before the last user message (rendered, never persisted)."""
    if not reminders:
        return msgs
    msgs = list(msgs)
    text = "[reminders]\n" + "\n".join(f"{r.position}. {r.content}" for r in reminders)
    note = UserMessage.model_construct(role="user", text=text)
    for i in range(len(msgs) - 1, -1, -1):
        if isinstance(msgs[i], UserMessage):
            msgs.insert(i, note)
            return msgs
    return [note, *msgs]
