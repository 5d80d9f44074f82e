"""A phase as the engine's turn policy: what the loop root may do while it is in a phase.

The engine asks the dialog's policy at every step (`dialogs.policy`); a loop root in a
phase gets `LoopPolicy(phase)`:

- **tools offered**: the member's own tools that the phase's row of the tool matrix allows,
  plus the loop-owned tools the phase grants whatever the member's toolsets
  (DESIGN.md §8.9); computed once per member and kept;
- **calls**: anything else is refused with `TOOL_NOT_ALLOWED_IN_PHASE` (a member tool the
  phase does not allow) or the engine's `TOOL_NOT_ALLOWED` (a tool the member lacks);
  and so is an allowed tool called with arguments the row does not allow (CHECK's shell
  beyond test runners, DO on a node other than its own, …: `phase_calls`), or
  `phase_end` with a hint the phase may not give (`HINT_ILLEGAL`);
- **tellasks**: `!?@human` only where the matrix has Q4H, `!?@member` and `!?@self` only
  where it has tellasks; a refused one becomes a failed tellask with the same code;
- **request**: the member's system prompt plus the phase's rules (byte-stable within the
  phase), the messages compiled within the memory budget (`dialogs.budgeted`) from the
  sections of agent-loop §7.1 (`request_sections`);
- **DO self-repair** (L2, `self_repair`): after a failed self-check the DO entry's
  changes are refused (`REPAIR_NOT_PROPOSED`) until `retry_propose` records the repair
  attempt;
- **goes on** until a `phase_end` call succeeds, until more than `format_requeries`
  steps in a row failed on format (L0 used up: the phase ends with FORMAT_EXHAUSTED), or,
  in DO, until the stuck detector (`loop.stuck`: identical action/observation pairs,
  identical failing actions) fires on the latest steps or a self-check fails with no
  repair attempt left (DO_EXHAUSTED); the driver then ends the entry (in DO with its
  node CHECK_FAILED) and says why (`take_stuck`); in SELF_IMPROVE, until
  `loop.self_improve.max_consecutive_errors` calls in a row failed (agent-loop §9.3: the
  run stops until its next trigger). Only loop roots run these checks, over their last
  few turns. In DO the drive also stops when a call opened a wait for the node (a timer,
  a system event, an approval): the node waits, the root does not — the entry ends there
  and routing takes up other work (`NodeWaits`);
- **the node worked** (`work_node`): DO's node, read from the loop state when the policy
  is given to a drive (its start, a segue), never per step; waits the root's calls open
  then belong to that node (`LiveDialog.node`, `loop.node_waits`);
- **the step's commit** (`before_commit`, the tool step's `CommitHook`): the hook the
  loop driving the root registered (`PolicyTable.hooks`), run inside the step's
  transaction (the driver closes the phase a `phase_end` ended, and routes, there).

Refusals are counted from the stored history when the phase ends (`count_refusals`, by
code): they are FORMAT failures of the retry ladder (agent-loop §8.1), and counting what
is stored costs nothing per step and survives a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mindloop.dialogs.budgeted import BudgetedRequests
from mindloop.dialogs.outcomes import StepOutcome
from mindloop.dialogs.policy import TOOL_NOT_ALLOWED, DefaultPolicy, Refusal
from mindloop.dialogs.routing import Route, RouteKind, refuse_route
from mindloop.i18n import Lang
from mindloop.loop.phase_calls import EntryLookup, PhaseCalls
from mindloop.loop.phase_texts import system_section
from mindloop.loop.phases import (
    LOOP_OWNED,
    PHASE_END,
    PHASES,
    TOOL_NOT_ALLOWED_IN_PHASE,
    Phase,
    PhaseSpec,
)
from mindloop.loop.request_sections import LoopSections
from mindloop.loop.retry_tool import ENDS_ENTRY, RETRY_TOOL
from mindloop.loop.self_improve import ErrorsInARow, errors_in_a_row
from mindloop.loop.self_repair import DoExhausted, SelfRepair
from mindloop.loop.stuck import FormatExhausted, Stuck, format_exhausted, stuck_in
from mindloop.providers.base import (
    AssistantMessage,
    GenerationRequest,
    ToolCall,
    ToolResultMessage,
)
from mindloop.store import MessageRecord
from mindloop.tools.base import Tool

if TYPE_CHECKING:
    from mindloop.dialogs.live import LiveDialog
    from mindloop.dialogs.request import RequestBuilder
    from mindloop.dialogs.tool_step import CommitHook

__all__ = [
    "TOOL_NOT_ALLOWED_IN_PHASE",
    "LoopPolicy",
    "NodeWaits",
    "PolicyTable",
    "Stop",
    "count_refusals",
]


@dataclass(frozen=True)
class NodeWaits:
    """Why `goes_on` ended a DO drive: a call opened a wait for the node worked, which
    now waits (IN_PROGRESS → WAIT, `loop.node_waits`); the root goes on with other work."""

    node: str
    wait_id: str

    def reason(self) -> str:
        return (
            f"node {self.node} waits ({self.wait_id}); the entry ends here and DO takes "
            "the node up again when its wait resolves"
        )


# Why `goes_on` stopped a drive (the driver ends the entry with its `reason()`).
Stop = Stuck | FormatExhausted | DoExhausted | ErrorsInARow | NodeWaits


def _none() -> BudgetedRequests | None:
    return None


def _no_sections() -> LoopSections | None:
    return None


_MEMBER_ROUTES = frozenset({RouteKind.FRESH, RouteKind.SESSION, RouteKind.FBR})


class LoopPolicy(DefaultPolicy):
    """The turn policy of a loop root in one phase (one instance per phase, shared)."""

    def __init__(
        self,
        phase: Phase,
        lang: Lang,
        memory: Callable[[], BudgetedRequests | None] = _none,
        entry_of: EntryLookup | None = None,
        sections: Callable[[], LoopSections | None] = _no_sections,
    ) -> None:
        self.spec: PhaseSpec = PHASES[phase]
        self.phase = phase
        self.lang: Lang = lang
        self._calls = PhaseCalls(self.spec)
        self._repair = SelfRepair(entry_of)  # DO: L2 self-repair (`self_repair`)
        # the loop root's current entry (its node, its targets), for the node scope
        self._entry_of = entry_of
        self._system = system_section(phase, lang, ", ".join(self.spec.hints))
        self._prompt: tuple[str | None, str] = (None, "")  # the last member prompt, joined
        self._offered: dict[str, list[Tool]] = {}
        self._memory = memory
        self._sections = sections
        # dialog id -> why goes_on stopped its drive
        self._stuck: dict[str, Stop] = {}
        # root id -> the hook of the loop driving it (`PolicyTable.hooks`, shared)
        self.hooks: dict[str, CommitHook] = {}

    def offered_tools(self, live: LiveDialog, parts: RequestBuilder) -> Sequence[Tool]:
        found = self._offered.get(live.member.id)
        if found is None:
            found = self._offered[live.member.id] = self._select(live, parts)
        return found

    def _select(self, live: LiveDialog, parts: RequestBuilder) -> list[Tool]:
        spec = self.spec
        own = [
            t
            for t in parts.member_tools(live.member, is_root=True)
            if t.name not in LOOP_OWNED and spec.allows(t.name)
        ]
        loop = []
        for name in sorted(LOOP_OWNED):
            tool = parts.tools.get(name)
            if tool is not None and spec.allows(name):
                loop.append(tool)
        return own + loop

    def compile_request(
        self, live: LiveDialog, parts: RequestBuilder, tools: Sequence[Tool]
    ) -> GenerationRequest:
        """The member's system prompt (persona, rules, the whole Taskdoc) and the phase's
        rules; the messages compiled within the memory budget B from the sections of
        agent-loop §7.1 (`request_sections`: the phase's input pinned, the last step
        summary, the tree, the workspace summary, the member's memory; then the dialog
        summary, the recent turns and the last step's results) when the loop has its
        memory, else the history as it is."""
        member = live.member
        taskdoc = parts.taskdoc(live)  # rendered once: for the prompt and to measure
        system = self._with_phase(parts.system_prompt(live, taskdoc=taskdoc))
        memory = self._memory()
        if memory is not None:
            builder = self._sections()
            own = builder.build(live, self.spec.phase) if builder is not None else None
            out = memory.compile_request(
                live,
                parts,
                tools,
                phase=self.spec.phase.value,
                system=system,
                sections=own.sections if own is not None else (),
                skip=own.skip if own is not None else None,
                since=own.since if own is not None else 0,
                taskdoc=taskdoc,
            )
            over = out.compiled.taskdoc_over
            if over is not None and self.spec.distills_taskdoc:  # sent whole, but say so
                return out.request.model_copy(
                    update={"system": f"{out.request.system}\n\n{over.ask(self.lang)}"}
                )
            return out.request
        return GenerationRequest.model_construct(
            model=parts.model_name(member),
            system=system,
            messages=parts.messages(live),
            tools=parts.specs(tools),
            params=parts.params(member, fbr=False),
            member=member.id,
        )

    def _with_phase(self, prompt: str) -> str:
        """The member's prompt and the phase's rules: joined once while the member's
        prompt is the very same text (a system prompt is kept while its parts are)."""
        held = self._prompt
        if held[0] is not prompt:
            held = self._prompt = (prompt, prompt + "\n\n" + self._system)
        return held[1]

    def check_call(
        self, live: LiveDialog, parts: RequestBuilder, name: str, offered: Sequence[Tool]
    ) -> Refusal | None:
        if any(t.name == name for t in offered):
            return None
        names = ", ".join(t.name for t in offered)
        if self.spec.allows(name):  # the phase would, the member's toolsets do not
            return Refusal(
                TOOL_NOT_ALLOWED,
                f"tool {name!r} is not one of @{live.member.id}'s tools; "
                f"available in phase {self.phase}: {names}",
            )
        return Refusal(
            TOOL_NOT_ALLOWED_IN_PHASE,
            f"tool {name!r} is not allowed in phase {self.phase}; available in this phase: {names}",
        )

    def check_arguments(
        self, live: LiveDialog, parts: RequestBuilder, call: ToolCall
    ) -> Refusal | None:
        """The row's cells that depend on the arguments (`phase_calls`); in DO, no change
        after a failed self-check until a repair attempt is recorded (`self_repair`)."""
        loop = parts.config.team.loop
        refusal = None
        if call.name in self._calls.watched:
            refusal = self._calls.refusal(
                live.id, call.name, call.arguments, loop.check, self._entry_of
            )
        if refusal is None and self.phase is Phase.DO:
            refusal = self._repair.refusal(live.id, live.history.messages, call, loop)
        return refusal

    def check_routes(
        self, live: LiveDialog, parts: RequestBuilder, routes: list[Route]
    ) -> list[Route]:
        out = []
        for route in routes:
            what = None
            if route.kind is RouteKind.HUMAN and not self.spec.q4h:
                what = "a question for the human (`!?@human`)"
            elif route.kind in _MEMBER_ROUTES and not self.spec.tellask:
                what = "a tellask (`!?@member`, `!?@self`)"
            if what is None:
                out.append(route)
            else:
                out.append(
                    refuse_route(
                        route,
                        TOOL_NOT_ALLOWED_IN_PHASE,
                        f"{what} is not allowed in phase {self.phase}; nothing was sent",
                    )
                )
        return out

    def work_node(self, live: LiveDialog) -> str | None:
        """DO's node, as the loop state has it (one indexed read per drive or segment)."""
        if self.phase is not Phase.DO or self._entry_of is None:
            return None
        entry = self._entry_of(live.id)
        return entry.node_id if entry is not None else None

    def goes_on(self, live: LiveDialog, parts: RequestBuilder, step: StepOutcome) -> bool:
        messages = live.history.messages
        if phase_end_called(messages):
            return False
        if live.node_waited is not None and live.node is not None:  # the node waits now
            self._stuck[live.id] = NodeWaits(live.node, live.node_waited)
            live.node_waited = None
            return False
        loop = parts.config.team.loop
        retries = loop.retries
        stop: Stop | None = format_exhausted(messages, retries.format_requeries)
        if stop is None and self.phase is Phase.DO:
            stop = stuck_in(messages, config=retries) or self._repair.exhausted(
                live.id, messages, loop
            )
        elif stop is None and self.phase is Phase.SELF_IMPROVE:
            stop = errors_in_a_row(messages, loop.self_improve.max_consecutive_errors)
        if stop is not None:
            self._stuck[live.id] = stop
            return False
        return True

    def before_commit(
        self, live: LiveDialog, stored: Sequence[MessageRecord], opened: bool
    ) -> None:
        """The tool step's hook (`CommitHook`): the driving loop's, if one registered."""
        hook = self.hooks.get(live.id)
        if hook is not None:
            hook.before_commit(live, stored, opened)

    def take_stuck(self, dialog_id: str) -> Stop | None:
        """Why `goes_on` stopped `dialog_id`'s drive (once), if it did: stuck, L0 used
        up, L2 used up (DO: a failed self-check with no repair attempt left),
        (SELF_IMPROVE) too many failed calls in a row, or (DO) the node waits."""
        return self._stuck.pop(dialog_id, None)


def phase_end_called(messages: Sequence[object]) -> bool:
    """Whether the latest step's tool results ended the phase: a successful `phase_end`,
    or a `retry_propose` that found its rung used up (the runtime ended the entry)."""
    for msg in reversed(messages):
        if isinstance(msg, ToolResultMessage):
            if msg.name == PHASE_END and not msg.is_error:
                return True
            if msg.name == RETRY_TOOL and msg.content.startswith(ENDS_ENTRY):
                return True
        elif isinstance(msg, AssistantMessage):
            return False
    return False


def count_refusals(messages: Iterable[MessageRecord], code: str = TOOL_NOT_ALLOWED_IN_PHASE) -> int:
    """Calls and tellasks refused with `code` (by default: as not allowed in the phase;
    `HINT_ILLEGAL`: `phase_end` calls whose hint was dropped), among stored messages."""
    prefix = f"Error [{code}]"

    def refused(m: MessageRecord) -> bool:
        if m.kind == "tool_result":
            return str(m.data.get("content", "")).startswith(prefix)
        return m.kind == "tellask_result" and m.data.get("code") == code

    return sum(1 for m in messages if refused(m))


class PolicyTable:
    """The policy of each phase in one work language (built once per runtime), with the
    loop's budgeted requests when it has them."""

    def __init__(
        self,
        lang: Lang,
        memory: Callable[[], BudgetedRequests | None] = _none,
        entry_of: EntryLookup | None = None,
        sections: Callable[[], LoopSections | None] = _no_sections,
    ) -> None:
        self.lang: Lang = lang
        self._policies = {p: LoopPolicy(p, lang, memory, entry_of, sections) for p in Phase}
        # root id -> the tool-step hook of the loop driving it, whatever its phase
        self.hooks: dict[str, CommitHook] = {}
        for policy in self._policies.values():
            policy.hooks = self.hooks

    def __getitem__(self, phase: Phase) -> LoopPolicy:
        return self._policies[phase]
