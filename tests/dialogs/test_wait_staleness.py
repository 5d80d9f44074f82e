"""The staleness check on resume (agent-loop §6.3 Resume): a wait photographs the task when
it opens (workspace ref, a hash of goals.md and constraints.md); resuming after it is
judged against the task as it is then — no signal: go on; one: a note; two or more:
replan. The workspace ref comes from a callable handed to the runtime."""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.staleness import StaleAction, StaleSignal, taskdoc_hash
from mindloop.dialogs.wait_kinds import SystemEvent, WaitKind
from mindloop.testing import ScriptedModel
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"
HOUR = 3600.0


class Head:
    """A workspace whose ref the test moves (as commits would)."""

    def __init__(self) -> None:
        self.ref = "c0ffee1"
        self.asked: list[str] = []

    def __call__(self, task_path: str) -> str | None:
        self.asked.append(task_path)
        return self.ref


def _setup(rtws: Path) -> tuple[DialogRuntime, Head, str]:
    write_team(rtws, {"dev": {}})
    head = Head()
    rt = DialogRuntime(rtws, providers={"mock": ScriptedModel([])}, workspace_ref=head)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    return rt, head, root.id


async def test_a_resume_with_nothing_changed_is_fresh(rtws: Path) -> None:
    rt, head, did = _setup(rtws)
    w = rt.open_wait(did, WaitKind.EXTERNAL, "ci", {"event_type": "ci"})
    assert w.snapshot == {"workspace_ref": "c0ffee1", "taskdoc_hash": taskdoc_hash(rtws, TASK)}
    assert head.asked == [TASK]
    rt.deliver(SystemEvent(event_type="ci"))
    resolved = rt.waits.resolved_since(did, 0.0)
    assert [r.id for r in resolved] == [w.id]
    stale = rt.waits.staleness(resolved, TASK)
    assert (stale.signals, stale.action, stale.waits) == ([], StaleAction.NONE, [w.id])
    await rt.aclose()


async def test_one_signal_asks_for_a_note_and_two_for_a_new_plan(rtws: Path) -> None:
    rt, head, did = _setup(rtws)
    w = rt.open_wait(did, WaitKind.EXTERNAL, "ci", {"event_type": "ci"})
    rt.deliver(SystemEvent(event_type="ci"))
    [done] = rt.waits.resolved_since(did, 0.0)
    goals = rtws / TASK / "goals.md"
    goals.write_text(goals.read_text() + "\nAlso support OAuth.\n")
    one = rt.waits.staleness([done], TASK)
    assert (one.signals, one.action) == ([StaleSignal.TASKDOC_CHANGED], StaleAction.NOTE)
    head.ref = "beefcafe"
    two = rt.waits.staleness([done], TASK)
    assert two.signals == [StaleSignal.WORKSPACE_CHANGED, StaleSignal.TASKDOC_CHANGED]
    assert two.action is StaleAction.REPLAN
    assert rt.waits.resolved_since(did, done.resolved_at or 0.0) == []  # only newer ones
    assert w.id == done.id
    await rt.aclose()


async def test_a_long_wait_is_a_signal_of_its_own(rtws: Path) -> None:
    rt, _, did = _setup(rtws)
    w = rt.open_wait(did, WaitKind.EXTERNAL, "ci", {"event_type": "ci"})
    # Still open, judged 25 h after it opened: it waited longer than `stale_after`.
    late = rt.waits.staleness([w], TASK, now=w.created_at + 25 * HOUR)
    assert late.signals == [StaleSignal.WAITED_LONG] and late.waited > 24 * HOUR
    early = rt.waits.staleness([w], TASK, now=w.created_at + 23 * HOUR)
    assert early.signals == []
    await rt.aclose()


async def test_without_a_workspace_ref_the_workspace_is_not_judged(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    rt = DialogRuntime(rtws, providers={"mock": ScriptedModel([])})
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    w = rt.open_wait(root.id, WaitKind.EXTERNAL, "ci", {"event_type": "ci"})
    assert w.snapshot is not None and w.snapshot["workspace_ref"] is None
    assert rt.waits.staleness([w], TASK).signals == []
    (rtws / TASK / "constraints.md").write_text("Use PostgreSQL.\n")
    assert rt.waits.staleness([w], TASK).signals == [StaleSignal.TASKDOC_CHANGED]
    await rt.aclose()
