"""Waits opened for the node DO works are the node's, not the task's (issue 12 parts 2 and
4; agent-loop §5.4, §6.3, R1/R7): a `wait_for` timer or event, or a call that needs the
human's approval, moves the node IN_PROGRESS → WAIT and ends the DO entry without parking
the loop root; routing goes on with other work (R4) or parks when every open node waits
(R7: exit 4 when only the human can move it). When the node's waits are satisfied it goes
back to work (WAIT → IN_PROGRESS, the resolution in DO's input); a negative resolution
sends it to ADJUST (WAIT → CHECK_FAILED(WAIT_<KIND>_<OUTCOME>)).

Due times are fired by the test (`Waits.fire_due` with a `now` past them) when the loop
parks on R7: no test sleeps."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.wait_kinds import SystemEvent, WaitKind
from mindloop.events.types import Event, LoopRouted, WaitOpened
from mindloop.loop.driver import LoopOutcome, LoopPolicies, LoopReport, TaskLoop
from mindloop.providers.base import GenerationRequest
from mindloop.store import Store, WaitStatus, crash_points
from mindloop.store import loop_state as ls
from mindloop.store.waits import resolved_since
from mindloop.testing import FunctionModel, ScriptedModel, Turn, call
from mindloop.workspace import repo
from mindloop.workspace.models import NodeStatus
from tests.loop.loop_util import (
    TASK,
    complete,
    create,
    end,
    give_up,
    phase_of,
    phases,
    run_task,
    runtime,
    turn,
    verdict,
)
from tests.loop.loop_util import workspace as ws_of
from tests.loop.test_loop_crash import DyingStore, Killed
from tests.scenario_util import write_team

DAY = 86_400.0


def moves(rt: DialogRuntime, node: str) -> list[tuple[str, str, str]]:
    """A node's transitions: (from, to, by)."""
    return [
        (e.data["from"], e.data["to"], e.data["by"])
        for e in repo.log(rt.store, TASK)
        if e.node_id == node and e.kind == "transition"
    ]


def inputs(rt: DialogRuntime, root: str) -> list[str]:
    """The phase inputs the loop posted to its root, in order."""
    return [m.data["text"] for m in rt.store.load_history(root) if "loop" in m.data]


async def run_firing_on_r7(
    rtws: Path, model: ScriptedModel, message: str, ahead: float
) -> tuple[LoopReport, DialogRuntime, list[LoopRouted]]:
    """`mindloop run TASK` that, whenever the loop parks because every open node waits
    (R7), lets `ahead` seconds pass for the due times (the scheduler's clock jumps)."""
    rt, policies = runtime(rtws, model)
    routed: list[LoopRouted] = []

    def fire() -> None:
        rt.waits.fire_due(time.time() + ahead)

    def hear(ev: Event) -> None:
        if isinstance(ev, LoopRouted):
            routed.append(ev)
            if ev.target == "PARK" and ev.rule == "R7":
                asyncio.get_running_loop().call_soon(fire)

    rt.bus.subscribe(hear)
    report = await TaskLoop(rt, policies, TASK).run(message)
    return report, rt, routed


