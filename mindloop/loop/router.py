"""The Router: where a message without a task goes (agent-loop §3–4, DESIGN.md §8.8).

One standalone model call, not a dialog: the message is the only message, the candidate
tasks (id and topic) are in the system prompt, and the one tool offered,
`route_message`, takes a `RouterDecision` (forced where the provider supports forcing a
tool). The model proposes; the Router checks:

- exactly one call of `route_message`, its arguments a valid decision;
- an existing task only by an id from the list: an id that is not a candidate is refused,
  never matched loosely ("never guesses an id"); `create_new_task` is the way to a task
  that does not exist yet; `ask_which_task` (with two or more listed ids as `options`)
  puts an ambiguous message to the human ("which task should continue?", agent-loop §3).

A refused answer is sent back with the reason as the tool's result and the call is made
again, up to `loop.router.max_attempts` calls in all. Whatever happens, the run comes
back as a `RouterRecord` (accepted or failed, with every attempt and the usage) for the
caller to store: the Router itself writes nothing and never touches nodes, files or
dialogs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from mindloop.config import Config, MemberConfig
from mindloop.dialogs.generation import GenerationOutcome, run_generation
from mindloop.errors import MindloopError
from mindloop.events.bus import EventBus
from mindloop.i18n import Lang
from mindloop.loop.router_copy import (
    NEW_PACKAGE,
    NO_TASKS,
    REFUSALS,
    ROUTE_TOOL,
    SYSTEM,
    TOOL_DESCRIPTION,
)
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    GenerationRequest,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from mindloop.providers.pool import ProviderPool
from mindloop.providers.pricing import PriceTable
from mindloop.store import RouterAttempt, RouterCandidate, RouterDecision, RouterRecord

__all__ = ["ROUTE_TOOL", "Router", "RoutingFailed", "route_tool_spec"]

_SCHEMA_NOISE = ("title",)


class RoutingFailed(MindloopError):
    """The Router could not route a message; `record` (stored) says why."""

    def __init__(self, record: RouterRecord) -> None:
        super().__init__(f"{record.error} (nothing was posted; Router run {record.id})")
        self.record = record


def route_tool_spec(lang: Lang) -> ToolSpec:
    """`route_message`: its parameters are `RouterDecision`'s schema."""
    schema = RouterDecision.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        for key in _SCHEMA_NOISE:
            prop.pop(key, None)
    return ToolSpec(name=ROUTE_TOOL, description=TOOL_DESCRIPTION[lang], parameters=schema)


def render_candidates(candidates: Sequence[RouterCandidate], lang: Lang) -> str:
    if not candidates:
        return NO_TASKS[lang]
    lines = []
    for c in candidates:
        status = c.status.value if c.status is not None else NEW_PACKAGE[lang]
        lines.append(f"- {c.task} — {c.topic} [{status}]")
    return "\n".join(lines)


def _forced(params: dict[str, Any]) -> dict[str, Any]:
    """The member's request params with `route_message` forced as the only answer, where
    the API allows it (Anthropic refuses a forced tool with extended thinking on)."""
    out = copy.deepcopy(params)
    openai = out.setdefault("openai", {})
    openai["tool_choice"] = {"type": "function", "function": {"name": ROUTE_TOOL}}
    anthropic = out.setdefault("anthropic", {})
    if (anthropic.get("thinking") or {}).get("type") != "enabled":
        anthropic["tool_choice"] = {"type": "tool", "name": ROUTE_TOOL}
    return out


