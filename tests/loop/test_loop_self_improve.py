"""The SELF_IMPROVE phase as the work loop runs it (issue 12, part 7; agent-loop §9):

- at most `loop.self_md.max_calls_per_run` (3) accepted `self_md_patch` calls per
  SELF_IMPROVE run — one entry of the phase — so a later pass over the same task (a new
  message, the task reopened) has its own three;
- with `loop.self_md.require_approval` the change is PROPOSED (a `proposed` history entry
  and an approval) and SELF_IMPROVE does not wait: the task ends DONE with the approval
  open; `approve` applies it, `reject` records it rejected, both once;
- after `loop.self_improve.max_consecutive_errors` (4) erroring calls in a row the run
  stops (the task still DONE) and its cursor stays where the run began, so the next
  trigger reads the same messages again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mindloop.dialogs.approvals import ApprovalError
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop import stale
from mindloop.loop.driver import LoopOutcome
from mindloop.loop.facts import Park, park_reason
from mindloop.loop.self_improve import SelfImproveCursor, load_cursor
from mindloop.store import loop_state as ls
from mindloop.testing import Call, ScriptedModel, Turn, call
from mindloop.toolsets import self_md as sm
from mindloop.toolsets import self_md_doc as doc
from tests.loop.loop_util import TASK, end, phases, run_task
from tests.scenario_util import write_team

START = "## Habits\nRead before writing.\n"
PLAN_NOTHING = Turn(tool_calls=[end("END", "nothing to build")])  # PLAN: no node → SELF_IMPROVE


def _team(rtws: Path, loop: str = "") -> None:
    write_team(rtws, {"dev": {}})
    if loop:
        team = rtws / ".minds" / "team.yaml"
        team.write_text(team.read_text() + "loop:\n" + loop)
    path = sm.self_md_path(rtws, "dev")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(START, encoding="utf-8")


def _after(*habits: str) -> str:
    """self.md after appending `habits` to START, one call each."""
    text = START
    for h in habits:
        text = doc.apply_op(text, "Habits", "append", h)
    return text


def _patch(habit: str, *before: str) -> Call:
    """Append `habit`, with the base of self.md after `before` were appended."""
    return call(
        "self_md_patch",
        section="Habits",
        op="append",
        content=habit,
        base_sha256=doc.sha256_hex(_after(*before)),
        rationale="it helps",
    )


def _results(rt: DialogRuntime, root_id: str, tool: str = "self_md_patch") -> list[dict[str, Any]]:
    calls = {
        m.data["id"]: m.data["name"]
        for m in rt.store.load_history(root_id)
        if m.kind == "tool_call"
    }
    return [
        json.loads(m.data["content"])
        for m in rt.store.load_history(root_id)
        if m.kind == "tool_result" and calls.get(m.data["call_id"]) == tool
    ]


def _history(rtws: Path) -> list[sm.HistoryEntry]:
    return sm.SelfMdFile(rtws, "dev").history()


# ---------------------------------------------------------------------- per run


async def test_each_self_improve_run_has_its_own_three_changes(rtws: Path) -> None:
    """A fourth accepted call in one SELF_IMPROVE entry is refused; the next pass over
    the same task (same loop root, a later entry) may change self.md again."""
    _team(rtws)
    one, two, three, four, five = (f"Habit {n}." for n in range(1, 6))
    model = ScriptedModel(
        [
            PLAN_NOTHING,
            Turn(tool_calls=[_patch(one)]),
            Turn(tool_calls=[_patch(two, one)]),
            Turn(tool_calls=[_patch(three, one, two)]),
            Turn(tool_calls=[_patch(four, one, two, three)]),  # the fourth: LIMIT
            Turn(tool_calls=[end("END")]),
            # a later message reopens the task: a new pass, a new SELF_IMPROVE run
            PLAN_NOTHING,
            Turn(tool_calls=[_patch(five, one, two, three)]),
            Turn(tool_calls=[end("END")]),
        ]
    )
    report, rt = await run_task(rtws, model, "tidy up")
    assert report.outcome is LoopOutcome.DONE, report.reason
    results = [(r["result"], r.get("reason")) for r in _results(rt, report.root_id)]
    assert results == [("APPLIED", None)] * 3 + [("REJECTED", "LIMIT")]
    assert sm.read_text(sm.self_md_path(rtws, "dev")) == _after(one, two, three)
    await rt.aclose()

    report, rt = await run_task(rtws, model, "tidy up again")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert phases(model).count("SELF_IMPROVE") == 7
    assert _results(rt, report.root_id)[-1]["result"] == "APPLIED"
    assert sm.read_text(sm.self_md_path(rtws, "dev")) == _after(one, two, three, five)
    runs = [e.run for e in _history(rtws)]
    assert runs[0] == runs[1] == runs[2] != runs[3]  # one run per SELF_IMPROVE entry
    assert model.remaining == 0
    await rt.aclose()


# ---------------------------------------------------------------------- approval


async def _proposed_run(rtws: Path) -> tuple[str, str, DialogRuntime]:
    """A task whose SELF_IMPROVE proposes one change under `require_approval`: the
    approval id, the loop root, the runtime."""
    _team(rtws, "  self_md: {require_approval: true}\n")
    model = ScriptedModel([PLAN_NOTHING, Turn(tool_calls=[_patch("Test first.")]), "done"])
    report, rt = await run_task(rtws, model, "tidy up")
    # SELF_IMPROVE went on after the proposal (its reply ended it) and the task is DONE
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    state = ls.get(rt.store, TASK)
    assert state is not None and state.status is ls.LoopStatus.DONE
    [result] = _results(rt, report.root_id)
    assert result["result"] == "PROPOSED"
    [view] = rt.pending_approvals()
    assert (view.tool, view.member, view.blocks) == ("self_md_patch", "dev", False)
    assert result["approval_id"] == view.id and view.dialog_id == report.root_id
    assert sm.read_text(sm.self_md_path(rtws, "dev")) == START  # nothing applied yet
    [entry] = _history(rtws)
    assert (entry.status, entry.approval_id, entry.content) == ("proposed", view.id, "Test first.")
    assert result["history_seq"] == entry.seq
    return view.id, report.root_id, rt


async def test_an_approved_proposal_is_applied_once_and_the_task_stays_done(rtws: Path) -> None:
    aid, root, rt = await _proposed_run(rtws)
    # were the task to park (reopened), the open proposal would not be what it waits on
    state = ls.get(rt.store, TASK)
    assert state is not None
    assert park_reason(rt, state) == (Park.STUCK, "no node can move and nothing is at work")
    rt.approve(aid, by="lead")
    assert sm.read_text(sm.self_md_path(rtws, "dev")) == _after("Test first.")
    proposed, applied = _history(rtws)
    assert (applied.status, applied.proposal_seq, applied.decided_by) == (
        "applied",
        proposed.seq,
        "lead",
    )
    assert applied.prev_sha256 == doc.sha256_hex(START)
    assert rt.pending_approvals() == []
    with pytest.raises(ApprovalError, match="already closed"):
        rt.approve(aid)
    assert len(_history(rtws)) == 2
    # the loop root was not woken: nothing for the task to do
    assert not rt.store.get_dialog(root).needs_drive
    state = ls.get(rt.store, TASK)
    assert state is not None and state.status is ls.LoopStatus.DONE
    # nor is the task's next run a resume after a wait (no staleness check): nothing
    # waited for this approval
    assert stale.resumed(rt, state) is None
    await rt.aclose()


async def test_a_rejected_proposal_stays_unapplied_and_is_recorded(rtws: Path) -> None:
    aid, root, rt = await _proposed_run(rtws)
    rt.reject(aid, "not a habit worth keeping", by="lead")
    assert sm.read_text(sm.self_md_path(rtws, "dev")) == START
    proposed, rejected = _history(rtws)
    assert (rejected.status, rejected.proposal_seq, rejected.decision_reason) == (
        "rejected",
        proposed.seq,
        "not a habit worth keeping",
    )
    assert rt.pending_approvals() == [] and not rt.store.get_dialog(root).needs_drive
    await rt.aclose()


async def test_an_approval_whose_section_changed_meanwhile_is_refused(rtws: Path) -> None:
    """Applied exactly as proposed, or not at all: a human edit of the section since the
    proposal refuses the approval (nothing decided; the human can reject it)."""
    aid, _root, rt = await _proposed_run(rtws)
    sm.self_md_path(rtws, "dev").write_text("## Habits\nEdited by hand.\n", encoding="utf-8")
    with pytest.raises(sm.SelfMdError, match="changed since"):
        rt.approve(aid)
    assert [v.id for v in rt.pending_approvals()] == [aid]
    assert len(_history(rtws)) == 1
    rt.reject(aid, "outdated")
    assert [e.status for e in _history(rtws)] == ["proposed", "rejected"]
    await rt.aclose()


# ---------------------------------------------------------------------- errors in a row


def _failing(n: int) -> Call:
    """A call that errors, different each time (not the repeat detector's business)."""
    return call(
        "self_md_patch",
        section="Hard rules",  # protected: REJECTED
        op="append",
        content=f"Rule {n}.",
        base_sha256=doc.sha256_hex(START),
        rationale="r",
    )


async def test_four_erroring_calls_in_a_row_stop_the_run_and_keep_the_cursor(rtws: Path) -> None:
    _team(rtws)
    model = ScriptedModel(
        [
            PLAN_NOTHING,
            *(Turn(tool_calls=[_failing(n)]) for n in range(4)),
            Turn(tool_calls=[_patch("Never reached.")]),  # the run stopped before this
        ]
    )
    report, rt = await run_task(rtws, model, "tidy up")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 1
    state = ls.get(rt.store, TASK)
    assert state is not None and state.status is ls.LoopStatus.DONE
    assert state.phase is ls.Phase.SELF_IMPROVE and state.ended is not None
    assert state.ended.by is ls.EndedBy.RUNTIME
    assert "4 tool calls in a row failed" in state.ended.reason
    # the batch was not processed: the cursor did not move, the failed run is counted
    assert load_cursor(rt.store, report.root_id) == SelfImproveCursor(errors=1)
    assert _history(rtws) == []
    await rt.aclose()


async def test_a_successful_call_resets_the_count_and_the_limit_is_configurable(
    rtws: Path,
) -> None:
    _team(rtws, "  self_improve: {max_consecutive_errors: 2}\n")
    model = ScriptedModel(
        [
            PLAN_NOTHING,
            Turn(tool_calls=[_failing(0)]),
            Turn(tool_calls=[_patch("Works.")]),
            Turn(tool_calls=[_failing(1)]),
            Turn(tool_calls=[_failing(2)]),  # the second in a row: stopped here
            Turn(tool_calls=[end("END")]),
        ]
    )
    report, rt = await run_task(rtws, model, "tidy up")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 1
    state = ls.get(rt.store, TASK)
    assert state is not None and state.ended is not None
    assert "2 tool calls in a row failed" in state.ended.reason
    assert [e.content for e in _history(rtws)] == ["Works."]
    await rt.aclose()


async def test_a_run_that_ends_normally_advances_the_cursor(rtws: Path) -> None:
    _team(rtws)
    model = ScriptedModel(
        [PLAN_NOTHING, Turn(tool_calls=[_failing(0)]), Turn(tool_calls=[end("END")])]
    )
    report, rt = await run_task(rtws, model, "tidy up")
    assert report.outcome is LoopOutcome.DONE, report.reason
    cursor = load_cursor(rt.store, report.root_id)
    assert cursor.message_id > 0 and cursor.errors == 0
    await rt.aclose()
