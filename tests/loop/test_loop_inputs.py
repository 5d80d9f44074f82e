"""A phase's input (`loop/inputs.py`): what the runtime posts to the loop root when a
phase starts."""

from __future__ import annotations

from pathlib import Path

from mindloop.loop.inputs import PhaseInput, render
from mindloop.loop.phases import Phase
from mindloop.workspace.api import WorkspaceApi

TASK = "tasks/example.tsk"


def test_plan_input_offers_the_start_scans_docs_and_other_phases_do_not(rtws: Path) -> None:
    """A workspace first touched from the CLI: the planner still learns what the start
    scan found (offered, not dispatched), in PLAN's input only."""
    (rtws / "README.md").write_text("# proj\n")
    (rtws / "docs").mkdir()
    (rtws / "docs" / "design.md").write_text("# design\n")
    with WorkspaceApi(rtws, TASK) as api:
        api.add_rule("Use type hints everywhere")
        state = api.state()
    plan = render(PhaseInput(Phase.PLAN, 1, "en", state, rtws))
    offered = [line for line in plan.splitlines() if "README.md" in line]
    assert offered and "docs/design.md" in offered[0]
    assert "offered" in plan.lower()
    for phase in (Phase.DO, Phase.CHECK, Phase.ADJUST):
        assert "README.md" not in render(PhaseInput(phase, 1, "en", state, rtws))
