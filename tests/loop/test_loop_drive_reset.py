"""The loop's drive count — model steps and cost since the human last said something
(agent-loop §8.2: 200 steps per drive, "reset by a user message or Q4H answer") — starts
again when the human speaks: a message posted to the task's loop root, or an answer to
any question of the task's tree, in the transaction that records it. A message to
another dialog, or a default assumed for an unanswered question, resets nothing."""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop.driver import LoopOutcome
from mindloop.store import loop_state as ls
from mindloop.testing import ScriptedModel, call
from tests.loop.loop_util import (
    TASK,
    WorkScript,
    complete,
    create,
    end,
    run_task,
    set_loop,
    turn,
    verdict,
)
from tests.scenario_util import write_team


def _spent(rt: DialogRuntime) -> tuple[int, float]:
    state = ls.get(rt.store, TASK)
    assert state is not None
    return state.drive_steps, state.drive_cost


async def test_an_answer_starts_the_count_again(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    set_loop(rtws, retries={"drive_steps": 4})
    model = WorkScript(
        [
            turn(create("a")),
            turn(call("list_dir", path=".")),
            turn(text="!?@human Which flavour?\n"),  # the 3rd step asks
            turn(end("DO")),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.WAITING, report.reason
    assert "Which flavour?" in report.reason and _spent(rt)[0] == 3
    [q] = rt.store.open_questions()
    rt.answer_question(q.id, "vanilla")
    assert _spent(rt) == (0, 0.0)
    await rt.aclose()
    # 4 more steps (PLAN's end, DO, CHECK, SELF_IMPROVE) fit in the new count of 4
    report, rt = await run_task(rtws, model)
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0 and not rt.store.open_questions()
    await rt.aclose()


async def test_a_message_to_the_root_starts_the_count_again_and_others_do_not(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("a"), end("DO")),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert _spent(rt)[0] == 4
    other = rt.create_root_dialog(TASK, "dev")  # a chat beside the task: not its root
    rt.post_user_message(other.id, "hello")
    assert _spent(rt)[0] == 4
    rt.post_user_message(report.root_id, "and one more thing")
    assert _spent(rt) == (0, 0.0)
    await rt.aclose()
