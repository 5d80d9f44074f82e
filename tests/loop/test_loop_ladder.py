"""The failure taxonomy and the retry ladder (agent-loop §8.1–8.2) as a table."""

from __future__ import annotations

import pytest

from mindloop.config.loop_retries import RetriesConfig
from mindloop.loop.ladder import (
    LADDER,
    TAXONOMY,
    CapKind,
    Exhausted,
    FailureClass,
    Level,
    Outcome,
    Retry,
    after_failure,
    drive_cap,
    may_replan,
)

CFG = RetriesConfig()

# (level, failures counted in its scope) -> retry, or the outcome once exhausted
LADDER_TABLE = [
    (Level.L0, 1, None),  # a repair prompt
    (Level.L0, 2, None),  # a second one
    (Level.L0, 3, Outcome.FORMAT_EXHAUSTED),  # the phase ends
    (Level.L1, 1, None),  # the model sees the error
    (Level.L1, 2, Outcome.CALL_REFUSED),  # the third identical call is refused
    (Level.L2, 1, None),
    (Level.L2, 2, None),
    (Level.L2, 3, Outcome.DO_EXHAUSTED),  # CHECK_FAILED(DO_EXHAUSTED), not FAILED
    (Level.L3, 1, None),
    (Level.L3, 3, None),
    (Level.L3, 4, Outcome.NODE_FAILED),  # FAILED and the user is told
]


@pytest.mark.parametrize(("level", "failures", "outcome"), LADDER_TABLE)
def test_the_ladder(level: Level, failures: int, outcome: Outcome | None) -> None:
    got = after_failure(level, failures, CFG)
    if outcome is None:
        assert isinstance(got, Retry) and got.attempt == failures
    else:
        assert isinstance(got, Exhausted) and got.outcome is outcome


def test_exhaustion_moves_the_node_and_tells_the_user_only_at_l3() -> None:
    l2 = after_failure(Level.L2, 3, CFG)
    l3 = after_failure(Level.L3, 4, CFG)
    assert isinstance(l2, Exhausted) and l2.node_status == "CHECK_FAILED" and not l2.tell_user
    assert isinstance(l3, Exhausted) and l3.node_status == "FAILED" and l3.tell_user


def test_limits_come_from_config() -> None:
    cfg = RetriesConfig(do_repairs=4, adjust_per_node=1)
    assert isinstance(after_failure(Level.L2, 4, cfg), Retry)
    assert isinstance(after_failure(Level.L3, 2, cfg), Exhausted)


def test_every_failure_class_has_a_rule_and_waiting_counts_for_nothing() -> None:
    assert set(TAXONOMY) == set(FailureClass)
    assert TAXONOMY[FailureClass.WAITING_CONDITION].counts_toward is None
    assert TAXONOMY[FailureClass.TRANSIENT].counts_toward is None
    assert TAXONOMY[FailureClass.FORMAT].counts_toward is Level.L0
    assert TAXONOMY[FailureClass.STUCK].counts_toward is Level.L3
    assert set(LADDER) == set(Level)


def test_adjust_may_go_back_to_plan_once_per_task() -> None:
    assert may_replan(0, CFG) and not may_replan(1, CFG)


def test_drive_caps_end_in_a_question() -> None:
    assert drive_cap(199, 0.0, CFG) is None
    cap = drive_cap(200, 0.0, CFG)
    assert cap is not None and cap.kind is CapKind.STEPS
    assert "200" in cap.question() and "loop.retries.drive_steps" in cap.question()
    assert "是否继续" in cap.question("zh")
    assert drive_cap(10, 0.99, CFG, max_cost=1.0) is None
    money = drive_cap(10, 1.25, CFG, max_cost=1.0)
    assert money is not None and money.kind is CapKind.COST and "$1.25" in money.question()
