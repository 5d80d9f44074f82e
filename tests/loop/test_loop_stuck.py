"""The stuck detector and the format-requery count over a dialog's recent steps."""

from __future__ import annotations

from mindloop.config.loop_retries import RetriesConfig
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
