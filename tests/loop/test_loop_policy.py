"""Phases as turn policies (issue 12, parts 1 and 2): the tool matrix offered and enforced,
tellasks checked per phase, `phase_end` validated and ending the phase, a reply without
tool calls ending it too."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop import DialogRuntime, DriveEnd
from mindloop.config.loop import PhaseSteps
from mindloop.loop.phases import (
    LOOP_OWNED,
    PHASES,
    TOOL_CLASSES,
    Phase,
    ToolClass,
    matrix_markdown,
    step_cap,
    tool_class,
)
from mindloop.loop.policy import TOOL_NOT_ALLOWED_IN_PHASE, LoopPolicy, count_refusals
from mindloop.loop.tasks import loop_root
from mindloop.store import DialogRecord
from mindloop.store import loop_state as ls
from mindloop.testing import ScriptedModel, Turn, call
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


def test_the_matrix_is_the_reference_table() -> None:
    # agent-loop §3: who may write, run shells, plan, dispatch, ask, wait, self-improve.
    def allowed(cls: ToolClass) -> set[Phase]:
        return {p for p, s in PHASES.items() if cls in s.tools}

    assert allowed(ToolClass.WRITE) == {Phase.DO}
    assert allowed(ToolClass.SHELL) == {Phase.DO, Phase.CHECK}
    assert allowed(ToolClass.NODE_STRUCTURE) == {Phase.PLAN, Phase.ADJUST}
    assert allowed(ToolClass.SELF_IMPROVE) == {Phase.SELF_IMPROVE}
    assert allowed(ToolClass.WAIT_FOR) == {Phase.PLAN, Phase.DO, Phase.ADJUST}
    assert allowed(ToolClass.PHASE_END) == set(Phase) == allowed(ToolClass.READ)
    assert {p for p, s in PHASES.items() if s.tellask} == {Phase.PLAN, Phase.DO, Phase.ADJUST}
    assert {p for p, s in PHASES.items() if s.q4h} == {Phase.PLAN, Phase.DO, Phase.ADJUST}
    assert [step_cap(PhaseSteps(), p) for p in Phase] == [8, 12, 8, 6, 6]
    # a tool nobody classified (MCP, Python tools) is a workspace write: DO only
    assert tool_class("mcp_fetch") is ToolClass.WRITE
    assert all(name in TOOL_CLASSES for name in LOOP_OWNED)
    table = matrix_markdown()
    assert "| workspace write | – | ✓ | – | – | – |" in table


def _policies(phase: Phase):  # type: ignore[no-untyped-def]
    policy = LoopPolicy(phase, "en")

    def resolve(rec: DialogRecord) -> LoopPolicy | None:
        return policy if rec.kind == "root" else None

    return resolve


async def _root_in_phase(rt: DialogRuntime, phase: Phase, text: str) -> DialogRecord:
    task = loop_root(rt, TASK, member="dev")
    state = ls.get(rt.store, TASK)
    assert state is not None
    ls.save(rt.store, state.model_copy(update={"phase": phase}))
    rt.post_user_message(task.root_id, text)
    return rt.store.get_dialog(task.root_id)


async def test_a_phase_offers_its_row_and_refuses_the_rest(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs", "shell"]}, "qa": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            Turn(
                text="!?@human is this right?\n",
                tool_calls=[call("write_file", path="x.txt", content="no"), call("list_dir")],
            ),
            Turn(text="!?@qa please look\n", tool_calls=[call("self_md_patch")]),
            Turn(
                tool_calls=[
                    call(
                        "phase_end",
                        next_behavior="ADJUST",
                        summary={"progress": "n1 failed its check", "risks": ["flaky"]},
                        reason="checked everything",
                    )
                ]
            ),
            Turn(text="never reached"),
        ]
    )
    rt = DialogRuntime(rtws, providers={"mock": model}, policies=_policies(Phase.CHECK))
    root = await _root_in_phase(rt, Phase.CHECK, "check the nodes")
    result = await rt.drive(root.id)
    assert result.reason is DriveEnd.STOPPED and result.steps == 3
    offered = [t.name for t in model.requests[0].tools]
    loop_tools = ["doc_lookup", "node_get", "node_list", "node_transition", "node_update"]
    assert offered == ["read_file", "list_dir", "search", "run_shell", *loop_tools, "phase_end"]
    assert "# Work loop phase: CHECK" in model.requests[0].system
    history = rt.store.load_history(root.id)
    results = {m.data["name"]: m.data for m in history if m.kind == "tool_result"}
    refused = results["write_file"]["content"]
    assert refused.startswith(f"Error [{TOOL_NOT_ALLOWED_IN_PHASE}]")
    assert "available in this phase: read_file, list_dir, search, run_shell, doc_lookup" in refused
    assert not (rtws / "x.txt").exists()
    assert not results["list_dir"]["is_error"]
    # a loop-owned tool of another phase is refused the same way (or unknown: not offered)
    assert results["self_md_patch"]["is_error"]
    notes = [m.data for m in history if m.kind == "tellask_result"]
    assert [n["code"] for n in notes] == [TOOL_NOT_ALLOWED_IN_PHASE] * 2
    assert rt.store.open_questions() == [] and len(rt.store.list_dialogs()) == 1
    assert count_refusals(history) == 3 + (
        results["self_md_patch"]["content"].startswith(f"Error [{TOOL_NOT_ALLOWED_IN_PHASE}]")
    )
    state = ls.by_root(rt.store, root.id)
    assert state is not None and state.ended is not None
    assert state.ended.by is ls.EndedBy.TOOL and state.ended.hint is ls.Hint.ADJUST
    assert state.ended.summary.risks == ["flaky"] and state.ended.reason == "checked everything"
    await rt.aclose()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"next_behavior": "LATER", "summary": {}, "reason": "x"}, "next_behavior"),
        ({"next_behavior": "DO", "summary": {"progress": "x" * 1201}, "reason": "x"}, "tokens"),
        ({"next_behavior": "DO", "summary": {"mood": "good"}, "reason": "x"}, "summary.mood"),
        ({"next_behavior": "DO", "summary": {}, "reason": " "}, "reason"),
        ({"summary": {}, "reason": "x"}, "next_behavior"),
    ],
)
async def test_phase_end_is_checked_against_its_schema(
    rtws: Path, arguments: dict[str, object], error: str
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel([Turn(tool_calls=[call("phase_end", **arguments)]), "giving up"])
    rt = DialogRuntime(rtws, providers={"mock": model}, policies=_policies(Phase.PLAN))
    root = await _root_in_phase(rt, Phase.PLAN, "plan it")
    result = await rt.drive(root.id)
    # the bad call did not end the phase: the model spoke again (and ended it by replying)
    assert result.reason is DriveEnd.DONE and result.steps == 2
    [res] = [m.data for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    assert res["is_error"] and error in res["content"]
    state = ls.by_root(rt.store, root.id)
    assert state is not None and state.ended is None
    await rt.aclose()


async def test_a_summary_of_exactly_300_tokens_is_accepted(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    summary = {"progress": "x" * 1000, "pending": ["y" * 200]}  # 1,200 chars = 300 tokens
    model = ScriptedModel(
        [Turn(tool_calls=[call("phase_end", next_behavior="END", summary=summary, reason="r")])]
    )
    rt = DialogRuntime(rtws, providers={"mock": model}, policies=_policies(Phase.SELF_IMPROVE))
    root = await _root_in_phase(rt, Phase.SELF_IMPROVE, "tidy up")
    result = await rt.drive(root.id)
    assert result.reason is DriveEnd.STOPPED
    state = ls.by_root(rt.store, root.id)
    assert state is not None and state.ended is not None and state.ended.hint is ls.Hint.END
    await rt.aclose()


async def test_phase_end_outside_a_loop_is_not_a_member_tool(rtws: Path) -> None:
    # the loop's tools are loop-owned: `*` does not select them, chat never offers them
    write_team(rtws, {"dev": {"toolsets": ["*"]}})
    model = ScriptedModel(
        [
            Turn(tool_calls=[call("phase_end", next_behavior="END", summary={}, reason="r")]),
            "ok",
        ]
    )
    rt = DialogRuntime(rtws, providers={"mock": model})
    root, _ = rt.start_root_dialog(TASK, "hello", "dev")
    await rt.drive(root.id)
    assert "phase_end" not in [t.name for t in model.requests[0].tools]
    [res] = [m.data for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    assert res["is_error"] and res["content"].startswith("Error [TOOL_NOT_ALLOWED]")
    await rt.aclose()
