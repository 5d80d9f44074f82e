"""Write-back targets (agent-loop §7.3) and compaction triggers as data."""

from __future__ import annotations

import pytest

from mindloop.memory.writeback import (
    COMPACTION,
    TRIGGERS,
    WRITE_BACK,
    Fact,
    Target,
    Trigger,
    may_write,
)


@pytest.mark.parametrize(
    ("fact", "writer", "ok"),
    [
        (Fact.USER_PREFERENCES, "SELF_IMPROVE", True),
        (Fact.USER_PREFERENCES, "DO", False),
        (Fact.DIALOG_STATE, COMPACTION, True),
        (Fact.WORKSPACE_FACTS, "CHECK", True),
        (Fact.WORKSPACE_FACTS, "DO", False),
        (Fact.NODE_RESULT, "DO", True),
        (Fact.HARD_CONSTRAINTS, "ADJUST", True),
        (Fact.HARD_CONSTRAINTS, "CHECK", False),
        (Fact.RAW_RECORDS, "SELF_IMPROVE", False),
    ],
)
def test_who_may_write_what(fact: Fact, writer: str, ok: bool) -> None:
    why = may_write(fact, writer)
    assert (why is None) == ok
    if why is not None:
        assert writer in why and "only" in why


def test_every_fact_and_trigger_has_a_target() -> None:
    assert set(WRITE_BACK) == set(Fact) and set(TRIGGERS) == set(Trigger)
    assert WRITE_BACK[Fact.DIALOG_STATE].target is Target.DIALOG_SUMMARY
    assert TRIGGERS[Trigger.DIALOG_SIZE].by == COMPACTION
