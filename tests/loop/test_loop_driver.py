"""The loop driver end to end on a scripted model (issue 12, part 4): PLAN → DO → CHECK →
… → SELF_IMPROVE → DONE, routed by the runtime from node statuses."""

from __future__ import annotations

from pathlib import Path

from mindloop.events.types import LoopRouted
from mindloop.loop.driver import LoopOutcome, TaskLoop
from mindloop.loop.phases import Phase
from mindloop.loop.self_improve import load_cursor
from mindloop.store import loop_state as ls
from mindloop.testing import ScriptedModel, Turn, call
from mindloop.workspace import repo
from mindloop.workspace.models import NodeStatus
from tests.loop.loop_util import (
    TASK,
    WorkScript,
    complete,
    create,
    cycle,
    end,
    give_up,
    phases,
    retry,
    run_task,
    runtime,
    turn,
    verdict,
    work_phases,
)
from tests.loop.loop_util import workspace as ws_of
from tests.scenario_util import write_team


def ws_log(rt):  # type: ignore[no-untyped-def]
    return repo.log(rt.store, TASK)


async def test_a_task_runs_plan_do_check_to_done(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            # PLAN: two nodes, the second after the first (calls of one step are checked
            # against the workspace as it was before the step: n1 exists from the next)
            turn(create("api")),
            turn(create("ui", deps=["n1"]), end("DO", "planned api then ui")),
            # DO n1
            turn(complete("n1")),
            turn(end("CHECK")),
            # CHECK n1
            turn(verdict("n1"), end("DO")),
            # DO n2: ends by replying (phase_end without a hint)
            turn(complete("n2")),
            "n2 is complete.",
            # CHECK n2
            turn(verdict("n2"), end("END")),
            # SELF_IMPROVE
            turn(end("END", "tidy")),
        ]
    )
    report, rt = await run_task(rtws, model, "build the login page")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    assert phases(model) == [
        "PLAN",
        "PLAN",
        "DO",
        "DO",
        "CHECK",
        "DO",
        "DO",
        "CHECK",
        "SELF_IMPROVE",
    ]
    ws = ws_of(rt)
    assert {n.id: n.status for n in ws.nodes.values()} == {
        "root": NodeStatus.DONE,
        "n1": NodeStatus.DONE,
        "n2": NodeStatus.DONE,
    }
    state = ls.get(rt.store, TASK)
    assert state is not None and state.status is ls.LoopStatus.DONE and state.self_improved
    assert state.entry == 6 and set(ls.checks(rt.store, report.root_id)) == {"n1", "n2"}
    # each phase's input is one user message of the loop root, marked as the loop's
    inputs = [m for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    assert [m.data["loop"]["phase"] for m in inputs] == [
        "PLAN",
        "DO",
        "CHECK",
        "DO",
        "CHECK",
        "SELF_IMPROVE",
    ]
    do_input = inputs[1].data["text"]
    assert "## Current node" in do_input and "n1" in do_input and "planned api then ui" in do_input
    # SELF_IMPROVE reviewed the next batch of the root's history; its cursor moved past it
    tidy = inputs[-1].data["text"]
    assert "## Messages to review" in tidy and "- #1 user: build the login page" in tidy
    cursor = load_cursor(rt.store, report.root_id)
    assert 0 < cursor.message_id < inputs[-1].id
    # a second run finds it done and does nothing
    model2 = ScriptedModel([])
    again, rt2 = await run_task(rtws, model2)
    assert again.outcome is LoopOutcome.DONE and model2.requests == []
    await rt.aclose()
    await rt2.aclose()


async def test_a_failed_check_goes_through_adjust_with_an_fbr_round_and_back_to_do(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"], "fbr-effort": 1}})
    model = WorkScript(
        [
            turn(create("parser"), end("DO")),  # PLAN
            turn(complete("n1"), end("CHECK")),  # DO
            turn(verdict("n1", ok=False), end("ADJUST", risks=["edge cases"])),  # CHECK
            # ADJUST: a fresh look first (FBR), then the node goes back to work
            "!?@self Why would a parser fail on empty input?\n!?The check says AC1 failed.\n",
            "Empty input is probably not handled (FBR sample).",  # the FBR side dialog
            turn(cycle("handle empty input")),  # the cycle's RetryRecord, then back to work
            turn(retry("n1"), end("DO", "WRONG_APPROACH: handle empty input")),
            turn(complete("n1"), end("CHECK")),  # DO again
            turn(verdict("n1"), end("END")),  # CHECK
        ]
    )
    report, rt = await run_task(rtws, model, "write the parser")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    assert work_phases(model) == [
        "PLAN",
        "DO",
        "CHECK",
        "ADJUST",
        "ADJUST",
        "ADJUST",
        "DO",
        "CHECK",
        "SELF_IMPROVE",
    ]
    n1 = ws_of(rt).nodes["n1"]
    assert n1.status is NodeStatus.DONE and n1.attempt == 1 and n1.adjust_count == 1
    # the FBR sample ran as a side dialog of the loop root, driven during ADJUST
    fbr = [d for d in rt.store.list_dialogs(root_id=report.root_id) if d.kind == "fbr"]
    assert len(fbr) == 1
    # the transitions the runtime made on entry are in the node's log, by RT
    log = [e for e in ws_log(rt) if e.node_id == "n1" and e.kind == "transition"]
    moves = [(e.data["from"], e.data["to"], e.data["by"]) for e in log]
    assert ("NEW", "IN_PROGRESS", "RT") in moves
    assert ("CHECK_FAILED", "ADJUSTING", "RT") in moves
    assert ("ADJUSTING", "IN_PROGRESS", "ADJUST") in moves
    assert ("COMPLETE", "CHECK_FAILED", "CHECK") in moves
    await rt.aclose()


async def test_a_node_dispatched_to_a_teammate_does_not_hold_up_other_work(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}, "qa": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        {
            "dev": [
                turn(create("core")),  # PLAN
                turn(create("docs", assignee="MEMBER:qa")),
                turn(call("node_dispatch", node_id="n2"), end("DO")),
                turn(complete("n1"), end("CHECK")),  # DO n1 while qa works n2
                turn(verdict("n1"), end("DO")),  # CHECK n1 (n2 may still be at work)
                turn(verdict("n2"), end("END")),  # CHECK n2, after qa's reply
                turn(end("END")),  # SELF_IMPROVE
            ],
            "qa": ["Docs written.\nNO_ARTIFACTS: reviewed in place"],
        }
    )
    report, rt = await run_task(rtws, model, "ship core and docs")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    ws = ws_of(rt)
    assert ws.nodes["n2"].status is NodeStatus.DONE and ws.nodes["n1"].status is NodeStatus.DONE
    side = [d for d in rt.store.list_dialogs(root_id=report.root_id) if d.kind == "side"]
    assert [d.member for d in side] == ["qa"]
    # the member's reply reached the loop root as a note
    notes = [m.data["text"] for m in rt.store.load_history(report.root_id) if m.kind == "note"]
    assert any("WAIT → COMPLETE" in n for n in notes)
    await rt.aclose()


async def test_an_illegal_hint_is_refused_as_a_repair_prompt_and_counted(rtws: Path) -> None:
    """A hint the ended phase may not give (agent-loop §4's table) is dropped: the
    `phase_end` carrying it is refused with HINT_ILLEGAL (a FORMAT failure, L0 of §8.2:
    the error is the model's repair prompt) and the phase goes on; the status counts it."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("a"), end("CHECK")),  # PLAN may not hint CHECK: refused
            turn(end("DO")),  # repaired: the phase ends
            turn(complete("n1"), end("END")),  # DO may not hint END: refused
            turn(end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "do a")
    assert report.outcome is LoopOutcome.DONE
    assert phases(model) == ["PLAN", "PLAN", "DO", "DO", "CHECK", "SELF_IMPROVE"]
    ends = [
        m.data
        for m in rt.store.load_history(report.root_id)
        if m.kind == "tool_result" and m.data["name"] == "phase_end"
    ]
    refused = [e["content"] for e in ends if e["is_error"]]
    assert len(refused) == 2 and all(t.startswith("Error [HINT_ILLEGAL]") for t in refused)
    assert "CHECK is not a legal hint after PLAN (legal: DO, WAIT, END)" in refused[0]
    state = ls.get(rt.store, TASK)
    assert state is not None and state.hints_dropped == 2
    await rt.aclose()


async def test_a_hint_illegal_only_by_the_facts_is_dropped_when_routing(rtws: Path) -> None:
    """WAIT is legal after DO only if DO registered a wait, which `phase_end` cannot know
    when it runs (a wait opened by a call of the same step commits with it): routing drops
    such a hint, logs it and says so in the next phase's input."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("a"), end("DO")),
            turn(complete("n1"), end("WAIT")),  # no wait registered: dropped, R3 CHECK
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    routed: list[LoopRouted] = []
    rt, policies = runtime(rtws, model)
    rt.bus.subscribe(lambda ev: routed.append(ev) if isinstance(ev, LoopRouted) else None)
    report = await TaskLoop(rt, policies, TASK).run("do a")
    assert report.outcome is LoopOutcome.DONE
    assert phases(model) == ["PLAN", "DO", "CHECK", "SELF_IMPROVE"]
    dropped = [r for r in routed if r.hint_dropped]
    assert [(r.hint, r.target) for r in dropped] == [("WAIT", "CHECK")]
    state = ls.get(rt.store, TASK)
    assert state is not None and state.hints_dropped == 1
    # the next phase's input says so
    inputs = [m.data["text"] for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    assert "HINT_ILLEGAL: hint WAIT dropped" in inputs[2]
    await rt.aclose()


async def test_a_question_parks_the_task_and_the_answer_continues_the_phase(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("db"), end("DO")),
            "Which database should it use?\n!?@human Postgres or SQLite?\n",
            turn(complete("n1"), end("CHECK")),  # after the answer, the same DO entry
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "set up the db")
    assert report.outcome is LoopOutcome.WAITING and "question" in report.reason
    [q] = rt.store.open_questions()
    state = ls.get(rt.store, TASK)
    assert state is not None and state.phase is Phase.DO and state.in_phase
    assert state.status is ls.LoopStatus.WAITING
    await rt.aclose()
    # nothing moves while it waits: another run stops at once, asking the model nothing
    before = len(model.requests)
    still, rt = await run_task(rtws, model)
    assert still.outcome is LoopOutcome.WAITING and len(model.requests) == before
    rt.answer_question(q.id, "SQLite")
    await rt.aclose()
    report2, rt2 = await run_task(rtws, model)
    assert report2.outcome is LoopOutcome.DONE, report2.reason
    assert len(model.requests) > before and model.remaining == 0
    entries = [
        m.data["loop"]["phase"] for m in rt2.store.load_history(report.root_id) if "loop" in m.data
    ]
    assert entries == ["PLAN", "DO", "CHECK", "SELF_IMPROVE"]  # the DO entry was continued
    await rt2.aclose()


async def test_a_do_entry_out_of_steps_fails_its_node_and_adjust_takes_it(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    # DO's cap: 12 steps (two calls in turn: four identical steps in a row would be STUCK
    # by the detector, before the cap)
    busy = [turn(call("list_dir", path="." if i % 2 else "tasks")) for i in range(12)]
    model = WorkScript(
        [
            turn(create("loop forever"), end("DO")),
            *busy,
            turn(
                give_up("n1", "gave up: no progress in 12 steps"),
                end("END"),
            ),
        ]
    )
    report, rt = await run_task(rtws, model, "try")
    assert report.outcome is LoopOutcome.FAILED and "n1" in report.reason
    assert work_phases(model) == ["PLAN", *["DO"] * 12, "ADJUST", "SELF_IMPROVE"]
    moves = [
        (e.data["from"], e.data["to"], e.data["reason"])
        for e in ws_log(rt)
        if e.node_id == "n1" and e.kind == "transition"
    ]
    assert (
        "IN_PROGRESS",
        "CHECK_FAILED",
        "STUCK (step_budget): 12 steps used of a budget of 12",
    ) in moves
    state = ls.get(rt.store, TASK)
    assert state is not None and state.status is ls.LoopStatus.FAILED
    await rt.aclose()


async def test_a_spending_cap_ends_the_run_with_cap_reached(rtws: Path) -> None:
    import yaml

    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    team = rtws / ".minds" / "team.yaml"
    data = yaml.safe_load(team.read_text("utf-8"))
    data["caps"] = {"task": {"max_tokens": 1000}}
    team.write_text(yaml.safe_dump(data), "utf-8")
    big = Turn(tool_calls=[create("a")], input_tokens=900, output_tokens=200)
    model = ScriptedModel([big, turn(end("DO"))])
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.CAP and "cap" in report.reason
    state = ls.get(rt.store, TASK)
    assert state is not None and state.in_phase and state.phase is Phase.PLAN
    await rt.aclose()


def _caps(rtws: Path, caps: dict[str, object], price: float | None = None) -> None:
    """`caps:` in team.yaml; with `price`, the mock model costs that many dollars per
    million input tokens."""
    import yaml

    team = rtws / ".minds" / "team.yaml"
    data = yaml.safe_load(team.read_text("utf-8"))
    data["caps"] = caps
    team.write_text(yaml.safe_dump(data), "utf-8")
    if price is not None:
        llm = rtws / ".minds" / "llm.yaml"
        conf = yaml.safe_load(llm.read_text("utf-8"))
        conf["providers"]["mock"]["models"]["mock-model"]["price"] = {
            "input_per_mtok": price,
            "output_per_mtok": 0,
        }
        llm.write_text(yaml.safe_dump(conf), "utf-8")


async def test_a_drive_cap_reached_mid_phase_asks_whether_to_go_on(rtws: Path) -> None:
    """`caps.drive` in the loop (agent-loop §8.2): the drive stops at the cap, and the
    task waits on a question instead of ending; answered, the phase goes on."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    _caps(rtws, {"drive": {"max_tokens": 1000}})
    big = Turn(tool_calls=[call("list_dir", path=".")], input_tokens=900, output_tokens=200)
    model = ScriptedModel(
        [
            big,  # PLAN: over the drive's cap after this step
            turn(create("a"), end("DO")),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.WAITING, report.reason
    [q] = rt.store.open_questions()
    assert "caps.drive.max_tokens" in q.headline and q.headline.endswith("Continue?")
    rt.answer_question(q.id, "yes, go on")
    await rt.aclose()
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE and model.remaining == 0, report.reason
    assert phases(model) == ["PLAN", "PLAN", "DO", "CHECK", "SELF_IMPROVE"]
    await rt.aclose()


async def test_the_loops_spending_since_the_humans_last_word_is_capped_by_a_question(
    rtws: Path,
) -> None:
    """`caps.drive.max_cost` counts what the loop spent since the human last spoke,
    across phases: once reached, the human is asked before more work (in their
    currency format); the count starts again with their answer."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    _caps(rtws, {"drive": {"max_cost": 0.25}}, price=1000)  # $0.001 a token
    step = {"input_tokens": 100, "output_tokens": 0}  # $0.10 a step
    model = ScriptedModel(
        [
            Turn(tool_calls=[create("a"), end("DO")], **step),  # PLAN
            Turn(tool_calls=[complete("n1"), end("CHECK")], **step),  # DO
            Turn(tool_calls=[verdict("n1", ok=False), end("ADJUST")], **step),  # CHECK: $0.30
        ]
    )
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.WAITING, report.reason
    [q] = rt.store.open_questions()
    assert "$0.30" in q.headline and "caps.drive.max_cost" in q.headline
    assert phases(model) == ["PLAN", "DO", "CHECK"]  # asked before ADJUST was entered
    state = ls.get(rt.store, TASK)
    assert state is not None and round(state.drive_cost, 2) == 0.30
    rt.answer_question(q.id, "go on")
    state = ls.get(rt.store, TASK)
    assert state is not None and state.drive_cost == 0.0
    await rt.aclose()


async def test_after_the_drive_step_cap_the_human_is_asked_whether_to_go_on(
    rtws: Path,
) -> None:
    import yaml

    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    team = rtws / ".minds" / "team.yaml"
    data = yaml.safe_load(team.read_text("utf-8"))
    data["loop"] = {"retries": {"drive_steps": 3}}
    team.write_text(yaml.safe_dump(data), "utf-8")
    model = ScriptedModel(
        [
            turn(create("a")),
            turn(call("list_dir", path=".")),
            turn(end("DO")),  # 3 steps: the next phase must wait for the human
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.WAITING and "Continue?" in report.reason
    [q] = rt.store.open_questions()
    assert phases(model) == ["PLAN"] * 3
    rt.answer_question(q.id, "yes, go on")
    await rt.aclose()
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE and model.remaining == 0
    await rt.aclose()


async def test_a_message_after_done_reopens_the_task_through_plan(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("a"), end("DO")),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
            # the user asks for more: PLAN again, then the new node through the loop
            turn(create("b"), end("DO")),
            turn(complete("n2"), end("CHECK")),
            turn(verdict("n2"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "do a")
    assert report.outcome is LoopOutcome.DONE
    await rt.aclose()
    report, rt = await run_task(rtws, model, "also do b")
    assert report.outcome is LoopOutcome.DONE and model.remaining == 0
    assert phases(model)[4:] == ["PLAN", "DO", "CHECK", "SELF_IMPROVE"]
    await rt.aclose()


def _with_approvals(rtws: Path, tools: list[str]) -> None:

    write_team(rtws, {"dev": {"toolsets": ["fs"], "approval_required": tools}})


async def test_an_approval_approved_runs_the_call_and_one_rejected_fails_the_node(
    rtws: Path,
) -> None:
    _with_approvals(rtws, ["move"])
    (rtws / "draft.md").write_text("notes\n", "utf-8")
    move = call("move", src="draft.md", dst="NOTES.md")
    model = ScriptedModel(
        [
            turn(create("publish"), end("DO")),
            turn(move),  # waits for approval: the node waits, the loop stops (R7, exit 4)
            turn(complete("n1"), end("CHECK")),  # DO n1 again, after the approved move ran
            turn(verdict("n1"), end("END")),
            turn(end("END")),  # SELF_IMPROVE
            turn(create("publish again")),  # the second scope: PLAN, DO
            turn(end("DO")),
            turn(call("move", src="NOTES.md", dst="OUT.md")),  # rejected
            # ADJUST sees why and gives up on the node
            turn(
                call(
                    "node_transition",
                    node_id="n2",
                    to="FAILED",
                    reason="refused",
                    conclusion="the human refused to publish",
                ),
                end("END"),
            ),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "publish the notes")
    assert report.outcome is LoopOutcome.WAITING and "approval" in report.reason
    [pending] = rt.pending_approvals()
    assert not (rtws / "NOTES.md").exists()  # nothing ran before the approval
    rt.approve(pending.id)
    await rt.aclose()
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE and (rtws / "NOTES.md").is_file()
    await rt.aclose()
    report, rt = await run_task(rtws, model, "publish it elsewhere too")
    assert report.outcome is LoopOutcome.WAITING
    [pending] = rt.pending_approvals()
    rt.reject(pending.id, "not there")
    await rt.aclose()
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.FAILED and model.remaining == 0
    assert not (rtws / "OUT.md").exists()
    moves = [
        (e.data["from"], e.data["to"], e.data["reason"])
        for e in ws_log(rt)
        if e.node_id == "n2" and e.kind == "transition"
    ]
    # the approval was the node's: it waited, and the rejection failed it (agent-loop §5.4)
    assert ("IN_PROGRESS", "WAIT", "WAIT_USER_APPROVAL apv-") in [
        (a, b, r[: len("WAIT_USER_APPROVAL apv-")]) for a, b, r in moves
    ]
    assert ("WAIT", "CHECK_FAILED", "WAIT_USER_APPROVAL_REJECTED: not there") in moves
    assert phases(model)[-2:] == ["ADJUST", "SELF_IMPROVE"]
    await rt.aclose()


def _dispatch_waiting_on_the_human(rtws: Path) -> ScriptedModel:
    """PLAN gives n1 to qa; qa's side dialog asks the human and waits; the loop parks."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}, "qa": {"toolsets": ["fs"]}})
    return ScriptedModel(
        {
            "dev": [
                turn(create("docs", assignee="MEMBER:qa")),
                turn(call("node_dispatch", node_id="n1"), end("DO")),
                turn(end("END")),  # SELF_IMPROVE, once n1 is cancelled
            ],
            "qa": ["!?@human Which format do the docs use?\n"],
        }
    )


async def test_cancelling_a_dispatched_node_stops_its_side_dialog(rtws: Path) -> None:
    """The user cancels a node a teammate works on (`mindloop node cancel`): the side
    dialog is stopped with it (its question leaves the human's list, it is not driven
    again), the dispatcher gets a note, and the loop ends without the node."""
    from mindloop import service

    model = _dispatch_waiting_on_the_human(rtws)
    report, rt = await run_task(rtws, model, "write the docs")
    assert report.outcome is LoopOutcome.WAITING, report.reason
    [q] = rt.store.open_questions()
    side = rt.store.get_dialog(q.dialog_id)
    assert side.kind == "side" and side.member == "qa"
    await rt.aclose()
    async with service.open_project(rtws, providers={"mock": model}) as project:
        done = service.cancel_node(project, TASK, "n1", "the docs are not needed")
    assert done.stopped == [side.id]
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE and model.remaining == 0, report.reason
    assert rt.store.open_questions() == [] and rt.store.get_dialog(side.id).status == "error"
    assert ws_of(rt).nodes["n1"].status is NodeStatus.CANCELLED
    notes = [m.data["text"] for m in rt.store.load_history(report.root_id) if m.kind == "note"]
    assert any(f"side dialog {side.id} (@qa) of node n1 was cancelled" in n for n in notes)
    await rt.aclose()


async def test_a_node_ended_elsewhere_has_its_side_dialog_stopped_when_the_loop_routes(
    rtws: Path,
) -> None:
    """A node cancelled by a writer that stops nothing (the workspace API of another
    process): the loop's next routing stops the side dialog still working on it."""
    from mindloop.workspace.api import WorkspaceApi

    model = _dispatch_waiting_on_the_human(rtws)
    report, rt = await run_task(rtws, model, "write the docs")
    assert report.outcome is LoopOutcome.WAITING, report.reason
    [q] = rt.store.open_questions()
    await rt.aclose()
    with WorkspaceApi(rtws, TASK) as api:
        api.run(
            lambda s: s.transition(
                node_id="n1", to=NodeStatus.CANCELLED, reason="dropped", conclusion="not needed"
            )
        )
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE and model.remaining == 0, report.reason
    assert rt.store.open_questions() == []
    assert rt.store.get_dialog(q.dialog_id).status == "error"
    await rt.aclose()


async def test_a_message_posted_as_the_last_phase_ends_is_taken_as_new_scope(
    rtws: Path,
) -> None:
    """A message that reaches the loop root while its last drive still holds it waits in
    the root's inbox; the loop takes it before it ends the task, so the run goes on with
    it (R0: new scope, PLAN) instead of ending DONE with the message never read."""
    from mindloop.events.types import Event, PhaseEnded
    from mindloop.loop.driver import TaskLoop
    from tests.loop.loop_util import WorkScript, runtime, work_phases

    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = WorkScript(
        [
            turn(create("a"), end("DO")),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(create("b"), end("DO")),  # PLAN for the late message
            turn(complete("n2"), end("CHECK")),
            turn(verdict("n2"), end("END")),
        ]
    )
    rt, policies = runtime(rtws, model)
    loop = TaskLoop(rt, policies, TASK)
    posted: list[str] = []

    def late(ev: Event) -> None:  # the first review ends: the root's drive still holds it
        if isinstance(ev, PhaseEnded) and ev.phase == "SELF_IMPROVE" and not posted:
            posted.append(rt.post_user_message(loop.root, "also do b").data["text"])

    rt.bus.subscribe(late)
    report = await loop.run("do a")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert posted == ["also do b"]
    texts = [m.data.get("text") for m in rt.store.load_history(loop.root) if m.kind == "user"]
    assert "also do b" in texts
    assert work_phases(model)[-4:] == ["PLAN", "DO", "CHECK", "SELF_IMPROVE"]
    assert model.remaining == 0
    await rt.aclose()
