"""KB requests through the engine (issue 12, part 7; DESIGN.md §8.11).

A member in SELF_IMPROVE calls `kb_request`: the outbox row commits with the tool's
result, the requester never waits, and the run's dispatcher delivers the request to the
one KB dialog of the rtws (the `kb` member's root dialog on `tasks/kb.tsk/`, created on
first use), which processes each request once: a kill between the commit and the
delivery is delivered once after a restart, and a second delivery of the same request
is acknowledged without reaching the KB's model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.loop.kb import KbDispatcher
from mindloop.loop.self_improve import SelfImprovePolicy
from mindloop.store import DialogRecord, Store
from mindloop.store.outbox import Outbox, OutboxStatus
from mindloop.testing import ScriptedModel, Turn, call
from tests.dialogs.crash_points import DiesAfterCommit, process_died
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"
KB_TASK = "tasks/kb.tsk"
ASK = call("kb_request", kind="ADD", topic="Running tests", content="Run pytest with -x first.")


def _policy(rec: DialogRecord) -> SelfImprovePolicy | None:
    """The test hook until the loop's phases exist: dev's root dialog is in SELF_IMPROVE."""
    return SelfImprovePolicy() if rec.member == "dev" and rec.task_path == TASK else None


def _runtime(rtws: Path, model: ScriptedModel, store: Store | None = None) -> DialogRuntime:
    return DialogRuntime(rtws, store=store, providers={"mock": model}, policies=_policy)


async def _run(rt: DialogRuntime) -> None:
    await Scheduler(rt, tickers=[KbDispatcher(rt)]).run()


def _kb_dialogs(rt: DialogRuntime) -> list[DialogRecord]:
    return [d for d in rt.store.list_dialogs(task_path=KB_TASK) if d.kind == "root"]


def _kb_inbox(rt: DialogRuntime) -> list[str]:
    (kb,) = _kb_dialogs(rt)
    return [m.data["text"] for m in rt.store.load_history(kb.id) if m.kind == "user"]


def _said(rt: DialogRuntime, dialog_id: str) -> list[str]:
    return [m.data["text"] for m in rt.store.load_history(dialog_id) if m.kind == "assistant"]


async def test_a_request_reaches_the_kb_dialog_once_and_the_requester_never_waits(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {}})
    model = ScriptedModel(
        {"dev": [Turn(tool_calls=[ASK]), "Noted for the KB."], "kb": ["Added kb/testing.md."]}
    )
    rt = _runtime(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "self-improve", "dev")
    first = await rt.drive(root.id)  # the requester's drive ends before any delivery
    assert first.reason == "done" and first.final_text == "Noted for the KB."
    assert rt.store.open_waits(root.id) == []
    (row,) = Outbox(rt.store).all()
    assert row.status is OutboxStatus.PENDING and row.source_member == "dev"
    assert row.payload["topic"] == "Running tests" and row.target == "kb"
    assert _kb_dialogs(rt) == []

    await _run(rt)
    (kb,) = _kb_dialogs(rt)
    assert kb.member == "kb" and rt.config.member("kb").hidden  # the default kb member
    assert "Keep the team's knowledge base under `kb/`" in (rtws / KB_TASK / "goals.md").read_text()
    (message,) = _kb_inbox(rt)
    assert message.startswith("[kb_request from @dev · task tasks/example.tsk]\n")
    assert f"Msg-Id: {row.id}\n" in message and "Kind: ADD\n" in message
    assert message.endswith("Run pytest with -x first.")
    assert _said(rt, kb.id) == ["Added kb/testing.md."]
    (row,) = Outbox(rt.store).all()
    assert row.status is OutboxStatus.ACKED and row.delivered_to == kb.id
    assert model.remaining == 0
    await rt.aclose()


async def test_a_declared_kb_member_keeps_the_knowledge_base(rtws: Path) -> None:
    write_team(rtws, {"dev": {}, "kb": {"name": "Librarian", "toolsets": ["fs"]}})
    model = ScriptedModel({"dev": [Turn(tool_calls=[ASK]), "ok"], "kb": ["Filed."]})
    rt = _runtime(rtws, model)
    rt.start_root_dialog(TASK, "self-improve", "dev")
    await _run(rt)
    (kb,) = _kb_dialogs(rt)
    assert kb.member == "kb" and rt.config.member("kb").name == "Librarian"
    assert _said(rt, kb.id) == ["Filed."]
    await rt.aclose()


async def test_the_same_request_twice_is_processed_once(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    # two calls of one step with the same request: two rows, one idempotency key
    model = ScriptedModel(
        {
            "dev": [Turn(tool_calls=[ASK, ASK]), "ok", Turn(tool_calls=[ASK]), "again"],
            "kb": ["Added."],
        }
    )
    rt = _runtime(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "self-improve", "dev")
    await _run(rt)
    rows = Outbox(rt.store).all()
    assert len(rows) == 2 and rows[0].idempotency_key == rows[1].idempotency_key
    assert sorted(r.status for r in rows) == [OutboxStatus.ACKED, OutboxStatus.DUPLICATE]
    first = next(r for r in rows if r.status is OutboxStatus.ACKED)
    assert next(r for r in rows if r.status is OutboxStatus.DUPLICATE).duplicate_of == first.id
    # later, in another pass, the same request once more: acknowledged, never re-posted
    rt.post_user_message(root.id, "self-improve again")
    await _run(rt)
    rows = Outbox(rt.store).all()
    assert [r.status for r in rows].count(OutboxStatus.DUPLICATE) == 2
    assert len(_kb_inbox(rt)) == 1
    assert model.remaining == 0  # the KB's model answered once
    await rt.aclose()


@pytest.mark.parametrize("killed_at", ["queued", "delivered"])
async def test_a_kill_after_the_commit_is_delivered_once_after_restart(
    rtws: Path, killed_at: str
) -> None:
    """Killed right after the step that queued the request committed (nothing delivered
    yet), or right after the delivery committed (the KB not driven yet)."""
    write_team(rtws, {"dev": {}})
    want = OutboxStatus.PENDING if killed_at == "queued" else OutboxStatus.SENT
    store = DiesAfterCommit(
        rtws / ".mindloop" / "state.sqlite",
        lambda s: any(r.status is want for r in Outbox(s).all()),
    )
    model = ScriptedModel({"dev": [Turn(tool_calls=[ASK]), "ok"], "kb": ["Added."]})
    rt = _runtime(rtws, model, store)
    root, _ = rt.start_root_dialog(TASK, "self-improve", "dev")
    with pytest.raises(SystemExit):
        if killed_at == "queued":  # the requester's own drive dies after its step
            await rt.drive(root.id)
        else:  # the run dies after delivering
            await _run(rt)
    await rt.aclose()
    snapshot = Store.for_rtws(rtws)
    (row,) = Outbox(snapshot).all()
    assert row.status is want
    results = [m for m in snapshot.load_history(root.id) if m.kind == "tool_result"]
    assert len(results) == 1 and '"QUEUED"' in results[0].data["content"]  # with its row
    snapshot.close()

    rt = _runtime(rtws, model)  # the restart: same model, its script goes on
    process_died(rt)
    await _run(rt)
    assert len(_kb_inbox(rt)) == 1
    (row,) = Outbox(rt.store).all()
    assert row.status is OutboxStatus.ACKED
    assert _said(rt, root.id)[-1] == "ok"
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


async def test_self_md_patch_through_a_drive_shows_in_the_next_prompt(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    patch = call(
        "self_md_patch",
        section="Habits",
        op="append",
        content="Run the tests before answering.",
        base_sha256="e3b0c44298fc",
        rationale="a failing test reached the user",
    )
    model = ScriptedModel([Turn(tool_calls=[patch]), "Updated my self.md."])
    rt = _runtime(rtws, model)
    root, _ = rt.start_root_dialog(TASK, "self-improve", "dev")
    await rt.drive(root.id)
    first, second = model.requests
    assert "self.md" not in first.system.split("# How you work")[0]
    assert "# Your self.md (sha256 " in second.system
    assert "## Habits\nRun the tests before answering." in second.system
    persona_end = second.system.index("# Your self.md")
    assert second.system.index("# How you work in mindloop") > persona_end
    await rt.aclose()