class Router:
    """Routes messages for one rtws's team: on `loop.router.member`'s provider, model
    and model_params (default: the default responder), through `providers` (the
    runtime's pool: retries, deadlines and concurrency as llm.yaml sets them)."""

    def __init__(self, config: Config, providers: ProviderPool, *, lang: Lang) -> None:
        self.config = config
        self.providers = providers
        self.lang: Lang = lang
        self.prices = PriceTable(config.llm)
        settings = config.team.loop.router
        self.member: MemberConfig = config.member(settings.member or config.team.default_responder)
        self.max_attempts = settings.max_attempts
        self.model = config.model_info(self.member.id).name or self.member.model
        self._tool = route_tool_spec(lang)
        self._text = REFUSALS[lang]

    def request(
        self, candidates: Sequence[RouterCandidate], messages: list[ChatMessage]
    ) -> GenerationRequest:
        system = SYSTEM[self.lang].format(
            tool=ROUTE_TOOL, tasks=render_candidates(candidates, self.lang)
        )
        return GenerationRequest(
            model=self.model,
            system=system,
            messages=messages,
            tools=[self._tool],
            params=_forced(self.member.model_params.as_request_params()),
            member=self.member.id,
        )

    async def route(self, message: str, candidates: Sequence[RouterCandidate]) -> RouterRecord:
        """Decide where `message` goes among `candidates`: an accepted record with its
        `decision`, or a failed one with its `error` (the model call failed, or no answer
        was acceptable within `max_attempts` calls). Never raises for either."""
        ids = [c.task for c in candidates]
        messages: list[ChatMessage] = [UserMessage(text=message)]
        record = RouterRecord(
            message=message,
            candidates=list(candidates),
            status="failed",
            member=self.member.id,
            provider=self.member.provider,
            model=self.model,
        )
        problem = ""
        for _ in range(self.max_attempts):
            out = GenerationOutcome()
            stream = self.providers.stream(self.member.provider, self.request(candidates, messages))
            await run_generation(stream, EventBus(), "router", out)
            self._count(record, out)
            if out.error is not None:
                record.attempts.append(RouterAttempt(answer=out.text, error=str(out.error)))
                record.error = f"the Router's model call failed: {out.error}"
                return record
            decision, problem, answer = self._judge(out, ids)
            record.attempts.append(
                RouterAttempt(
                    answer=answer,
                    error=problem or None,
                    input_tokens=out.input_tokens,
                    output_tokens=out.output_tokens,
                )
            )
            if decision is not None:
                return record.model_copy(update={"status": "accepted", "decision": decision})
            messages = [*messages, *self._repair(out, problem)]
        record.error = (
            f"the Router gave no acceptable decision in {self.max_attempts} call(s); "
            f"last refusal: {problem}"
        )
        return record

    def _count(self, record: RouterRecord, out: GenerationOutcome) -> None:
        for name in ("input_tokens", "output_tokens"):
            got = getattr(out, name)
            if got is not None:
                setattr(record, name, (getattr(record, name) or 0) + got)
        cost = self.prices.cost(
            self.member.provider, self.model, out.input_tokens, out.output_tokens
        )
        if cost is not None:
            record.cost_usd = (record.cost_usd or 0.0) + cost

    def _judge(
        self, out: GenerationOutcome, ids: list[str]
    ) -> tuple[RouterDecision | None, str, str]:
        """(the decision, "") or (None, why it is refused); and the answer as given."""
        t = self._text
        if not out.calls:
            return None, t["no_call"].format(tool=ROUTE_TOOL), out.text
        call = out.calls[0]
        if len(out.calls) > 1 or call.name != ROUTE_TOOL:
            got = ", ".join(c.name for c in out.calls)
            return None, t["wrong_call"].format(tool=ROUTE_TOOL, got=got), call.arguments
        try:
            decision = RouterDecision.model_validate(json.loads(call.arguments or "{}"))
        except (ValueError, ValidationError) as exc:
            return None, t["invalid"].format(why=_why(exc)), call.arguments
        for target in (decision.target_task_id, *decision.options):
            if target is not None and target not in ids:
                listed = ", ".join(ids) or "-"
                return None, t["not_listed"].format(id=target, ids=listed), call.arguments
        return decision, "", call.arguments

    def _repair(self, out: GenerationOutcome, problem: str) -> list[ChatMessage]:
        """The refused answer and why, as the model sees it on its next call: every call
        gets a result (APIs require one per call id); the first carries the refusal."""
        t = self._text
        refusal = t["frame"].format(why=problem, tool=ROUTE_TOOL)
        if not out.calls:
            return [AssistantMessage(text=out.text), UserMessage(text=refusal)]
        results: list[ChatMessage] = [
            ToolResultMessage(
                call_id=call.id,
                name=call.name,
                content=refusal if i == 0 else t["ignored"].format(tool=ROUTE_TOOL),
                is_error=True,
            )
            for i, call in enumerate(out.calls)
        ]
        return [AssistantMessage(text=out.text, tool_calls=list(out.calls)), *results]


def _why(exc: Exception) -> str:
    """A validation failure in a line the model can act on."""
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc else msg)
        return "; ".join(parts)
    return f"not JSON ({exc})"
