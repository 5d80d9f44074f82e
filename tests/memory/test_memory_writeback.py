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


def test_the_workspace_summary_is_written_by_plan_and_check_and_keeps_its_layout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from mindloop.config.loop_memory import MemoryConfig
    from mindloop.memory import MemoryCompiler
    from mindloop.memory.workspace_summary import (
        WorkspaceSummary,
        save_workspace_summary,
        workspace_summary,
    )
    from mindloop.store import Store

    store = Store(tmp_path / "s.sqlite")
    ws = WorkspaceSummary(
        layout=["src/app.py: the service", "tests/"],
        commands=["pytest -q"],
        checked_ref="abc1234",
        detail=["note " * 400, "more " * 400],
    )
    with pytest.raises(PermissionError, match="only CHECK, PLAN"):
        save_workspace_summary(store, "tasks/t.tsk", ws, writer="DO")
    save_workspace_summary(store, "tasks/t.tsk", ws, writer="CHECK")
    back = workspace_summary(store, "tasks/t.tsk")
    assert back == ws and workspace_summary(store, "tasks/other.tsk") is None
    out = MemoryCompiler(MemoryConfig()).compile([back.section()], window=200_000)
    [kept] = out.sections
    assert [p.id for p in kept.parts][:2] == ["layout", "commands"]
    assert "last green checked_ref: abc1234" in kept.parts[1].text
    assert [t.dropped for t in out.trims] == [("detail-1",)]
