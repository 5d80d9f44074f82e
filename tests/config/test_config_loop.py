"""`loop:` in team.yaml: the work loop's numbers with the reference's defaults, strict, with
file:line errors like every other key (DESIGN.md §8.12, agent-loop.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from mindloop.config import load_config
from mindloop.config.loop import LoopConfig, RouterConfig
from mindloop.config.schema import json_schema
from tests.config.config_testutil import SAMPLE_TEAM, problem_lines, write_config
from tests.scenario_util import ml

TEAM = ".minds/team.yaml"
HOUR = 3600.0


def test_no_loop_block_gives_the_references_defaults(tmp_path: Path) -> None:
    write_config(tmp_path)
    loop = load_config(tmp_path).team.loop
    assert loop == LoopConfig()
    # §3 step caps, §5.1 node budget
    steps = loop.phases
    assert (steps.plan, steps.do, steps.check, steps.adjust, steps.self_improve) == (8, 12, 8, 6, 6)
    assert (loop.nodes.step_budget, loop.nodes.max_step_budget) == (12, 30)
    # §7.1 budgets, B and the phase overrides; §7.2 compaction
    mem = loop.memory
    assert (mem.system_prompt, mem.context_max, mem.history_turns) == (6000, 32000, 6)
    assert mem.budget(1_000_000) == 32000 and mem.budget(64_000) == 16000
    s = mem.sections
    assert (s.input, s.last_step_summary, s.tool_results, s.taskdoc) == (4000, 300, 6000, 2000)
    assert (s.member_memory, s.dialog_summary, s.workspace_summary) == (1500, 1200, 1000)
    assert (s.workspace_tree, s.history, s.retrieved) == (1500, 4000, 2000)
    assert mem.sections_for("do").workspace_tree == 600
    assert mem.sections_for("check").tool_results == 8000
    assert mem.sections_for("self_improve").member_memory == 2000
    assert mem.sections_for("plan") == s
    assert (mem.floors.workspace_tree, mem.floors.history_turns) == (600, 1)
    c = mem.compaction
    assert (c.trigger, c.target, c.min_turns_between, c.force_at) == (0.8, 0.5, 2, 0.95)
    # §6.2 waits
    w = loop.waits
    assert (w.user_input.timeout, w.user_input.remind_every) == (48 * HOUR, 48 * HOUR)
    assert w.approval.remind_every == 72 * HOUR
    assert (w.subagent.active, w.subagent.wall_clock) == (30 * 60, 24 * HOUR)
    assert (w.tool.timeout, w.timer.max_ahead, w.system_event.timeout) == (
        600,
        24 * HOUR,
        24 * HOUR,
    )
    assert w.stale_after == 24 * HOUR
    # §8 retries
    r = loop.retries
    assert (r.format_requeries, r.identical_tool_errors, r.do_repairs) == (2, 2, 2)
    assert (r.adjust_per_node, r.plan_reentries, r.drive_steps) == (3, 1, 200)
    assert r.transient_backoff == [1, 2, 4]
    assert (r.stuck_identical_pairs, r.stuck_identical_errors) == (4, 3)
    # §9
    assert loop.self_md.protected_sections == ["Hard rules"]
    assert (loop.self_md.max_net_tokens_per_call, loop.self_md.max_tokens) == (200, 1500)
    assert (loop.kb.member, loop.kb.task_path, loop.kb.retry_hours) == ("kb", "tasks/kb.tsk", 24)
    assert loop.self_improve.batch_messages == 40
    assert loop.router.member is None and loop.router.max_attempts == 3


def test_values_written_override_their_defaults_only(tmp_path: Path) -> None:
    team = SAMPLE_TEAM + (
        "loop:\n"
        "  phases: {do: 16}\n"
        "  memory:\n"
        "    sections: {history: 6000}\n"
        "    phase_overrides: {do: {history: 3000}}\n"
        "  waits:\n"
        "    user_input: {timeout: 90m}\n"
        "    subagent: {active: 45}\n"
        "  retries: {transient_backoff: [0.5, 2s]}\n"
        "  self_md: {git_commit: true}\n"
        "  router: {member: bob, recent_tasks: 5}\n"
    )
    write_config(tmp_path, team=team)
    loop = load_config(tmp_path).team.loop
    assert (loop.phases.do, loop.phases.plan) == (16, 8)
    do = loop.memory.sections_for("do")
    assert (do.history, do.workspace_tree) == (3000, 600)  # merged over DO's defaults
    assert loop.memory.sections_for("plan").history == 6000
    assert loop.waits.user_input.timeout == 90 * 60
    assert loop.waits.user_input.remind_every == 48 * HOUR
    assert loop.waits.subagent.active == 45
    assert loop.retries.transient_backoff == [0.5, 2.0]
    assert loop.self_md.git_commit
    assert (loop.router.member, loop.router.recent_tasks) == ("bob", 5)


def test_bad_loop_keys_are_reported_at_their_line(tmp_path: Path) -> None:
    team = SAMPLE_TEAM + (
        "loop:\n"  # line 13
        "  phases:\n"
        "    doo: 3\n"  # 15
        "  memory:\n"
        "    sections: {history: '4000'}\n"  # 17
        "  waits:\n"
        "    approval: {remind_every: soon}\n"  # 19
        "  retries:\n"
        "    adjust_per_node: 0\n"  # 21
        "  self_md:\n"
        "    git_commit:\n"  # 23
        "  routr: {}\n"  # 24
    )
    write_config(tmp_path, team=team)
    lines = problem_lines(tmp_path)
    assert lines[0] == f"{TEAM}:15: loop.phases.doo: unknown key (did you mean do?)"
    assert lines[1] == f'{TEAM}:17: loop.memory.sections.history: must be an integer, got "4000"'
    assert lines[2] == (
        f"{TEAM}:19: loop.waits.approval.remind_every: must be a duration such as 30s, 10m, "
        '48h or 7d (or a number of seconds), got "soon"'
    )
    assert lines[3] == f"{TEAM}:21: loop.retries.adjust_per_node: must be >= 1, got 0"
    assert lines[4].startswith(f"{TEAM}:23: loop.self_md.git_commit: must ")
    assert lines[5] == f"{TEAM}:24: loop.routr: unknown key (did you mean router?)"
    assert len(lines) == 6


def test_inconsistent_values_are_refused(tmp_path: Path) -> None:
    team = SAMPLE_TEAM + (
        "loop:\n"  # 13
        "  nodes: {step_budget: 40}\n"  # 14
        "  memory:\n"
        "    compaction: {trigger: 0.4}\n"  # 16
    )
    write_config(tmp_path, team=team)
    assert problem_lines(tmp_path) == [
        f"{TEAM}:14: loop.nodes: step_budget (40) is above max_step_budget (30)",
        f"{TEAM}:16: loop.memory.compaction: needs target < trigger <= force_at, got 0.5, "
        "0.4, 0.95",
    ]


def test_the_router_member_must_be_a_member(tmp_path: Path) -> None:
    write_config(tmp_path, team=SAMPLE_TEAM + "loop:\n  router:\n    member: carol\n")
    assert problem_lines(tmp_path) == [
        f"{TEAM}:15: loop.router.member: 'carol' is not a member (members: alice, bob)"
    ]


def test_the_team_schema_describes_loop(tmp_path: Path) -> None:
    schema = json_schema("team")
    assert "loop" in schema["properties"]
    loop = schema["$defs"]["LoopConfig"]
    assert set(loop["properties"]) >= {"phases", "memory", "waits", "retries", "router"}
    assert loop["additionalProperties"] is False
    out = ml("schema", "team", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    waits = printed["$defs"]["UserInputWait"]["properties"]["timeout"]
    assert {b["type"] for b in waits["anyOf"]} == {"number", "string"}


def test_the_readmes_loop_block_states_the_defaults() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    [block] = [
        b for b in re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL) if b.startswith("loop:")
    ]
    written = LoopConfig.model_validate(yaml.safe_load(block)["loop"])
    assert written == LoopConfig(router=RouterConfig(member="dev"))


def test_check_shell_patterns_are_words_with_their_defaults(tmp_path: Path) -> None:
    """`loop.check` (agent-loop §3: CHECK's shell runs test runners only): the runners'
    command patterns, the read-only filters their output may be piped into, and the
    arguments that turn a checker into a fixer."""
    write_config(tmp_path)
    check = load_config(tmp_path).team.loop.check
    assert {"pytest", "python -m pytest", "npm test", "go test", "cargo test"} <= set(
        check.test_runners
    )
    assert {"make test", "ruff check", "mypy"} <= set(check.test_runners)
    assert {"tail", "grep"} <= set(check.pipe_filters) and "--fix" in check.refused_args
    team = SAMPLE_TEAM + (
        "loop:\n"  # 13
        "  check:\n"
        "    test_runners:\n"
        "      - pytest\n"  # 16
        "      - 'pytest; rm -rf /'\n"  # 17
        "      - '  '\n"  # 18
        '      - "pytest -k \'x"\n'  # 19
        "    pipe_filter: [tail]\n"  # 20
    )
    write_config(tmp_path, team=team)
    assert problem_lines(tmp_path) == [
        f"{TEAM}:17: loop.check.test_runners.1: 'pytest; rm -rf /' is not a command's "
        "leading words: shell operators (; & | < > ( ) ` $( ) are not allowed in a pattern",
        f"{TEAM}:18: loop.check.test_runners.2: a pattern must name a command",
        f"{TEAM}:19: loop.check.test_runners.3: \"pytest -k 'x\" is not a command's leading "
        "words: No closing quotation",
        f"{TEAM}:20: loop.check.pipe_filter: unknown key (did you mean pipe_filters?)",
    ]