async def test_a_do_node_waiting_on_a_timer_lets_another_ready_node_be_done_meanwhile(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("deploy")),  # PLAN
            turn(create("docs"), end("DO")),
            # DO n1: the build server is busy; the node waits an hour
            turn(call("wait_for", seconds=3600, reason="the build server is busy")),
            turn(complete("n2"), end("CHECK")),  # DO n2 meanwhile
            turn(verdict("n2"), end("DO")),  # CHECK n2; then only n1 is open, and it waits
            turn(complete("n1"), end("CHECK")),  # DO n1 again, once the timer fired
            turn(verdict("n1"), end("END")),
            turn(end("END")),  # SELF_IMPROVE
        ]
    )
    report, rt, routed = await run_firing_on_r7(rtws, model, "deploy with docs", DAY / 12)
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    assert phases(model) == ["PLAN", "PLAN", "DO", "DO", "CHECK", "DO", "CHECK", "SELF_IMPROVE"]
    # the timer was n1's: it never parked the root, and it moved the node both ways
    closed = resolved_since(rt.store, report.root_id, 0.0)
    [timer] = [w for w in closed if w.kind == WaitKind.TIMER.value]
    assert (timer.node, timer.blocks, timer.status) == ("n1", False, WaitStatus.RESOLVED)
    assert moves(rt, "n1")[1:4] == [
        ("NEW", "IN_PROGRESS", "RT"),
        ("IN_PROGRESS", "WAIT", "RT"),
        ("WAIT", "IN_PROGRESS", "RT"),
    ]
    # n2 was worked and checked while n1 waited; the loop parked on R7 only after that
    log = [e for e in repo.log(rt.store, TASK) if e.kind == "transition"]
    n2_done = next(i for i, e in enumerate(log) if e.node_id == "n2" and e.data["to"] == "DONE")
    n1_back = next(
        i
        for i, e in enumerate(log)
        if e.node_id == "n1" and (e.data["from"], e.data["to"]) == ("WAIT", "IN_PROGRESS")
    )
    assert n2_done < n1_back
    rules = [(r.target, r.rule) for r in routed]
    assert ("DO", "R4") in rules and ("PARK", "R7") in rules
    assert not any(r.rule == "R1" for r in routed)
    # DO took n1 again with the resolution in its input
    texts = inputs(rt, report.root_id)
    resumed = [t for t in texts if "Phase DO" in t and "# Node n1" in t][-1]
    assert "Resolved waits" in resumed and "fired" in resumed
    assert ws_of(rt).nodes["n1"].status is NodeStatus.DONE
    await rt.aclose()


