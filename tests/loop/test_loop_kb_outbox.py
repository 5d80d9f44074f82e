"""KB requests from the work loop's SELF_IMPROVE phase (issue 12, part 7; DESIGN.md §8.11).

A member in SELF_IMPROVE calls `kb_request`: the outbox row commits with the tool's
result and the requester never waits. `mindloop run TASK` delivers the request before it
returns (the dispatcher posts it to the one KB dialog of the rtws: the `kb` member's root
dialog on `tasks/kb.tsk/`, created on first use), and a later `mindloop run` drives the
KB dialog, which processes each request once: a kill between the commit and the delivery
is delivered once after a restart, and a second delivery of the same request is
acknowledged without reaching the KB's model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.loop.driver import LoopOutcome, LoopReport
from mindloop.loop.kb import KbDispatcher
from mindloop.store import DialogRecord, Store
from mindloop.store.outbox import Outbox, OutboxStatus
from mindloop.testing import ScriptedModel, Turn, call
from tests.dialogs.crash_points import DiesAfterCommit, process_died
from tests.loop.loop_util import TASK, end, phases, run_task
from tests.scenario_util import write_team

KB_TASK = "tasks/kb.tsk"
ASK = call("kb_request", kind="ADD", topic="Running tests", content="Run pytest with -x first.")
PLAN_NOTHING = Turn(tool_calls=[end("END", "nothing to build")])  # PLAN: no node → SELF_IMPROVE


async def _task(
    rtws: Path, model: ScriptedModel, message: str | None = "tidy up", store: Store | None = None
) -> tuple[LoopReport, DialogRuntime]:
    """`mindloop run TASK` in-process."""
    return await run_task(rtws, model, message, store=store)


async def _run_all(rt: DialogRuntime) -> None:
    """`mindloop run`: every drivable dialog (the KB's), with the dispatcher."""
    await Scheduler(rt, tickers=[KbDispatcher(rt)]).run()


def _kb_dialogs(rt: DialogRuntime) -> list[DialogRecord]:
    return [d for d in rt.store.list_dialogs(task_path=KB_TASK) if d.kind == "root"]


def _kb_inbox(rt: DialogRuntime) -> list[str]:
    (kb,) = _kb_dialogs(rt)
    return [m.data["text"] for m in rt.store.load_history(kb.id) if m.kind == "user"]


def _said(rt: DialogRuntime, dialog_id: str) -> list[str]:
    return [m.data["text"] for m in rt.store.load_history(dialog_id) if m.kind == "assistant"]


async def test_run_task_delivers_the_request_before_it_returns_and_never_waits_on_it(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {}})
    model = ScriptedModel(
        {
            "dev": [PLAN_NOTHING, Turn(tool_calls=[ASK]), Turn(tool_calls=[end("END")])],
            "kb": ["Added kb/testing.md."],
        }
    )
    report, rt = await _task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert phases(model) == ["PLAN", "SELF_IMPROVE", "SELF_IMPROVE"]
    root = report.root_id
    # the requester waited on nothing: its phase went on and ended
    assert rt.store.open_waits(root) == [] and rt.waits.resolved_since(root, 0.0) == []
    # delivered by `run TASK` itself: the KB dialog holds it, not yet processed
    (row,) = Outbox(rt.store).all()
    assert row.status is OutboxStatus.SENT and row.source_member == "dev"
    assert row.payload["topic"] == "Running tests" and row.target == "kb"
    (kb,) = _kb_dialogs(rt)
    assert row.delivered_to == kb.id and _said(rt, kb.id) == []
    assert kb.member == "kb" and rt.config.member("kb").hidden  # the default kb member
    assert "Keep the team's knowledge base under `kb/`" in (rtws / KB_TASK / "goals.md").read_text()
    (message,) = _kb_inbox(rt)
    assert message.startswith("[kb_request from @dev · task tasks/example.tsk]\n")
    assert f"Msg-Id: {row.id}\n" in message and "Kind: ADD\n" in message
    assert message.endswith("Run pytest with -x first.")

    await _run_all(rt)  # `mindloop run`: the KB dialog processes it
    assert _said(rt, kb.id) == ["Added kb/testing.md."]
    (row,) = Outbox(rt.store).all()
    assert row.status is OutboxStatus.ACKED and row.delivered_to == kb.id
    assert model.remaining == 0
    await rt.aclose()


async def test_a_declared_kb_member_keeps_the_knowledge_base(rtws: Path) -> None:
    write_team(rtws, {"dev": {}, "kb": {"name": "Librarian", "toolsets": ["fs"]}})
    model = ScriptedModel(
        {
            "dev": [PLAN_NOTHING, Turn(tool_calls=[ASK, end("END")])],
            "kb": ["Filed."],
        }
    )
    report, rt = await _task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    await _run_all(rt)
    (kb,) = _kb_dialogs(rt)
    assert kb.member == "kb" and rt.config.member("kb").name == "Librarian"
    assert _said(rt, kb.id) == ["Filed."]
    await rt.aclose()


