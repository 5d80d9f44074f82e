"""`self_md_patch`'s per-run limit and approval (agent-loop §9.1): at most
`loop.self_md.max_calls_per_run` (3) accepted calls per SELF_IMPROVE run — counted from
the history file, so a resumed run counts what it did — and, with
`loop.self_md.require_approval`, a call that is PROPOSED (its dialog does not wait) and
is applied exactly once, as proposed, when `mindloop approve` decides it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mindloop.config.loop_self_md import SelfMdConfig
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.rtws import init_rtws
from mindloop.testing import ScriptedModel, Turn, call
from mindloop.tools.base import OpenWait, ToolContext, call_key
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import self_md as sm
from mindloop.toolsets import self_md_doc as doc
from mindloop.toolsets import standard_registry
from mindloop.toolsets.self_improve import self_md_patch_tool
from tests.scenario_util import write_team

START = "## Habits\nRead before writing.\n"


def _registry(config: SelfMdConfig) -> ToolRegistry:
    reg = ToolRegistry()
    reg.add_toolset("self_improve", [self_md_patch_tool(config)], loop_owned=True)
    return reg


def _ctx(rtws: Path, n: int, dialog: str = "root-1") -> ToolContext:
    return ToolContext(
        rtws=rtws,
        member="dev",
        dialog_id=dialog,
        call_key=call_key(dialog, 3, n),
        task_path="tasks/t.tsk",
        phase="SELF_IMPROVE",
    )


def _write(rtws: Path, text: str) -> None:
    path = sm.self_md_path(rtws, "dev")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _files(rtws: Path) -> tuple[str, str]:
    d = sm.member_dir(rtws, "dev")
    return sm.read_text(d / sm.SELF_MD), sm.read_text(d / sm.HISTORY)


async def _patch(reg: ToolRegistry, rtws: Path, ctx: ToolContext, content: str) -> dict[str, Any]:
    base = doc.sha256_hex(_files(rtws)[0])
    args = {
        "section": "Habits",
        "op": "append",
        "content": content,
        "base_sha256": base,
        "rationale": "it helps",
    }
    out = await reg.execute("self_md_patch", json.dumps(args), ctx)
    result: dict[str, Any] = json.loads(out.text)
    assert out.is_error == (result["result"] in ("CONFLICT", "REJECTED"))
    assert bool(out.effects) == (result["result"] == "PROPOSED")  # its approval
    return result


async def test_a_fourth_accepted_call_in_a_run_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    _write(tmp_path, START)
    reg = _registry(SelfMdConfig())
    for n in range(3):
        assert (await _patch(reg, tmp_path, _ctx(tmp_path, n), f"Habit {n}."))["result"] == (
            "APPLIED"
        )
    before = _files(tmp_path)
    fourth = await _patch(reg, tmp_path, _ctx(tmp_path, 3), "Habit 3.")
    assert (fourth["result"], fourth["reason"]) == ("REJECTED", "LIMIT")
    assert "at most 3 per run" in fourth["message"] and "#1, #2, #3" in fourth["message"]
    assert _files(tmp_path) == before  # neither self.md nor its history changed
    # a replayed call of the run is still answered by its entry, not refused
    again = await _patch(reg, tmp_path, _ctx(tmp_path, 2), "Habit 2.")
    assert (again["result"], again["history_seq"]) == ("ALREADY_APPLIED", 3)
    # the count lives in the history file: a new registry (a resumed process) agrees
    resumed = await _patch(_registry(SelfMdConfig()), tmp_path, _ctx(tmp_path, 4), "Later.")
    assert resumed["reason"] == "LIMIT" and _files(tmp_path) == before
    # another run (another loop root) has its own three
    other = await _patch(reg, tmp_path, _ctx(tmp_path, 0, dialog="root-2"), "Habit 3.")
    assert other["result"] == "APPLIED"


async def test_the_limit_is_configurable(tmp_path: Path) -> None:
    _write(tmp_path, START)
    reg = _registry(SelfMdConfig(max_calls_per_run=1))
    assert (await _patch(reg, tmp_path, _ctx(tmp_path, 0), "One."))["result"] == "APPLIED"
    second = await _patch(reg, tmp_path, _ctx(tmp_path, 1), "Two.")
    assert (second["result"], second["reason"]) == ("REJECTED", "LIMIT")
    assert "Two." not in _files(tmp_path)[0]


async def test_with_approval_a_call_is_proposed_and_applied_once_when_approved(
    tmp_path: Path,
) -> None:
    """Through the engine: the member's call proposes its change (a `proposed` history
    entry, self.md unchanged) and the dialog goes on without waiting; `approve` applies
    exactly the proposed patch, at once and once."""
    rtws = tmp_path / "proj"
    init_rtws(rtws, provider="mock")
    reg = standard_registry()
    # offered as a member's toolset here (the loop offers it in SELF_IMPROVE)
    reg.add_toolset("selfmd", [self_md_patch_tool(SelfMdConfig(require_approval=True))])
    write_team(rtws, {"dev": {"toolsets": ["selfmd"]}})
    _write(rtws, START)
    args = {
        "section": "Habits",
        "op": "append",
        "content": "Run the tests first.",
        "base_sha256": doc.sha256_hex(START),
        "rationale": "CHECK failed twice on untested code",
    }
    model = ScriptedModel([Turn(tool_calls=[call("self_md_patch", **args)]), "noted"])
    rt = DialogRuntime(rtws, providers={"mock": model}, tools=reg)
    root, _ = rt.start_root_dialog("tasks/example.tsk", "improve yourself", "dev")
    assert (await rt.drive(root.id)).reason == "done"  # it did not wait
    text, _ = _files(rtws)
    assert text == START  # nothing applied
    [proposal] = sm.SelfMdFile(rtws, "dev").history()
    [view] = rt.pending_approvals()
    assert (view.member, view.tool, view.toolset) == ("dev", "self_md_patch", "selfmd")
    assert (view.proposal, view.blocks) == (True, False)
    assert (proposal.status, proposal.approval_id) == ("proposed", view.id)
    [result] = [m.data for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    answered = json.loads(result["content"])
    assert answered["result"] == "PROPOSED" and answered["approval_id"] == view.id
    assert view.id in answered["message"] and not result["is_error"]

    rt.approve(view.id, by="lead", expected_digest=view.args_digest)
    text, history = _files(rtws)
    assert text == START + "Run the tests first.\n"
    _, entry = sm.SelfMdFile(rtws, "dev").history()
    assert (entry.op, entry.content, entry.rationale, entry.status) == (
        "append",
        "Run the tests first.",
        args["rationale"],
        "applied",
    )
    assert (entry.proposal_seq, entry.decided_by) == (proposal.seq, "lead")
    await Scheduler(rt).run()  # nothing runs it again
    assert len(sm.SelfMdFile(rtws, "dev").history()) == 2 and history == _files(rtws)[1]
    assert model.remaining == 0
    await rt.aclose()


async def test_a_replayed_or_repeated_proposal_names_the_same_approval(tmp_path: Path) -> None:
    """A call replayed with its key, or the same change proposed again by another call
    before it is decided, names the first proposal and its approval: one entry."""
    _write(tmp_path, START)
    reg = _registry(SelfMdConfig(require_approval=True))
    first = await _patch(reg, tmp_path, _ctx(tmp_path, 0), "Test first.")
    out = await reg.execute(
        "self_md_patch",
        json.dumps(
            {
                "section": "Habits",
                "op": "append",
                "content": "Test first.",
                "base_sha256": doc.sha256_hex(START),
                "rationale": "it helps",
            }
        ),
        _ctx(tmp_path, 0),
    )
    [wait] = out.effects
    assert isinstance(wait, OpenWait) and (wait.wait_id, wait.blocks) == (
        first["approval_id"],
        False,
    )
    again = await _patch(reg, tmp_path, _ctx(tmp_path, 1), "Test first.")
    assert first["result"] == again["result"] == "PROPOSED"
    assert first["approval_id"] == again["approval_id"] and first["history_seq"] == 1
    assert [e.status for e in sm.SelfMdFile(tmp_path, "dev").history()] == ["proposed"]
    assert _files(tmp_path)[0] == START
    # a proposal counts toward the run's limit like an applied change
    for n in (2, 3):
        assert (await _patch(reg, tmp_path, _ctx(tmp_path, n), f"Habit {n}."))["result"] == (
            "PROPOSED"
        )
    fourth = await _patch(reg, tmp_path, _ctx(tmp_path, 4), "Habit 4.")
    assert fourth["reason"] == "LIMIT"
