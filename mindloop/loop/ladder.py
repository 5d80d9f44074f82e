"""The failure taxonomy and the retry ladder of agent-loop §8.1–8.2, as data.

Each failure class counts toward one rung of the ladder (or none); each rung has a limit
(`loop.retries` in team.yaml), a scope it is counted in, and what happens when it is
exhausted. `after_failure(level, failures, config)` is the one decision: retry, or the
rung's exhaustion outcome. Transient failures back off (1, 2, 4 s: the tool registry
retries a `TransientToolError`) and then count as tool errors; waiting conditions count toward nothing (the node waits). The task caps
(ADJUST → PLAN once per task, 200 model steps per drive, an optional cost per drive) end
in a question to the human (`drive_cap`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from mindloop.config.caps import format_usd
from mindloop.config.loop_retries import RetriesConfig
from mindloop.i18n import Lang


class FailureClass(StrEnum):
    TRANSIENT = "TRANSIENT"  # HTTP 429/5xx, timeout, sandbox restart
    FORMAT = "FORMAT"  # invalid arguments, unknown tool, malformed tellask, illegal hint
    TOOL_ERROR = "TOOL_ERROR"  # non-zero exit, an exception that is not transient
    VERIFY_FAIL = "VERIFY_FAIL"  # DO's self-check fails (lint, types, build, tests, criteria)
    CHECK_FAIL = "CHECK_FAIL"  # an independent check fails
    BENCH_FAIL = "BENCH_FAIL"
    WAIT_NEGATIVE = "WAIT_NEGATIVE"  # an approval rejected; a member failed or timed out
    STUCK = "STUCK"  # the stuck detector fired (`loop.stuck`)
    WAITING_CONDITION = "WAITING_CONDITION"  # missing information, approval or dependency


class Level(StrEnum):
    L0 = "L0"  # format requery
    L1 = "L1"  # an identical failing tool call
    L2 = "L2"  # DO self-repair
    L3 = "L3"  # ADJUST cycles


class Outcome(StrEnum):
    """What exhausting a rung does."""

    FORMAT_EXHAUSTED = "FORMAT_EXHAUSTED"  # the phase ends (in DO: node → CHECK_FAILED)
    CALL_REFUSED = "CALL_REFUSED"  # the identical call is refused; counts toward STUCK
    DO_EXHAUSTED = "DO_EXHAUSTED"  # node → CHECK_FAILED(DO_EXHAUSTED), so ADJUST analyses it
    NODE_FAILED = "NODE_FAILED"  # node → FAILED and the user is told


@dataclass(frozen=True)
class FailureRule:
    counts_toward: Level | None
    note: str  # what happens, in one line (printed in the docs)


TAXONOMY: dict[FailureClass, FailureRule] = {
    FailureClass.TRANSIENT: FailureRule(None, "back off 1, 2, 4 s, then TOOL_ERROR"),
    FailureClass.FORMAT: FailureRule(Level.L0, "repair prompt"),
    FailureClass.TOOL_ERROR: FailureRule(Level.L1, "the model sees the error"),
    FailureClass.VERIFY_FAIL: FailureRule(Level.L2, "a self-repair attempt"),
    FailureClass.CHECK_FAIL: FailureRule(Level.L3, "node → CHECK_FAILED → ADJUST"),
    FailureClass.BENCH_FAIL: FailureRule(Level.L3, "node → CHECK_FAILED → ADJUST"),
    FailureClass.WAIT_NEGATIVE: FailureRule(Level.L3, "node → CHECK_FAILED → ADJUST"),
    FailureClass.STUCK: FailureRule(Level.L3, "the DO entry ends: CHECK_FAILED(STUCK)"),
    FailureClass.WAITING_CONDITION: FailureRule(None, "go to WAIT"),
}


@dataclass(frozen=True)
class Rung:
    limit_key: str  # the attribute of `RetriesConfig` holding the limit
    scope: str  # what the count is per
    outcome: Outcome
    node_status: str | None  # the node's status when exhausted (None: unchanged)
    tell_user: bool = False


LADDER: dict[Level, Rung] = {
    Level.L0: Rung("format_requeries", "step", Outcome.FORMAT_EXHAUSTED, "CHECK_FAILED"),
    Level.L1: Rung("identical_tool_errors", "(tool, canonical_args)", Outcome.CALL_REFUSED, None),
    Level.L2: Rung("do_repairs", "DO entry", Outcome.DO_EXHAUSTED, "CHECK_FAILED"),
    Level.L3: Rung("adjust_per_node", "node", Outcome.NODE_FAILED, "FAILED", tell_user=True),
}


def limit(level: Level, config: RetriesConfig) -> int:
    value: int = getattr(config, LADDER[level].limit_key)
    return value


class Retry(BaseModel):
    """Try again: this is retry number `attempt` (1-based) of `limit`."""

    model_config = ConfigDict(frozen=True)

    level: Level
    attempt: int
    limit: int


class Exhausted(BaseModel):
    """The rung is used up: do `outcome` (the node moves to `node_status`)."""

    model_config = ConfigDict(frozen=True)

    level: Level
    outcome: Outcome
    node_status: str | None
    tell_user: bool


def after_failure(level: Level, failures: int, config: RetriesConfig) -> Retry | Exhausted:
    """The ladder's decision after the `failures`-th failure (1-based) counted on `level`
    in its scope: L0 allows `format_requeries` repair prompts, so the third failure of a
    step exhausts it; L1 refuses the call after `identical_tool_errors`; L2 allows
    `do_repairs` attempts; L3 allows `adjust_per_node` cycles."""
    n = limit(level, config)
    allowed = n - 1 if level is Level.L1 else n  # L1: the limit counts errors, not retries
    if failures <= allowed:
        return Retry(level=level, attempt=failures, limit=n)
    rung = LADDER[level]
    return Exhausted(
        level=level, outcome=rung.outcome, node_status=rung.node_status, tell_user=rung.tell_user
    )


def may_replan(replans: int, config: RetriesConfig) -> bool:
    """ADJUST → PLAN is allowed `plan_reentries` times per task."""
    return replans < config.plan_reentries


class CapKind(StrEnum):
    STEPS = "steps"
    COST = "cost"


_CAP_QUESTION: dict[tuple[Lang, CapKind], str] = {
    ("en", CapKind.STEPS): "The work loop has taken {used} model steps since your last input "
    "(the cap is {cap}, loop.retries.drive_steps). Continue?",
    ("en", CapKind.COST): "The work loop has spent {used} since your last input (the cap "
    "is {cap}, caps.drive.max_cost). Continue?",
    ("zh", CapKind.STEPS): "自你上次输入以来，工作循环已执行 {used} 个模型步骤（上限为 {cap}，"
    "loop.retries.drive_steps）。是否继续？",
    ("zh", CapKind.COST): "自你上次输入以来，工作循环已花费 {used}（上限为 {cap}，"
    "caps.drive.max_cost）。是否继续？",
}


class DriveCap(BaseModel):
    """A drive cap reached: the loop asks the human whether to continue (`question`)."""

    model_config = ConfigDict(frozen=True)

    kind: CapKind
    used: float
    cap: float

    def question(self, lang: Lang = "en") -> str:
        text = _CAP_QUESTION.get((lang, self.kind), _CAP_QUESTION[("en", self.kind)])
        if self.kind is CapKind.COST:  # dollars as people read them ($0.0144, $12.34)
            return text.format(used=format_usd(self.used), cap=format_usd(self.cap))
        return text.format(used=int(self.used), cap=int(self.cap))


def drive_cap(
    steps: int, cost_usd: float, config: RetriesConfig, max_cost: float | None = None
) -> DriveCap | None:
    """The cap a drive reached — `steps` model steps and `cost_usd` since the last user
    input or answer; `max_cost` is `caps.drive.max_cost` — or None while both leave
    room."""
    if steps >= config.drive_steps:
        return DriveCap(kind=CapKind.STEPS, used=steps, cap=config.drive_steps)
    if max_cost is not None and cost_usd >= max_cost:
        return DriveCap(kind=CapKind.COST, used=cost_usd, cap=max_cost)
    return None