async def test_the_same_request_twice_is_processed_once(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    # two calls of one step with the same request: two rows, one idempotency key
    model = ScriptedModel(
        {
            "dev": [
                PLAN_NOTHING,
                Turn(tool_calls=[ASK, ASK, end("END")]),
                PLAN_NOTHING,  # the task reopened by a later message
                Turn(tool_calls=[ASK, end("END")]),
            ],
            "kb": ["Added."],
        }
    )
    report, rt = await _task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    await _run_all(rt)
    rows = Outbox(rt.store).all()
    assert len(rows) == 2 and rows[0].idempotency_key == rows[1].idempotency_key
    assert sorted(r.status for r in rows) == [OutboxStatus.ACKED, OutboxStatus.DUPLICATE]
    first = next(r for r in rows if r.status is OutboxStatus.ACKED)
    assert next(r for r in rows if r.status is OutboxStatus.DUPLICATE).duplicate_of == first.id
    await rt.aclose()
    # later, in another pass, the same request once more: acknowledged, never re-posted
    report, rt = await _task(rtws, model, "tidy up again")
    assert report.outcome is LoopOutcome.DONE, report.reason
    await _run_all(rt)
    rows = Outbox(rt.store).all()
    assert [r.status for r in rows].count(OutboxStatus.DUPLICATE) == 2
    assert len(_kb_inbox(rt)) == 1
    assert model.remaining == 0  # the KB's model answered once
    await rt.aclose()


@pytest.mark.parametrize("killed_at", ["queued", "delivered"])
async def test_a_kill_after_the_commit_is_delivered_once_after_restart(
    rtws: Path, killed_at: str
) -> None:
    """Killed right after the SELF_IMPROVE step that queued the request committed
    (nothing delivered yet), or right after the delivery committed (the KB not driven)."""
    write_team(rtws, {"dev": {}})
    want = OutboxStatus.PENDING if killed_at == "queued" else OutboxStatus.SENT
    store = DiesAfterCommit(
        rtws / ".mindloop" / "state.sqlite",
        lambda s: any(r.status is want for r in Outbox(s).all()),
    )
    model = ScriptedModel(
        {
            "dev": [PLAN_NOTHING, Turn(tool_calls=[ASK]), Turn(tool_calls=[end("END")])],
            "kb": ["Added."],
        }
    )
    with pytest.raises(SystemExit):
        await _task(rtws, model, store=store)
    store.close()
    snapshot = Store.for_rtws(rtws)
    (row,) = Outbox(snapshot).all()
    assert row.status is want
    (task,) = list(snapshot.iter_tasks())
    root_id = task.root_id
    results = [m for m in snapshot.load_history(root_id) if m.kind == "tool_result"]
    assert sum('"QUEUED"' in r.data["content"] for r in results) == 1  # with its row
    snapshot.close()

    # the restart: `mindloop run TASK` again (same model, its script goes on), then `run`
    rt = DialogRuntime(rtws, providers={"mock": model})
    process_died(rt)
    await rt.aclose()
    report, rt = await _task(rtws, model, None)
    assert report.outcome is LoopOutcome.DONE, report.reason
    await _run_all(rt)
    assert len(_kb_inbox(rt)) == 1
    (row,) = Outbox(rt.store).all()
    assert row.status is OutboxStatus.ACKED
    assert model.remaining == 0  # the KB answered exactly once
    await rt.aclose()


async def test_the_tools_are_offered_only_where_a_policy_offers_them(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"]}})
    patch = call(
        "self_md_patch",
        section="Habits",
        op="append",
        content="x",
        base_sha256="e3b0c44298fc",
        rationale="r",
    )
    model = ScriptedModel([Turn(tool_calls=[patch, ASK]), "ok"])
    rt = DialogRuntime(rtws, providers={"mock": model})  # the default policy
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await rt.drive(root.id)
    offered = {t.name for t in model.requests[0].tools}
    assert "read_file" in offered and not offered & {"self_md_patch", "kb_request"}
    results = [m.data for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    assert all(r["is_error"] and "TOOL_NOT_ALLOWED" in r["content"] for r in results)
    assert Outbox(rt.store).all() == []
    assert not (rtws / ".minds" / "team" / "dev" / "self.md").exists()
    await rt.aclose()


async def test_self_md_patch_in_self_improve_shows_in_the_next_prompt(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    patch = call(
        "self_md_patch",
        section="Habits",
        op="append",
        content="Run the tests before answering.",
        base_sha256="e3b0c44298fc",
        rationale="a failing test reached the user",
    )
    model = ScriptedModel([PLAN_NOTHING, Turn(tool_calls=[patch]), Turn(tool_calls=[end("END")])])
    report, rt = await _task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    _plan, first, second = model.requests
    assert "self.md" not in first.system.split("# How you work")[0]
    assert "# Your self.md (sha256 " in second.system
    assert "## Habits\nRun the tests before answering." in second.system
    persona_end = second.system.index("# Your self.md")
    assert second.system.index("# How you work in mindloop") > persona_end
    await rt.aclose()
