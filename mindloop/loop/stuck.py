"""The stuck detector and the format-requery count: pure functions over a dialog's
recent steps (agent-loop §8.1–8.2).

A step is one assistant turn: its tool calls (the action, compared canonically) and
their results (the observation, compared by normalised digest, so a timestamp or a temp
path does not make two identical failures look different). The detector fires on

- `stuck_identical_pairs` (4) identical action/observation pairs in a row,
- `stuck_identical_errors` (3) identical actions in a row that each errored,
- `steps_used >= step_budget`,

and the DO entry then ends with CHECK_FAILED(STUCK). More than `format_requeries` (2)
steps in a row failing on format (L0: each failing result is the model's repair prompt)
end any phase with FORMAT_EXHAUSTED (`format_exhausted`; in DO the node is CHECK_FAILED).
Both read only the last few steps: `recent_steps(messages, n)` walks back from the end,
to the latest input at most.

In the running loop the DO phase's turn policy (`loop.policy.LoopPolicy.goes_on`) asks
after every step of the loop root (no other dialog pays for it): the first two rules stop
the drive there; the step budget — the node's `step_budget` across the DO entries of an
attempt, and the entry's step cap — the driver applies by the steps it lets a drive take
(`loop.step_budget`), and the entry ends the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from mindloop.config.loop_retries import RetriesConfig
from mindloop.dialogs.repeats import canonical_args, normalized_digest
from mindloop.loop.ladder import FailureClass, Outcome
from mindloop.providers.base import AssistantMessage, ChatMessage, ToolResultMessage

# Tool results that are FORMAT failures (agent-loop §8.1), by how the engine words them.
FORMAT_PREFIXES: tuple[str, ...] = (
    "unknown tool ",
    "invalid JSON arguments for ",
    "invalid arguments for ",
    "Error [TOOL_NOT_ALLOWED",  # TOOL_NOT_ALLOWED and TOOL_NOT_ALLOWED_IN_PHASE
    "Error [HINT_ILLEGAL]",
)
INTERRUPTED_PREFIX = "[mindloop] this call was interrupted"


class Step(BaseModel):
    """One assistant turn, as the detector compares it."""

    model_config = ConfigDict(frozen=True)

    action: tuple[tuple[str, str], ...]  # (tool, canonical arguments) per call; () for text
    observation: tuple[str, ...]  # digest per result
    errored: bool  # some result is an error
    failure: FailureClass | None  # FORMAT when a result is a format failure, else TOOL_ERROR


def classify_result(text: str, is_error: bool) -> FailureClass | None:
    """The failure class of one tool result (None: not a failure)."""
    if not is_error:
        return None
    if text.startswith(FORMAT_PREFIXES):
        return FailureClass.FORMAT
    if text.startswith(INTERRUPTED_PREFIX):
        return FailureClass.TRANSIENT
    return FailureClass.TOOL_ERROR


def recent_steps(messages: Sequence[ChatMessage], n: int) -> list[Step]:
    """The last `n` assistant turns of `messages` since the latest input (a user message:
    a phase's input, an answer, a note), oldest first: new input is a new situation, so
    turns before it never count toward being stuck."""
    out: list[Step] = []
    results: list[ToolResultMessage] = []
    for i in range(len(messages) - 1, -1, -1):
        if len(out) >= n:
            break
        msg = messages[i]
        if isinstance(msg, ToolResultMessage):
            results.append(msg)
        elif isinstance(msg, AssistantMessage):
            out.append(_step(msg, results[::-1]))
            results = []
        else:
            break
    out.reverse()
    return out


def _step(msg: AssistantMessage, results: list[ToolResultMessage]) -> Step:
    by_call = {r.call_id: r for r in results}
    action = tuple((c.name, canonical_args(c.arguments)) for c in msg.tool_calls)
    if not msg.tool_calls:
        action = (("", normalized_digest(msg.text)),)
    observation = []
    errored = False
    failure: FailureClass | None = None
    for call in msg.tool_calls:
        res = by_call.get(call.id)
        if res is None:
            observation.append("")
            continue
        observation.append(normalized_digest(res.content))
        cls = classify_result(res.content, res.is_error)
        if cls is not None:
            errored = True
            if failure is not FailureClass.FORMAT:
                failure = cls
    return Step(action=action, observation=tuple(observation), errored=errored, failure=failure)


class StuckRule(StrEnum):
    IDENTICAL_PAIRS = "identical_pairs"
    IDENTICAL_ERRORS = "identical_errors"
    STEP_BUDGET = "step_budget"


class Stuck(BaseModel):
    """The detector fired: the DO entry ends with CHECK_FAILED(STUCK)."""

    model_config = ConfigDict(frozen=True)

    rule: StuckRule
    detail: str

    def reason(self) -> str:
        """The failed node's reason: `STUCK (<rule>): <detail>`."""
        return f"{FailureClass.STUCK} ({self.rule}): {self.detail}"


def detect_stuck(
    steps: Sequence[Step],
    *,
    steps_used: int = 0,
    step_budget: int | None = None,
    pairs: int = 4,
    errors: int = 3,
) -> Stuck | None:
    """Whether the recent `steps` (oldest first) show the dialog going round in circles:
    `pairs` identical action/observation pairs, `errors` identical failing actions, or
    the step budget used up (not judged without a `step_budget`)."""
    if len(steps) >= pairs:
        last = steps[-pairs:]
        first = last[0]
        if all(s.action == first.action and s.observation == first.observation for s in last):
            return Stuck(
                rule=StuckRule.IDENTICAL_PAIRS,
                detail=f"the same action and observation {pairs} times in a row: {_name(first)}",
            )
    if len(steps) >= errors:
        last = steps[-errors:]
        first = last[0]
        if all(s.errored and s.action == first.action for s in last):
            return Stuck(
                rule=StuckRule.IDENTICAL_ERRORS,
                detail=f"the same action failed {errors} times in a row: {_name(first)}",
            )
    if step_budget is not None and steps_used >= step_budget:
        return Stuck(
            rule=StuckRule.STEP_BUDGET,
            detail=f"{steps_used} steps used of a budget of {step_budget}",
        )
    return None


def stuck_in(
    messages: Sequence[ChatMessage],
    *,
    steps_used: int = 0,
    step_budget: int | None = None,
    config: RetriesConfig,
) -> Stuck | None:
    """`detect_stuck` over the last steps of `messages`, with `loop.retries`' thresholds."""
    pairs, errors = config.stuck_identical_pairs, config.stuck_identical_errors
    return detect_stuck(
        recent_steps(messages, max(pairs, errors)),
        steps_used=steps_used,
        step_budget=step_budget,
        pairs=pairs,
        errors=errors,
    )


def format_failures(
    messages: Sequence[ChatMessage],
    limit: int,
    refused: Callable[[AssistantMessage], bool] | None = None,
) -> int:
    """How many of the latest steps in a row failed on format (at most `limit + 1` are
    looked at): a tool result worded as a FORMAT failure, or an output the phase's
    policy refused (`refused`, e.g. an illegal hint)."""
    count = 0
    results: list[ToolResultMessage] = []
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, ToolResultMessage):
            results.append(msg)
            continue
        if not isinstance(msg, AssistantMessage):
            continue
        bad = any(classify_result(r.content, r.is_error) is FailureClass.FORMAT for r in results)
        if refused is not None and refused(msg):
            bad = True
        results = []
        if not bad:
            break
        count += 1
        if count > limit:
            break
    return count


class FormatExhausted(BaseModel):
    """L0 of the ladder used up: `format_requeries` repair prompts (the failing results
    the model read) did not fix its output; the phase ends (in DO: node CHECK_FAILED)."""

    model_config = ConfigDict(frozen=True)

    failures: int  # FORMAT failures in a row, the last included

    def reason(self) -> str:
        return (
            f"{Outcome.FORMAT_EXHAUSTED}: {self.failures} steps in a row failed on format "
            f"(invalid arguments, unknown tools, calls not allowed in the phase); "
            f"{self.failures - 1} repair prompts did not help"
        )


def format_exhausted(messages: Sequence[ChatMessage], limit: int) -> FormatExhausted | None:
    """Whether the latest steps used up L0: more than `limit` FORMAT failures in a row."""
    count = format_failures(messages, limit)
    return FormatExhausted(failures=count) if count > limit else None


def _name(step: Step) -> str:
    return ", ".join(name or "(text)" for name, _ in step.action) or "(nothing)"
