"""The turn policy seam: what the engine asks at every step of a drive.

The engine does the mechanics (claim, stream, persist, run tools, deliver); a policy
decides, per request and per call:

- which tools to offer for this request (`offered_tools`),
- how to compile the request: system prompt and messages (`compile_request`),
- whether a requested call may run (`check_call`: a refusal carries its own code and
  message, distinct from "unknown tool"), and with these arguments (`check_arguments`,
  asked only when `check_call` allowed it),
- whether the generation's output is acceptable at all (`check_output`: a refusal's
  message replaces the output and nothing in it runs) and which of its tellask routes
  may be carried out (`check_routes`; refuse one with `routing.refuse_route`),
- whether the drive goes on after a step (`goes_on`).

A policy also names the work-loop phase it stands for (`phase`, None outside the loop):
tools see it in their context (`ToolContext.phase`), so a workspace tool acts with the
phase's authority in the transition table.

`DefaultPolicy` is today's behaviour for root and side dialogs; FBR side dialogs run
`fbr.FbrPolicy`; the work loop's phases are policies too. A runtime picks a dialog's
policy once, when it loads the dialog, through a `PolicyResolver` (the runtime's
`policies=` argument): return a policy for the dialogs you want to govern, or `None` to
keep the default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mindloop.dialogs.outcomes import StepOutcome
from mindloop.errors import MindloopError
from mindloop.providers.base import GenerationRequest, ToolCall
from mindloop.store import DialogRecord
from mindloop.tools.base import Tool
from mindloop.toolsets import ROOT_ONLY_TOOLS

if TYPE_CHECKING:
    from mindloop.dialogs.live import LiveDialog
    from mindloop.dialogs.request import RequestBuilder
    from mindloop.dialogs.routing import Route
    from mindloop.dialogs.tellask.parser import TellaskCall

# The code of a call the policy refuses (the tool exists, but not for this request).
TOOL_NOT_ALLOWED = "TOOL_NOT_ALLOWED"


class PolicyError(MindloopError):
    """A request a policy cannot build or must not send: the drive stops with `code`."""

    code = "ERR_TURN_POLICY"


@dataclass(frozen=True)
class Refusal:
    """Why a policy refuses a call or a tellask: a stable code and a sentence."""

    code: str
    message: str

    def text(self) -> str:
        return f"Error [{self.code}]: {self.message}"


class TurnPolicy(Protocol):
    phase: str | None  # the work-loop phase it stands for (None: not a loop phase)

    def offered_tools(self, live: LiveDialog, parts: RequestBuilder) -> Sequence[Tool]: ...

    def compile_request(
        self, live: LiveDialog, parts: RequestBuilder, tools: Sequence[Tool]
    ) -> GenerationRequest: ...

    def check_call(
        self, live: LiveDialog, parts: RequestBuilder, name: str, offered: Sequence[Tool]
    ) -> Refusal | None: ...

    def check_arguments(
        self, live: LiveDialog, parts: RequestBuilder, call: ToolCall
    ) -> Refusal | None: ...

    def check_output(
        self,
        live: LiveDialog,
        parts: RequestBuilder,
        text: str,
        calls: Sequence[ToolCall],
        tellasks: Sequence[TellaskCall],
    ) -> Refusal | None: ...

    def check_routes(
        self, live: LiveDialog, parts: RequestBuilder, routes: list[Route]
    ) -> list[Route]: ...

    def goes_on(self, live: LiveDialog, parts: RequestBuilder, step: StepOutcome) -> bool: ...


PolicyResolver = Callable[[DialogRecord], "TurnPolicy | None"]


class DefaultPolicy:
    """Root and side dialogs as they have always behaved: the member's tools (root-only
    ones only at the root), the persona/Taskdoc system prompt, every route allowed, the
    drive goes on until the model answers or waits. Subclass it to change one decision."""

    phase: str | None = None

    def offered_tools(self, live: LiveDialog, parts: RequestBuilder) -> Sequence[Tool]:
        return parts.member_tools(live.member, is_root=live.is_root)

    def compile_request(
        self, live: LiveDialog, parts: RequestBuilder, tools: Sequence[Tool]
    ) -> GenerationRequest:
        member = live.member
        return GenerationRequest.model_construct(
            model=parts.model_name(member),
            system=parts.system_prompt(live),
            messages=parts.messages(live),
            tools=parts.specs(tools),
            params=parts.params(member, fbr=False),
            member=member.id,
        )

    def check_call(
        self, live: LiveDialog, parts: RequestBuilder, name: str, offered: Sequence[Tool]
    ) -> Refusal | None:
        if any(t.name == name for t in offered):
            return None
        if name in ROOT_ONLY_TOOLS and name in parts.selected_names(live.member):
            # Kept off a side dialog's tool list, but the call reaches the tool, whose own
            # "mainline-only" error names the maintainer to ask.
            return None
        names = ", ".join(t.name for t in offered) or "(none)"
        return Refusal(
            TOOL_NOT_ALLOWED,
            f"tool {name!r} is not available to @{live.member.id} in this dialog; "
            f"available tools: {names}",
        )

    def check_arguments(
        self, live: LiveDialog, parts: RequestBuilder, call: ToolCall
    ) -> Refusal | None:
        return None

    def check_output(
        self,
        live: LiveDialog,
        parts: RequestBuilder,
        text: str,
        calls: Sequence[ToolCall],
        tellasks: Sequence[TellaskCall],
    ) -> Refusal | None:
        return None

    def check_routes(
        self, live: LiveDialog, parts: RequestBuilder, routes: list[Route]
    ) -> list[Route]:
        return routes

    def goes_on(self, live: LiveDialog, parts: RequestBuilder, step: StepOutcome) -> bool:
        return True
