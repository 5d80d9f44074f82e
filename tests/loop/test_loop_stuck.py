"""The stuck detector and the format-requery count over a dialog's recent steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mindloop.config.loop_retries import RetriesConfig
from mindloop.loop.driver import LoopOutcome
from mindloop.loop.ladder import FailureClass
from mindloop.loop.stuck import (
    StuckRule,
    classify_result,
    detect_stuck,
    format_failures,
    recent_steps,
    stuck_in,
)
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mindloop.store import loop_state as ls
from mindloop.testing import ScriptedModel, call
from mindloop.workspace import repo
from tests.loop.loop_util import (
    TASK,
    complete,
    create,
    cycle,
    end,
    give_up,
    phases,
    retry,
    run_task,
    turn,
    verdict,
    workspace,
)
from tests.scenario_util import write_team

CFG = RetriesConfig()


def step(
    i: int, args: str, result: str, *, error: bool = False, name: str = "shell"
) -> list[ChatMessage]:
    return [
        AssistantMessage(tool_calls=[ToolCall(id=f"c{i}", name=name, arguments=args)]),
        ToolResultMessage(call_id=f"c{i}", name=name, content=result, is_error=error),
    ]


def steps(*specs: tuple[str, str, bool]) -> list[ChatMessage]:
    out: list[ChatMessage] = [UserMessage(text="go")]
    for i, (args, result, error) in enumerate(specs):
        out += step(i, args, result, error=error)
    return out


def test_four_identical_action_observation_pairs() -> None:
    same = ('{"cmd": "ls"}', "a.txt", False)
    assert stuck_in(steps(*[same] * 3), steps_used=3, step_budget=12, config=CFG) is None
    found = stuck_in(steps(*[same] * 4), steps_used=4, step_budget=12, config=CFG)
    assert found is not None and found.rule is StuckRule.IDENTICAL_PAIRS
    # Key order and spacing of the arguments do not make calls differ.
    respelled = steps(*[same] * 3, ('{ "cmd":"ls" }', "a.txt", False))
    assert stuck_in(respelled, steps_used=4, step_budget=12, config=CFG) is not None
    # A different observation breaks the run.
    changed = steps(*[same] * 3, ('{"cmd": "ls"}', "a.txt b.txt", False))
    assert stuck_in(changed, steps_used=4, step_budget=12, config=CFG) is None


def test_three_identical_actions_that_each_error() -> None:
    def failing(t: str) -> tuple[str, str, bool]:
        return ('{"cmd": "make"}', f"error at {t}: /tmp/build-{t}/x.c failed", True)

    # Outputs differ only in times and temp paths: still the same action erroring.
    found = stuck_in(
        steps(failing("10:01"), failing("10:02"), failing("10:03")),
        steps_used=3,
        step_budget=12,
        config=CFG,
    )
    assert found is not None and found.rule is StuckRule.IDENTICAL_ERRORS
    ok_in_between = steps(failing("1:00"), ('{"cmd": "make"}', "ok", False), failing("1:02"))
    assert stuck_in(ok_in_between, steps_used=3, step_budget=12, config=CFG) is None


def test_the_step_budget() -> None:
    varied = steps(*[(f'{{"n": {i}}}', f"r{i}", False) for i in range(3)])
    assert stuck_in(varied, steps_used=11, step_budget=12, config=CFG) is None
    found = stuck_in(varied, steps_used=12, step_budget=12, config=CFG)
    assert found is not None and found.rule is StuckRule.STEP_BUDGET


def test_thresholds_come_from_config() -> None:
    same = ('{"cmd": "ls"}', "a.txt", False)
    two = recent_steps(steps(same, same), 5)
    assert detect_stuck(two, steps_used=2, step_budget=9, pairs=2) is not None


def test_format_failures_are_counted_from_the_latest_step_back() -> None:
    msgs = steps(("{}", "a", False))
    msgs += step(7, "{", "invalid JSON arguments for shell: Expecting value", error=True)
    msgs += step(8, "{}", "unknown tool 'shel'; available tools: shell", error=True, name="shel")
    assert format_failures(msgs, limit=2) == 2
    msgs += step(9, "{}", "Error [TOOL_NOT_ALLOWED_IN_PHASE]: not in CHECK", error=True)
    assert format_failures(msgs, limit=2) == 3  # the third: FORMAT_EXHAUSTED
    msgs += step(10, "{}", "exit status 1", error=True)
    assert format_failures(msgs, limit=2) == 0  # a tool error is not a format failure
    refused = AssistantMessage(text="HINT_ILLEGAL: CHECK is not a legal hint after PLAN")
    assert (
        format_failures(
            [*msgs, refused], limit=2, refused=lambda m: m.text.startswith("HINT_ILLEGAL")
        )
        == 1
    )


def test_results_are_classified() -> None:
    assert classify_result("fine", False) is None
    assert (
        classify_result("invalid arguments for shell:\n- cmd: field required", True)
        is FailureClass.FORMAT
    )
    assert (
        classify_result("[mindloop] this call was interrupted by a runtime restart", True)
        is FailureClass.TRANSIENT
    )
    assert classify_result("shell failed: exit 2", True) is FailureClass.TOOL_ERROR


# ---------------------------------------------------------------- in the running loop


@pytest.mark.parametrize(
    ("repeated", "times", "rule"),
    [
        (("list_dir", {"path": "."}), 4, "identical_pairs"),  # 4 identical pairs
        (("read_file", {"path": "missing.txt"}), 3, "identical_errors"),  # 3 failing
    ],
)
async def test_a_member_repeating_one_call_ends_its_do_entry_as_stuck(
    rtws: Path, repeated: tuple[str, dict[str, str]], times: int, rule: str
) -> None:
    """The stuck detector runs in the loop root's DO steps: the entry ends at once (not at
    the step cap), the node is CHECK_FAILED(STUCK), and ADJUST is told why."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    name, args = repeated
    model = ScriptedModel(
        [
            turn(create("loop"), end("DO")),
            *[turn(call(name, **args)) for _ in range(times)],
            turn(
                give_up("n1", "gave up: it went round in circles"),
                end("END"),
            ),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "try")
    assert report.outcome is LoopOutcome.FAILED and model.remaining == 0
    assert phases(model) == ["PLAN", *["DO"] * times, "ADJUST", "SELF_IMPROVE"]
    [failed] = [
        e.data["reason"]
        for e in repo.log(rt.store, TASK)
        if e.node_id == "n1" and e.kind == "transition" and e.data["to"] == "CHECK_FAILED"
    ]
    assert failed.startswith(f"STUCK ({rule}):"), failed
    inputs = [m.data["text"] for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    adjust = next(t for t in inputs if t.startswith("[work loop] Phase ADJUST"))
    assert f"STUCK ({rule})" in adjust
    await rt.aclose()


async def test_steps_failing_on_format_end_the_phase_after_two_repair_prompts(
    rtws: Path,
) -> None:
    """L0 of the ladder in the running loop: a DO step whose calls fail on format (an
    unknown tool, invalid arguments, a tool the phase does not allow) gets its error as
    a repair prompt; the third such step in a row ends the entry with FORMAT_EXHAUSTED
    (not at the step cap, and not as stuck: the calls differ), the node CHECK_FAILED."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("loop"), end("DO")),
            turn(call("shel", command="ls")),  # unknown tool
            turn(call("read_file")),  # invalid arguments: no path
            turn(call("rule_add", text="x")),  # not a DO tool
            turn(
                give_up("n1", "gave up: the calls kept failing"),
                end("END"),
            ),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "try")
    assert report.outcome is LoopOutcome.FAILED and model.remaining == 0
    assert phases(model) == ["PLAN", "DO", "DO", "DO", "ADJUST", "SELF_IMPROVE"]
    [failed] = [
        e.data["reason"]
        for e in repo.log(rt.store, TASK)
        if e.node_id == "n1" and e.kind == "transition" and e.data["to"] == "CHECK_FAILED"
    ]
    assert failed.startswith("FORMAT_EXHAUSTED: 3 steps in a row"), failed
    await rt.aclose()


async def test_repeated_illegal_hints_end_the_phase_as_format_exhausted(rtws: Path) -> None:
    """An illegal hint counts toward L0 like any FORMAT failure (agent-loop §4, §8.2): the
    third `phase_end` in a row refused with HINT_ILLEGAL ends the phase with
    FORMAT_EXHAUSTED, and the rules pick the next phase without a hint."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("a"), end("CHECK")),
            turn(end("CHECK")),
            turn(end("CHECK")),  # the third in a row: PLAN ends (R4: DO next)
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "do a")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    assert phases(model) == ["PLAN", "PLAN", "PLAN", "DO", "CHECK", "SELF_IMPROVE"]
    inputs = [m.data["text"] for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    do_input = next(t for t in inputs if t.startswith("[work loop] Phase DO"))
    assert "the PLAN entry was ended by the runtime: FORMAT_EXHAUSTED: 3 steps" in do_input
    state = ls.get(rt.store, TASK)
    assert state is not None and state.hints_dropped == 3
    await rt.aclose()


async def test_a_node_that_used_its_step_budget_ends_its_do_entry_as_stuck(rtws: Path) -> None:
    """A node's `step_budget` (12) bounds the DO steps of one attempt across DO entries
    (agent-loop §5.1, §8.1): the first entry takes 9 steps (8 writes and a reply that
    ends it), so the next may take 3; then it ends as CHECK_FAILED(STUCK), counted in
    the node's `steps_used`. ADJUST's new attempt starts a fresh budget."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})

    def write(i: int) -> Any:
        return turn(call("write_file", path=f"f{i}.txt", content=str(i)))

    model = ScriptedModel(
        [
            turn(create("a"), end("DO")),
            *[write(i) for i in range(8)],
            "Pausing here; more to write.",  # a reply without calls: the entry ends
            *[write(i) for i in range(8, 11)],  # the next entry: 3 steps left
            turn(cycle("write the files in one step instead")),
            turn(retry("n1"), end("DO")),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "write the files")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    assert phases(model) == [
        "PLAN",
        *["DO"] * 9,
        *["DO"] * 3,
        "ADJUST",
        "ADJUST",
        "DO",
        "CHECK",
        "SELF_IMPROVE",
    ]
    [failed] = [
        e.data["reason"]
        for e in repo.log(rt.store, TASK)
        if e.node_id == "n1" and e.kind == "transition" and e.data["to"] == "CHECK_FAILED"
    ]
    assert failed.startswith("STUCK (step_budget): node n1 used 12 steps of its budget of 12"), (
        failed
    )
    node = workspace(rt).nodes["n1"]
    assert (node.attempt, node.steps_used, node.step_budget) == (1, 1, 12)
    await rt.aclose()


async def test_step_budgets_come_from_loop_nodes_and_plan_may_raise_one(rtws: Path) -> None:
    """A new node's budget is `loop.nodes.step_budget`; PLAN may give a node more, up to
    `loop.nodes.max_step_budget` (agent-loop §5.1)."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    team = rtws / ".minds" / "team.yaml"
    data = yaml.safe_load(team.read_text("utf-8"))
    data["loop"] = {"nodes": {"step_budget": 5, "max_step_budget": 20}}
    team.write_text(yaml.safe_dump(data), "utf-8")
    model = ScriptedModel(
        [
            turn(create("small"), create("big", step_budget=20), create("huge", step_budget=21)),
            "Is this plan right?\n!?@human Three nodes: small, big, huge. Right?\n",
        ]
    )
    report, rt = await run_task(rtws, model, "plan")
    assert report.outcome is LoopOutcome.WAITING, report.reason
    ws = workspace(rt)
    assert (ws.nodes["n1"].step_budget, ws.nodes["n2"].step_budget) == (5, 20)
    assert "n3" not in ws.nodes
    [refused] = [
        m.data["content"]
        for m in rt.store.load_history(report.root_id)
        if m.kind == "tool_result" and m.data["is_error"]
    ]
    assert "step_budget" in refused and "loop.nodes.max_step_budget (20)" in refused
    await rt.aclose()
