"""A question the loop's model asks with `Options:` and `Default:` lines (audit item 8):
its WAIT_USER_INPUT wait carries them, and when no answer comes within
`loop.waits.user_input.timeout` (48 h) the default is assumed (agent-loop §6.2
ASSUME_DEFAULT): the same DO entry goes on with it and the task ends DONE."""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.wait_kinds import WaitKind
from mindloop.loop.driver import LoopOutcome
from mindloop.store import WaitStatus
from mindloop.testing import ScriptedModel
from tests.loop.loop_util import complete, create, end, run_task, turn, verdict
from tests.scenario_util import write_team

HOUR = 3600.0
ASK = (
    "Which format?\n!?@human Formal or casual greeting?\n!?Options: formal | casual\n"
    "!?Default: casual\n"
)


async def test_an_unanswered_question_with_a_default_assumes_it_after_48_hours(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("greeting"), end("DO")),
            ASK,
            turn(complete("n1"), end("CHECK")),  # the same DO entry, after the default
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "greet the user")
    assert report.outcome is LoopOutcome.WAITING, report.reason
    [q] = rt.store.open_questions()
    [w] = [w for w in rt.store.open_waits(q.dialog_id) if w.kind == WaitKind.USER_INPUT]
    assert (w.key, w.payload["options"], w.payload["default_assumption"]) == (
        q.id,
        ["formal", "casual"],
        "casual",
    )
    assert rt.waits.fire_due(w.created_at + 47 * HOUR) == []  # not due yet
    [closed] = rt.waits.fire_due(w.created_at + 48 * HOUR + 1)
    assert closed.status is WaitStatus.EXPIRED
    answered = rt.store.get_question(q.id)
    assert answered.status == "answered" and "assumed: casual" in (answered.answer or "")
    await rt.aclose()
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    seen = [m.text for m in model.requests[2].messages if hasattr(m, "text")]
    assert any("assumed: casual" in t for t in seen), seen
    await rt.aclose()


async def test_without_a_default_the_question_is_only_reminded(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [turn(create("greeting"), end("DO")), "!?@human Formal or casual?\n!?Options: a | b\n"]
    )
    report, rt = await run_task(rtws, model, "greet the user")
    assert report.outcome is LoopOutcome.WAITING
    [q] = rt.store.open_questions()
    [w] = [w for w in rt.store.open_waits(q.dialog_id) if w.kind == WaitKind.USER_INPUT]
    assert w.payload["options"] == ["a", "b"] and w.payload["default_assumption"] is None
    assert rt.waits.fire_due(w.created_at + 48 * HOUR + 1) == []  # reminded, still open
    assert rt.store.get_question(q.id).status == "open"
    await rt.aclose()
