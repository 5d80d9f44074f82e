"""The staleness check when the loop resumes after a wait (agent-loop §6.3, Resume): the
loop root's waits photograph the task when they open (the workspace ref, a hash of
goals.md and constraints.md); when such a wait has resolved and the loop goes on, one
signal (workspace changed, goals or constraints changed, waited > `loop.waits.stale_after`)
adds a "context may be stale" note — in the resumed phase's history and in the next
phase's input — and two or more send the task back to PLAN, once per task."""

from __future__ import annotations

from pathlib import Path

import yaml

from mindloop.loop.driver import LoopOutcome
from mindloop.store import loop_state as ls
from mindloop.testing import ScriptedModel
from mindloop.workspace import repo
from tests.loop.loop_util import TASK, complete, create, end, phases, run_task, turn, verdict
from tests.scenario_util import write_team

ASK = "Which database should it use?\n!?@human Postgres or SQLite?\n"


def _change_goals(rtws: Path) -> None:
    goals = rtws / TASK / "goals.md"
    goals.write_text(goals.read_text("utf-8") + "\nAlso support OAuth.\n", "utf-8")


async def _ask_then_answer(rtws: Path, model: ScriptedModel, during_wait: list[object]) -> None:
    """Run until the question; change what `during_wait` says; answer it."""
    report, rt = await run_task(rtws, model, "set up the db")
    assert report.outcome is LoopOutcome.WAITING, report.reason
    [q] = rt.store.open_questions()
    for change in during_wait:
        change(rtws)  # type: ignore[operator]
    rt.answer_question(q.id, "SQLite")
    await rt.aclose()


async def test_a_wait_resolved_after_goals_changed_adds_a_stale_note(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("db"), end("DO")),
            ASK,
            turn(complete("n1"), end("CHECK")),  # the same DO entry, after the answer
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    await _ask_then_answer(rtws, model, [_change_goals])
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    assert phases(model) == ["PLAN", "DO", "DO", "CHECK", "SELF_IMPROVE"]
    # the resumed DO step saw the note, after the answer
    resumed = model.requests[2].messages
    said = [getattr(m, "text", "") for m in resumed]
    note = next(t for t in said if "may be stale" in t)
    assert "goals.md or constraints.md changed" in note
    assert "workspace changed" not in note and "- n1 [IN_PROGRESS]" in note  # the tree now
    # and the next phase's input says it too
    inputs = [m.data["text"] for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    check = next(t for t in inputs if t.startswith("[work loop] Phase CHECK"))
    assert "may be stale" in check and "goals.md or constraints.md changed" in check
    state = ls.get(rt.store, TASK)
    assert state is not None and state.stale_checked_at > 0 and not state.stale_replanned
    await rt.aclose()


async def test_two_signals_send_the_task_back_to_plan_once(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})

    def deliverable_written(root: Path) -> None:  # someone else changed the workspace
        (root / "schema.sql").write_text("create table users (id integer);\n", "utf-8")

    model = ScriptedModel(
        [
            turn(create("db"), end("DO")),
            ASK,
            turn(end("DO", "replanned: the goals now include OAuth")),  # PLAN again
            turn(complete("n1"), end("CHECK")),  # DO continues n1
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    await _ask_then_answer(rtws, model, [_change_goals, deliverable_written])
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    assert phases(model) == ["PLAN", "DO", "PLAN", "DO", "CHECK", "SELF_IMPROVE"]
    inputs = [m.data["text"] for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    plan = [t for t in inputs if t.startswith("[work loop] Phase PLAN")][1]
    assert "may be stale" in plan and "workspace changed" in plan and "goals.md" in plan
    # the DO entry ended for the new plan, its node did not fail: DO took it up again
    moves = [
        (e.data["from"], e.data["to"])
        for e in repo.log(rt.store, TASK)
        if e.node_id == "n1" and e.kind == "transition"
    ]
    assert ("IN_PROGRESS", "CHECK_FAILED") not in moves
    state = ls.get(rt.store, TASK)
    assert state is not None and state.stale_replanned
    await rt.aclose()


async def test_a_long_wait_alone_is_one_signal(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    team = rtws / ".minds" / "team.yaml"
    data = yaml.safe_load(team.read_text("utf-8"))
    data["loop"] = {"waits": {"stale_after": 0}}  # every wait is "long"
    team.write_text(yaml.safe_dump(data), "utf-8")
    model = ScriptedModel(
        [
            turn(create("db"), end("DO")),
            ASK,
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    await _ask_then_answer(rtws, model, [])
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    note = next(
        getattr(m, "text", "")
        for m in model.requests[2].messages
        if "may be stale" in getattr(m, "text", "")
    )
    assert "waited" in note and "goals.md" not in note
    await rt.aclose()
