"""A third identical failing call is refused, in every dialog (agent-loop §8.2, L1)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mindloop import DialogRuntime, Scheduler
from mindloop.dialogs.repeats import REPEATED_FAILING_CALL, RepeatGuard, canonical_args
from mindloop.testing import ScriptedModel, Turn, call
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


async def test_the_third_identical_failing_call_is_refused_not_run(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            Turn(tool_calls=[call("read_file", path="missing.txt")]),
            Turn(tool_calls=[call("read_file", path="missing.txt")]),
            Turn(tool_calls=[call("read_file", path="missing.txt")]),  # refused
            Turn(tool_calls=[call("read_file", path="other.txt")]),  # different: runs
            Turn(tool_calls=[call("list_dir", path=".")]),
            Turn(text="giving up"),
        ]
    )
    rt = DialogRuntime(rtws, providers={"mock": model})
    root, _ = rt.start_root_dialog(TASK, "read it", "dev")
    await Scheduler(rt).run()
    results = [m.data for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    assert [r["is_error"] for r in results] == [True, True, True, True, False]
    assert results[0]["content"] == results[1]["content"]
    assert results[2]["content"].startswith(f"Error [{REPEATED_FAILING_CALL}]")
    assert "read_file" in results[2]["content"] and "Change something" in results[2]["content"]
    assert not results[3]["content"].startswith("Error [")
    await rt.aclose()


async def test_the_limit_is_loop_retries_identical_tool_errors(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    team = rtws / ".minds" / "team.yaml"
    team.write_text(team.read_text() + "loop:\n  retries:\n    identical_tool_errors: 3\n", "utf-8")
    model = ScriptedModel(
        [Turn(tool_calls=[call("read_file", path="missing.txt")])] * 4 + [Turn(text="ok")]
    )
    rt = DialogRuntime(rtws, providers={"mock": model})
    root, _ = rt.start_root_dialog(TASK, "read it", "dev")
    await Scheduler(rt).run()
    results = [m.data["content"] for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    assert [r.startswith(f"Error [{REPEATED_FAILING_CALL}]") for r in results] == [
        False,
        False,
        False,
        True,
    ]
    await rt.aclose()


def test_a_success_or_a_different_error_resets_the_count() -> None:
    guard = RepeatGuard()
    guard.record("t", '{"a": 1}', "boom at 10:00", True)
    guard.record("t", '{"a":1}', "boom at 10:01", True)  # same call, same error
    assert guard.refusal("t", '{ "a" : 1 }', 2) is not None
    guard.record("t", '{"a": 1}', "fine", False)
    assert guard.refusal("t", '{"a": 1}', 2) is None and not guard.failing
    guard.record("t", '{"a": 1}', "boom", True)
    guard.record("t", '{"a": 1}', "another failure", True)
    assert guard.refusal("t", '{"a": 1}', 2) is None  # two different errors


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=5))
def test_canonical_arguments_ignore_key_order_and_spacing(args: dict[str, object]) -> None:
    import json

    spaced = json.dumps(dict(reversed(list(args.items()))), indent=2)
    assert canonical_args(spaced) == canonical_args(json.dumps(args))
