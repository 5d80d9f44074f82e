"""`loop:` in team.yaml (memory budgets, retries): defaults from agent-loop.md, strict
keys, file:line errors."""

from __future__ import annotations

from pathlib import Path

from mindloop.config import load_config
from tests.config.config_testutil import SAMPLE_TEAM, problem_lines, write_config

TEAM = ".minds/team.yaml"


def test_no_loop_block_gives_the_reference_defaults(tmp_path: Path) -> None:
    write_config(tmp_path)
    loop = load_config(tmp_path).team.loop
    assert loop.memory.context_max == 32000 and loop.memory.context_fraction == 0.25
    assert loop.memory.budget(200_000) == 32000 and loop.memory.budget(32_000) == 8000
    assert loop.memory.sections_for(None).history == 4000
    assert loop.memory.sections_for("check").tool_results == 8000
    assert loop.memory.compaction.trigger == 0.8 and loop.memory.compaction.target == 0.5
    r = loop.retries
    assert (r.format_requeries, r.identical_tool_errors, r.do_repairs, r.adjust_per_node) == (
        2,
        2,
        2,
        3,
    )
    assert (r.drive_steps, r.stuck_identical_pairs, r.stuck_identical_errors) == (200, 4, 3)


def test_loop_settings_load(tmp_path: Path) -> None:
    team = SAMPLE_TEAM + (
        "loop:\n"
        "  memory:\n"
        "    sections: {tool_results: 7000}\n"
        "    phase_overrides:\n"
        "      do: {input: 3000}\n"
        "  retries: {do_repairs: 3, transient_backoff: [1, 3]}\n"
    )
    write_config(tmp_path, team=team)
    loop = load_config(tmp_path).team.loop
    do = loop.memory.sections_for("do")
    assert (do.input, do.workspace_tree, do.tool_results) == (3000, 600, 7000)
    assert loop.retries.do_repairs == 3 and loop.retries.transient_backoff == [1.0, 3.0]


def test_bad_loop_settings_are_reported_at_their_line(tmp_path: Path) -> None:
    team = SAMPLE_TEAM + (
        "loop:\n"  # line 13
        "  memory:\n"
        "    sections: {tool_result: 8000}\n"  # 15
        "    phase_overrides:\n"
        "      done: {input: 1}\n"  # 17
        "    compaction: {trigger: 0.4}\n"  # 18
        "  retries:\n"
        "    do_repairs: '2'\n"  # 20
        "  memroy: {}\n"  # 21
    )
    write_config(tmp_path, team=team)
    lines = problem_lines(tmp_path)
    assert lines[0].startswith(f"{TEAM}:15: loop.memory.sections.tool_result: unknown key")
    assert "tool_results" in lines[0]
    assert lines[1].startswith(f"{TEAM}:17: loop.memory.phase_overrides.done: unknown key")
    assert lines[2] == (
        f"{TEAM}:18: loop.memory.compaction: needs target < trigger <= force_at, got 0.5, 0.4, 0.95"
    )
    assert lines[3].startswith(f"{TEAM}:20: loop.retries.do_repairs: must be an integer")
    assert lines[4].startswith(f"{TEAM}:21: loop.memroy: unknown key")
    assert len(lines) == 5


def test_keys_the_loop_does_not_enforce_are_gone_and_an_old_file_says_why(
    tmp_path: Path,
) -> None:
    """`loop.memory.compaction.idle_task_end` was read nowhere (an idle task never ended):
    it is no longer a key, and a file that still sets it is told what happens instead."""
    team = SAMPLE_TEAM + (
        "loop:\n"  # line 13
        "  memory:\n"
        "    compaction: {idle_task_end: 24h}\n"  # 15
    )
    write_config(tmp_path, team=team)
    [line] = problem_lines(tmp_path)
    assert line.startswith(f"{TEAM}:15: loop.memory.compaction.idle_task_end: unknown key: ")
    assert "SELF_IMPROVE" in line and "every node is terminal" in line


def test_the_system_prompt_cap_is_a_positive_token_count(tmp_path: Path) -> None:
    team = SAMPLE_TEAM + ("loop:\n  memory:\n    system_prompt: 0\n")  # line 15
    write_config(tmp_path, team=team)
    assert problem_lines(tmp_path) == [f"{TEAM}:15: loop.memory.system_prompt: must be >= 1, got 0"]