def _with_approvals(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"], "approval_required": ["move"]}})


async def test_a_task_whose_only_open_node_waits_on_an_approval_stops_with_exit_4(
    rtws: Path,
) -> None:
    _with_approvals(rtws)
    (rtws / "draft.md").write_text("notes\n", "utf-8")
    model = ScriptedModel(
        [
            turn(create("publish"), end("DO")),
            turn(call("move", src="draft.md", dst="NOTES.md")),  # waits for the human
            turn(complete("n1"), end("CHECK")),  # a new DO entry, after the approval
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    rt, policies = runtime(rtws, model)
    routed: list[LoopRouted] = []
    rt.bus.subscribe(lambda ev: routed.append(ev) if isinstance(ev, LoopRouted) else None)
    report = await TaskLoop(rt, policies, TASK).run("publish the notes")
    # the node waits, not the task: R7 parks it, and only the human can move it (exit 4)
    assert report.outcome is LoopOutcome.WAITING and "approval" in report.reason
    assert (routed[-1].target, routed[-1].rule) == ("PARK", "R7")
    [pending] = rt.pending_approvals()
    assert pending.node == "n1"
    assert rt.tree.wait_state(report.root_id).drivable  # the root itself is not parked
    assert ws_of(rt).nodes["n1"].status is NodeStatus.WAIT
    assert not (rtws / "NOTES.md").exists()
    rt.approve(pending.id)
    await rt.aclose()
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert (rtws / "NOTES.md").is_file() and model.remaining == 0
    assert phases(model) == ["PLAN", "DO", "DO", "CHECK", "SELF_IMPROVE"]
    assert ("WAIT", "IN_PROGRESS", "RT") in moves(rt, "n1")
    await rt.aclose()


async def test_an_approved_call_runs_in_its_own_nodes_do_entry_not_another(
    rtws: Path,
) -> None:
    """n1's call waits for approval while DO works n2, which asks the human a question
    (a task-level wait: the run stops). Both are answered together; the run resumes n2's
    entry first: the approved call is n1's, so it runs when DO takes n1 again."""
    _with_approvals(rtws)
    (rtws / "draft.md").write_text("notes\n", "utf-8")
    model = ScriptedModel(
        [
            turn(create("publish")),  # PLAN
            turn(create("db"), end("DO")),
            turn(call("move", src="draft.md", dst="NOTES.md")),  # DO n1: waits
            "Which database should it use?\n!?@human Postgres or SQLite?\n",  # DO n2
            turn(complete("n2"), end("CHECK")),  # n2's entry, continued after the answer
            turn(verdict("n2"), end("DO")),
            turn(complete("n1"), end("CHECK")),  # DO n1 again: the approved move ran
            turn(verdict("n1"), end("END")),
            turn(end("END")),  # SELF_IMPROVE: the history in one batch
        ]
    )
    report, rt = await run_task(rtws, model, "publish the notes and set up the db")
    assert report.outcome is LoopOutcome.WAITING and "question" in report.reason
    [q] = rt.store.open_questions()
    [pending] = rt.pending_approvals()
    rt.approve(pending.id)
    rt.answer_question(q.id, "SQLite")
    await rt.aclose()
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0 and (rtws / "NOTES.md").is_file()
    history = rt.store.load_history(report.root_id)
    n1_again = max(
        i
        for i, m in enumerate(history)
        if "loop" in m.data and "# Node n1" in m.data["text"] and "Phase DO" in m.data["text"]
    )
    ran = [
        i
        for i, m in enumerate(history)
        if m.kind == "note" and "The human approved move" in m.data["text"]
    ]
    assert len(ran) == 1 and ran[0] > n1_again
    assert phases(model) == [
        "PLAN",
        "PLAN",
        "DO",
        "DO",
        "DO",  # n2's entry, continued after the answer
        "CHECK",
        "DO",
        "CHECK",
        "SELF_IMPROVE",
    ]
    await rt.aclose()


async def test_a_node_wait_that_times_out_fails_the_node_and_adjust_takes_it(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("deploy"), end("DO")),
            turn(call("wait_for", event_type="deploy.finished", reason="the pipeline")),
            # ADJUST: the event never came
            turn(give_up("n1", "the pipeline never reported back"), end("END")),
            turn(end("END")),  # SELF_IMPROVE
        ]
    )
    report, rt, _ = await run_firing_on_r7(rtws, model, "deploy it", 2 * DAY)
    assert report.outcome is LoopOutcome.FAILED, report.reason
    assert model.remaining == 0
    assert phases(model) == ["PLAN", "DO", "ADJUST", "SELF_IMPROVE"]
    got = [
        (e.data["from"], e.data["to"], e.data["reason"])
        for e in repo.log(rt.store, TASK)
        if e.node_id == "n1" and e.kind == "transition"
    ]
    assert got[2][:2] == ("IN_PROGRESS", "WAIT")
    assert got[3][:2] == ("WAIT", "CHECK_FAILED")
    assert got[3][2].startswith("WAIT_SYSTEM_EVENT_TIMEOUT")
    await rt.aclose()


class _KillAfterWait:
    """`crash_points.CRASH`: the process dies just after the commit that registered the
    node's wait (and moved the node), before the DO entry was ended."""

    def __init__(self) -> None:
        self.armed = self.dead = False

    def reached(self, point: str, where: str = "") -> None:
        if self.dead:
            raise Killed
        if point == "commit.after" and self.armed:
            self.dead = True
            raise Killed


@pytest.mark.sqlite_only  # a second process's view of the same rtws, as after a kill
async def test_a_kill_just_after_a_node_wait_committed_resumes_without_working_the_node(
    rtws: Path,
) -> None:
    """Killed between the wait's commit and the end of the DO entry: the next run finds
    the entry open and its node waiting, ends the entry instead of working the node, and
    takes the node up again once its event came."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    reader = Store.for_rtws(rtws)
    asked_to_work: list[str] = []

    def decide(req: GenerationRequest) -> Turn:
        phase = phase_of(req)
        nodes = repo.load(reader, TASK).nodes
        if phase == "PLAN":
            return Turn(tool_calls=[create("deploy") if "n1" not in nodes else end("DO")])
        if phase == "DO":
            state = ls.get(reader, TASK)
            assert state is not None
            root = state.root_id
            waited = reader.open_waits(root) + resolved_since(reader, root, 0.0)
            asked_to_work.append(nodes["n1"].status.value)
            if not waited:
                return Turn(tool_calls=[call("wait_for", event_type="deploy.finished")])
            return Turn(tool_calls=[complete("n1"), end("CHECK")])
        if phase == "CHECK":
            return Turn(tool_calls=[verdict("n1"), end("END")])
        return Turn(tool_calls=[end("END")])

    def respond(req: GenerationRequest) -> Turn:
        turn = decide(req)
        for c in turn.tool_calls:  # call ids unique across the two runs
            c.id = f"c{uuid.uuid4().hex[:12]}"
        return turn

    crash = _KillAfterWait()
    store = DyingStore.for_rtws(rtws, durable=False)
    store.crash = crash  # type: ignore[attr-defined]
    policies = LoopPolicies("en")
    rt = DialogRuntime(
        rtws, providers={"mock": FunctionModel(respond)}, policies=policies, store=store
    )
    rt.bus.subscribe(
        lambda ev: setattr(crash, "armed", True) if isinstance(ev, WaitOpened) else None
    )
    crash_points.CRASH = crash  # type: ignore[assignment]
    try:
        with pytest.raises(Killed):
            await TaskLoop(rt, policies, TASK).run("deploy it")
    finally:
        crash_points.CRASH = None
        store.close()
        await rt.providers.aclose()
    # the wait and the node's move committed together; the entry is still open
    store = Store.for_rtws(rtws)
    state = ls.get(store, TASK)
    assert state is not None and state.phase.value == "DO" and state.in_phase
    assert repo.load(store, TASK).nodes["n1"].status is NodeStatus.WAIT
    for did, owner in store.held_claims():  # the dead process's claims end
        if owner:
            store.expire_claim(did, owner)
    store.close()
    # the event comes while nothing runs; then `mindloop run` again
    rt, policies = runtime(rtws, FunctionModel(respond))
    rt.deliver(SystemEvent(event_type="deploy.finished"))
    report = await TaskLoop(rt, policies, TASK).run()
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert asked_to_work == ["IN_PROGRESS", "IN_PROGRESS"]  # never asked while it waited
    assert [m[:2] for m in moves(rt, "n1")[1:4]] == [
        ("NEW", "IN_PROGRESS"),
        ("IN_PROGRESS", "WAIT"),
        ("WAIT", "IN_PROGRESS"),
    ]
    reader.close()
    await rt.aclose()


async def test_a_node_cancelled_while_it_waits_on_an_approval_takes_the_approval_back(
    rtws: Path,
) -> None:
    """The user cancels a node whose call waits for approval (`mindloop node cancel`):
    when the loop routes again the approval leaves the human's list, and the task ends
    without the node."""
    from mindloop import service

    _with_approvals(rtws)
    (rtws / "draft.md").write_text("notes\n", "utf-8")
    model = ScriptedModel(
        [
            turn(create("publish"), end("DO")),
            turn(call("move", src="draft.md", dst="NOTES.md")),  # waits for the human
            turn(end("END")),  # SELF_IMPROVE, once n1 is cancelled
        ]
    )
    report, rt = await run_task(rtws, model, "publish the notes")
    assert report.outcome is LoopOutcome.WAITING and "approval" in report.reason
    [pending] = rt.pending_approvals()
    await rt.aclose()
    async with service.open_project(rtws, providers={"mock": model}) as project:
        service.cancel_node(project, TASK, "n1", "publishing is not needed")
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE and model.remaining == 0, report.reason
    assert rt.pending_approvals() == []
    assert rt.store.get_wait(pending.id).status is WaitStatus.CANCELLED
    assert not (rtws / "NOTES.md").exists()
    await rt.aclose()
