"""The six wait kinds of agent-loop §6.2 (issue 12, part 4): each opened, resolved by its
structured event, and timed out as its policy says — a timer fires, a tool or event wait
fails, a question assumes its stated default or reminds, an approval only reminds (never
auto-approves), a node's side dialog fails past its active-time or wall-clock limit.
Due times are fired with an explicit `now` (the scheduler's own timers are covered in
test_waits.py): no test sleeps."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.policy import DefaultPolicy
from mindloop.dialogs.request import RequestBuilder
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.dialogs.tree import DetachedReply
from mindloop.dialogs.wait_kinds import (
    WAIT_KINDS,
    ApprovalDecision,
    Decision,
    SystemEvent,
    TimerFired,
    ToolResult,
    WaitKind,
    WaitMode,
    WaitOutcome,
)
from mindloop.errors import MindloopError, NotFoundError
from mindloop.events.types import Event, WaitReminded
from mindloop.store import DialogStatus, Store, WaitRecord, WaitStatus
from mindloop.store.waits import all_kept_events, resolved_since
from mindloop.testing import ScriptedModel, Turn, call
from mindloop.tools.base import OpenWait, Tool, ToolContext, ToolOutput, call_key
from mindloop.tools.registry import ToolArgs
from mindloop.toolsets import standard_registry
from mindloop.toolsets.waits import WAIT_TOOLS, add_wait_toolset
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"
HOUR = 3600.0


class WaitForPolicy(DefaultPolicy):
    """The member's tools plus the loop-owned `wait_for` (as the loop's phases offer it)."""

    def offered_tools(self, live: LiveDialog, parts: RequestBuilder) -> Sequence[Tool[Any]]:
        own = parts.member_tools(live.member, is_root=live.is_root)
        return [*own, *parts.tools.loop_tools(WAIT_TOOLS)]


def _rt(rtws: Path, model: ScriptedModel, **kw: object) -> DialogRuntime:
    return DialogRuntime(
        rtws,
        providers={"mock": model},
        tools=_registry(),  # type: ignore[arg-type]
        policies=lambda rec: WaitForPolicy(),
        **kw,  # type: ignore[arg-type]
    )


def _said(rt: DialogRuntime, did: str) -> list[str]:
    return [m.data["text"] for m in rt.store.load_history(did) if m.kind == "assistant"]


def _notes(rt: DialogRuntime, did: str) -> list[str]:
    return [m.data["text"] for m in rt.store.load_history(did) if m.kind == "note"]


class JobArgs(ToolArgs):
    job: str


async def _start_job(args: JobArgs, ctx: ToolContext) -> ToolOutput:
    """An async tool: it starts a job and the dialog waits for its result."""
    payload = {"call_key": ctx.call_key, "tool": "start_job", "job_id": args.job}
    return ToolOutput(f"job {args.job} started", effects=(OpenWait("tool", ctx.call_key, payload),))


def _registry() -> object:
    reg = standard_registry()
    reg.add_toolset("jobs", [Tool[BaseModel]("start_job", "Start a job.", JobArgs, _start_job)])  # type: ignore[arg-type]
    add_wait_toolset(reg)
    return reg


def test_the_table_names_every_kind_of_the_reference_once() -> None:
    refs = [spec.ref for spec in WAIT_KINDS.values()]
    assert sorted(refs) == sorted(
        [
            "WAIT_USER_INPUT",
            "WAIT_USER_APPROVAL",
            "WAIT_SUBAGENT",
            "WAIT_TOOL",
            "WAIT_TIMER",
            "WAIT_SYSTEM_EVENT",
        ]
    )
    assert set(WAIT_KINDS) == set(WaitKind)
    for kind, spec in WAIT_KINDS.items():
        assert spec.event.kind is kind  # each resolving event names its own kind


# ---------------------------------------------------------------------- WAIT_USER_INPUT


async def test_a_question_carries_a_user_input_wait_that_closes_with_the_answer(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {}})
    rt = _rt(rtws, ScriptedModel(["!?@human Which database?\n", "noted"]))
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    [q] = rt.store.open_questions(dialog_id=root.id)
    [w] = rt.store.open_waits(root.id)
    assert (w.kind, w.key, w.blocks) == (WaitKind.USER_INPUT, q.id, False)  # the question parks
    assert w.payload["question"] == q.headline == "@human Which database?"
    assert w.due_at == pytest.approx(w.created_at + 48 * HOUR)
    rt.answer_question(q.id, "SQLite")
    closed = rt.store.get_wait(w.id)
    assert closed.status is WaitStatus.RESOLVED
    assert closed.resolution is not None
    assert closed.resolution["outcome"] == WaitOutcome.OK
    assert closed.resolution["event"] == {"q4h_id": q.id, "text": "SQLite"}
    await Scheduler(rt).run()
    assert _said(rt, root.id) == ["!?@human Which database?\n", "noted"]
    assert not any("user_input" in n for n in _notes(rt, root.id))  # the answer is the news
    await rt.aclose()


async def test_an_unanswered_question_without_a_default_is_reminded_every_48_hours(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {}})
    rt = _rt(rtws, ScriptedModel([]))
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    q = rt.ask_human(root.id, "Which database?")
    heard: list[Event] = []
    rt.bus.subscribe(heard.append)
    [w] = rt.store.open_waits(root.id)
    assert rt.waits.fire_due(w.created_at + 47 * HOUR) == []  # not due yet
    assert rt.waits.fire_due(w.created_at + 48 * HOUR + 1) == []  # reminded, still open
    again = rt.store.get_wait(w.id)
    assert (again.status, again.reminders) == (WaitStatus.OPEN, 1)
    assert again.due_at == pytest.approx(w.created_at + 96 * HOUR + 1)
    [told] = [e for e in heard if isinstance(e, WaitReminded)]
    assert q.id in told.text and "mindloop answer" in told.text
    assert rt.store.get_question(q.id).status == "open"
    rt.waits.fire_due(w.created_at + 97 * HOUR)
    assert rt.store.get_wait(w.id).reminders == 2
    stored = [e for e in rt.store.events(root.id) if e["type"] == "wait_reminder"]
    assert len(stored) == 2
    await rt.aclose()


async def test_after_48_hours_a_question_with_a_default_assumes_it_and_says_so(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {}})
    rt = _rt(rtws, ScriptedModel(["going with SQLite"]))
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await rt.drive(root.id)  # the script's turn is for later: nothing to answer yet
    q = rt.ask_human(
        root.id, "Which database?", options=["SQLite", "PostgreSQL"], default_assumption="SQLite"
    )
    assert await Scheduler(rt).run() == []  # parked on the question
    [w] = rt.store.open_waits(root.id)
    assert w.payload["options"] == ["SQLite", "PostgreSQL"]
    [closed] = rt.waits.fire_due(w.created_at + 48 * HOUR + 1)
    assert closed.status is WaitStatus.EXPIRED
    assert closed.resolution is not None and closed.resolution["outcome"] == WaitOutcome.TIMEOUT
    answered = rt.store.get_question(q.id)
    assert answered.status == "answered" and "assumed: SQLite" in (answered.answer or "")
    await Scheduler(rt).run()
    assert _said(rt, root.id)[-1] == "going with SQLite"
    [user] = [m for m in rt.store.load_history(root.id) if "assumed" in m.data.get("text", "")]
    assert user.kind == "user" and "No answer came in time" in user.data["text"]
    await rt.aclose()


# ---------------------------------------------------------------------- WAIT_TOOL


async def test_an_async_tool_parks_its_dialog_until_its_result_is_delivered(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["jobs"]}})
    rt = _rt(rtws, ScriptedModel([Turn(tool_calls=[call("start_job", job="j1")]), "built"]))
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    assert (await rt.drive(root.id)).reason == "waiting"
    [w] = rt.store.open_waits(root.id)
    assert (w.kind, w.blocks, w.payload["job_id"]) == (WaitKind.TOOL, True, "j1")
    assert w.due_at == pytest.approx(w.created_at + 600)
    done = rt.deliver(ToolResult(call_key=w.key, ok=True, summary="3 files", output_ref="out/"))
    assert [r.id for r in done.resolved] == [w.id] and done.kept is None
    await Scheduler(rt).run()
    assert _said(rt, root.id)[-1] == "built"
    assert _notes(rt, root.id) == [
        "[mindloop] The async tool start_job finished: 3 files (output: out/)"
    ]
    await rt.aclose()


async def test_an_async_tool_without_a_result_fails_after_its_timeout(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["jobs"]}})
    rt = _rt(rtws, ScriptedModel([Turn(tool_calls=[call("start_job", job="j1")]), "giving up"]))
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await rt.drive(root.id)
    [w] = rt.store.open_waits(root.id)
    assert rt.waits.fire_due(w.created_at + 599) == []
    [closed] = rt.waits.fire_due(w.created_at + 601)
    assert (closed.status, closed.resolution["outcome"]) == (  # type: ignore[index]
        WaitStatus.EXPIRED,
        WaitOutcome.TIMEOUT,
    )
    await Scheduler(rt).run()
    assert _notes(rt, root.id)[0].startswith(f"[mindloop] The tool wait {w.key!r} timed out")
    assert _said(rt, root.id)[-1] == "giving up"
    # a late result finds nothing open, and tool results are kept for a wait to come
    assert rt.deliver(ToolResult(call_key=w.key, ok=True, summary="late")).kept is not None
    await rt.aclose()


async def test_a_result_that_comes_before_its_wait_is_kept_and_matched_at_registration(
    rtws: Path,
) -> None:
    """The job finishes before the step that started it commits (agent-loop §6.3 Race):
    the event is kept, and the wait is resolved as it is registered — the dialog is not
    parked, and reads the result in the same drive."""
    write_team(rtws, {"dev": {"toolsets": ["jobs"]}})
    model = ScriptedModel([Turn(tool_calls=[call("start_job", job="j1")]), "used the result"])
    rt = _rt(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    # The call key of the first call of the dialog's first generation (stored id 1).
    key = call_key(root.id, 1, 0)
    kept = rt.deliver(ToolResult(call_key=key, ok=True, summary="early"))
    assert kept.kept is not None and kept.resolved == []
    result = await rt.drive(root.id)
    assert (result.reason, result.final_text) == ("done", "used the result")
    [w] = _closed(rt.store, root.id)
    assert w.status is WaitStatus.RESOLVED and w.resolution["event"]["summary"] == "early"  # type: ignore[index]
    assert all_kept_events(rt.store) == []  # consumed
    hist = [m.kind for m in rt.store.load_history(root.id)]
    assert hist == ["user", "assistant", "tool_call", "tool_result", "note", "assistant"]
    await rt.aclose()


def _closed(store: Store, dialog_id: str) -> list[WaitRecord]:
    return resolved_since(store, dialog_id, 0.0)


# ---------------------------------------------------------------------- WAIT_TIMER


async def test_wait_for_a_time_fires_and_one_too_far_ahead_is_refused(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            Turn(tool_calls=[call("wait_for", seconds=25 * HOUR)]),
            Turn(tool_calls=[call("wait_for", seconds=90, reason="let CI finish")]),
            "CI is done",
        ]
    )
    rt = _rt(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    assert (await rt.drive(root.id)).reason == "waiting"
    results = [m.data for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    assert results[0]["is_error"] and "at most 1d ahead" in results[0]["content"]
    assert results[1]["content"].startswith("Waiting until") and "in 90s" in results[1]["content"]
    [w] = rt.store.open_waits(root.id)
    assert (w.kind, w.payload["reason"]) == (WaitKind.TIMER, "let CI finish")
    assert w.due_at == pytest.approx(w.payload["fire_at"])
    assert rt.waits.fire_due(w.due_at - 1) == []  # type: ignore[operator]
    [fired] = rt.waits.fire_due(w.due_at)
    assert fired.resolution["event"] == TimerFired(wait_id=w.id).model_dump()  # type: ignore[index]
    await Scheduler(rt).run()
    assert _said(rt, root.id)[-1] == "CI is done"
    with pytest.raises(NotFoundError):  # a timer is fired once
        rt.deliver(TimerFired(wait_id="w-nope"))
    await rt.aclose()


# ---------------------------------------------------------------------- WAIT_SYSTEM_EVENT


async def test_wait_for_an_event_matches_its_filter_and_fails_after_24_hours(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            Turn(tool_calls=[call("wait_for", event_type="deploy", filter={"env": "prod"})]),
            "prod is deployed",
            Turn(tool_calls=[call("wait_for", event_type="deploy", filter={"env": "prod"})]),
            "no deploy came",
        ]
    )
    rt = _rt(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await rt.drive(root.id)
    [w] = rt.store.open_waits(root.id)
    assert (w.kind, w.key, w.blocks) == (WaitKind.EXTERNAL, "deploy", True)
    staging = rt.deliver(SystemEvent(event_type="deploy", payload={"env": "staging"}))
    assert staging.resolved == [] and staging.kept is not None  # not this wait's: kept
    prod = rt.deliver(SystemEvent(event_type="deploy", key="v2", payload={"env": "prod"}))
    assert [r.id for r in prod.resolved] == [w.id]
    await Scheduler(rt).run()
    assert _said(rt, root.id)[-1] == "prod is deployed"
    rt.post_user_message(root.id, "and once more")
    await rt.drive(root.id)
    [w2] = rt.store.open_waits(root.id)  # the kept staging event does not match it
    [expired] = rt.waits.fire_due(w2.created_at + 24 * HOUR + 1)
    assert expired.status is WaitStatus.EXPIRED
    await Scheduler(rt).run()
    assert _said(rt, root.id)[-1] == "no deploy came"
    await rt.aclose()


def test_wait_for_refuses_what_is_not_exactly_one_target() -> None:
    from mindloop.toolsets.waits import WaitForArgs

    for bad in ({}, {"seconds": 5, "event_type": "x"}, {"seconds": 5, "filter": {"a": 1}}):
        with pytest.raises(ValueError, match=r"exactly one|filter goes with"):
            WaitForArgs.model_validate(bad)
    with pytest.raises(ValueError):
        WaitForArgs.model_validate({"seconds": 0})


# ---------------------------------------------------------------------- WAIT_SUBAGENT


def _sink(store: Store, reply: DetachedReply) -> None:
    store.record_event("sink", reply.caller_id, {"status": reply.status, "text": reply.text})


async def test_a_node_side_dialog_fails_past_its_active_time_not_while_it_asks_the_human(
    rtws: Path,
) -> None:
    write_team(rtws, {"lead": {}, "worker": {}})
    model = ScriptedModel({"lead": ["started", "node failed: noted"], "worker": ["!?@human Why?"]})
    rt = _rt(rtws, model, sinks={"s": _sink})
    root, _ = rt.start_root_dialog(TASK, "go", "lead")
    side = rt.start_detached(root.id, "worker", "build it", sink="s", payload={"node_id": "n1"})
    await Scheduler(rt).run()
    [w] = [x for x in rt.store.open_waits(root.id) if x.kind == WaitKind.DETACHED]
    assert (w.blocks, w.node, w.payload["node_id"]) == (False, "n1", "n1")
    assert w.due_at == pytest.approx(w.created_at + 1800)
    # 31 minutes on, the side dialog has waited on the human nearly all that time: its
    # active time is short of the limit, so the wait is moved on, not failed.
    assert rt.waits.fire_due(w.created_at + 31 * 60) == []
    moved = rt.store.get_wait(w.id)
    assert moved.status is WaitStatus.OPEN and moved.due_at > w.created_at + 31 * 60  # type: ignore[operator]
    # Past the wall-clock limit it fails whatever the active time.
    [failed] = rt.waits.fire_due(w.created_at + 24 * HOUR + 1)
    assert (failed.status, failed.resolution["outcome"]) == (  # type: ignore[index]
        WaitStatus.EXPIRED,
        WaitOutcome.TIMEOUT,
    )
    [sunk] = [e["data"] for e in rt.store.events() if e["type"] == "sink"]
    assert sunk["status"] == "failed" and "cancelled" in sunk["text"]
    cancelled = rt.store.get_dialog(side.id)
    assert cancelled.status is DialogStatus.ERROR and not cancelled.needs_drive
    assert rt.store.open_questions(dialog_id=side.id) == []  # withdrawn from the human
    [asked] = _closed(rt.store, side.id)
    assert (asked.kind, asked.status) == (WaitKind.USER_INPUT, WaitStatus.CANCELLED)
    await Scheduler(rt).run()
    assert _said(rt, root.id) == ["started", "node failed: noted"]
    await rt.aclose()


async def test_a_busy_node_side_dialog_fails_after_30_minutes(rtws: Path) -> None:
    write_team(rtws, {"lead": {}, "worker": {}})
    rt = _rt(rtws, ScriptedModel({"lead": ["started"], "worker": []}), sinks={"s": _sink})
    root, _ = rt.start_root_dialog(TASK, "go", "lead")
    rt.start_detached(root.id, "worker", "build it", sink="s")
    [w] = rt.store.open_waits(root.id)
    [failed] = rt.waits.fire_due(w.created_at + 30 * 60 + 1)
    assert failed.status is WaitStatus.EXPIRED
    assert [e["data"]["status"] for e in rt.store.events() if e["type"] == "sink"] == ["failed"]
    await rt.aclose()


# ---------------------------------------------------------------------- modes and races


async def test_any_waits_of_a_node_are_alternatives_and_node_waits_do_not_park(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {}})
    rt = _rt(rtws, ScriptedModel([]))
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    a = rt.open_wait(
        root.id, WaitKind.EXTERNAL, "a", {"event_type": "a"}, node="n1", mode=WaitMode.ANY
    )
    b = rt.open_wait(
        root.id, WaitKind.EXTERNAL, "b", {"event_type": "b"}, node="n1", mode=WaitMode.ANY
    )
    c = rt.open_wait(root.id, WaitKind.EXTERNAL, "c", {"event_type": "c"}, node="n2")
    assert not any(w.blocks for w in (a, b, c))  # a node's waits never park the dialog
    assert rt.tree.can_drive(root.id)
    rt.deliver(SystemEvent(event_type="b"))
    assert rt.store.get_wait(a.id).status is WaitStatus.CANCELLED
    assert rt.store.get_wait(b.id).status is WaitStatus.RESOLVED
    assert rt.store.get_wait(c.id).status is WaitStatus.OPEN  # another node, ALL mode
    await rt.aclose()


async def test_payloads_are_checked_against_their_kind(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    rt = _rt(rtws, ScriptedModel([]))
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    with pytest.raises(ValueError, match="event_type"):
        rt.open_wait(root.id, WaitKind.EXTERNAL, "x", {"what": "deploy"})
    with pytest.raises(MindloopError, match="due time"):
        rt.open_wait(root.id, WaitKind.TIMER, "nap")
    with pytest.raises(MindloopError, match="approve / reject"):
        rt.deliver(ApprovalDecision(approval_id="apv-x", decision=Decision.APPROVE, by="me"))
    assert rt.store.open_waits(root.id) == []
    await rt.aclose()


async def test_an_event_kept_for_one_dialog_is_not_matched_by_another(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    rt = _rt(rtws, ScriptedModel([]))
    one, _ = rt.start_root_dialog(TASK, "go", "dev")
    two, _ = rt.start_root_dialog(TASK, "go", "dev")
    rt.deliver(SystemEvent(event_type="ping"), dialog_id=one.id)
    w2 = rt.open_wait(two.id, WaitKind.EXTERNAL, "ping", {"event_type": "ping"})
    assert w2.status is WaitStatus.OPEN
    w1 = rt.open_wait(one.id, WaitKind.EXTERNAL, "ping", {"event_type": "ping"})
    assert w1.status is WaitStatus.RESOLVED  # matched at registration
    assert time.time() - w1.created_at < 60
    await rt.aclose()


async def test_a_damaged_record_that_cannot_time_out_is_put_off_not_spun_on(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    rt = _rt(rtws, ScriptedModel([]))
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    bad = WaitRecord(id="apv-bad", dialog_id=root.id, kind="approval", key="k", due_at=1.0)
    rt.store.add_wait(bad)  # no payload: its reminder cannot be written
    timer = rt.open_wait(root.id, WaitKind.TIMER, "t", {"fire_at": 2.0})
    now = time.time()
    assert [w.id for w in rt.waits.fire_due(now)] == [timer.id]  # the others still fire
    put_off = rt.store.get_wait("apv-bad")
    assert put_off.status is WaitStatus.OPEN and put_off.due_at >= now + 60  # type: ignore[operator]
    assert rt.waits.next_due() == put_off.due_at
    await rt.aclose()
