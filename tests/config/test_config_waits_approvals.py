"""`loop.waits` (durations with agent-loop's defaults) and a member's `approval_required`
in team.yaml: strict, every problem at its file:line; the duration parser and the
approval-name guard hold for any input (hypothesis)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import PydanticCustomError

from mindloop.config import load_config, tool_selection_problems
from mindloop.config.durations import UNITS, DurationError, format_duration, parse_duration
from mindloop.config.loop_waits import WaitsConfig
from mindloop.config.team import check_approval_name
from mindloop.toolsets import standard_registry
from tests.config.config_testutil import SAMPLE_TEAM, problem_lines, write_config

TEAM = ".minds/team.yaml"
HOUR = 3600.0


def test_the_defaults_are_agent_loops(tmp_path: Path) -> None:
    write_config(tmp_path)
    waits = load_config(tmp_path).team.loop.waits
    assert (waits.user_input_timeout, waits.user_input_remind_every) == (48 * HOUR, 48 * HOUR)
    assert waits.approval_remind_every == 72 * HOUR
    assert (waits.subagent_active_limit, waits.subagent_wall_limit) == (1800.0, 24 * HOUR)
    assert (waits.tool_timeout, waits.system_event_timeout) == (600.0, 24 * HOUR)
    assert (waits.timer_max_ahead, waits.stale_after) == (24 * HOUR, 24 * HOUR)
    assert load_config(tmp_path).team.members["alice"].approval_required == []


def test_durations_and_approval_names_load(tmp_path: Path) -> None:
    team = SAMPLE_TEAM.replace(
        "    name: Alice\n", "    name: Alice\n    approval_required: [shell, write_file]\n"
    )
    team += "loop:\n  waits:\n    user_input_timeout: 1h30m\n    tool_timeout: 90\n"
    write_config(tmp_path, team=team)
    config = load_config(tmp_path)
    assert config.team.loop.waits.user_input_timeout == 5400.0
    assert config.team.loop.waits.tool_timeout == 90.0
    assert config.team.members["alice"].approval_required == ["shell", "write_file"]
    reg = standard_registry()
    assert tool_selection_problems(tmp_path, reg.toolset_names, reg.tool_names) == []


def test_bad_values_are_reported_at_their_line(tmp_path: Path) -> None:
    team = SAMPLE_TEAM.replace(
        "    name: Alice\n", "    name: Alice\n    approval_required: [shell, '!fs', '*']\n"
    )  # line 9
    team += (
        "loop:\n"  # 14
        "  waits:\n"
        "    user_input_timeout: 1h1h\n"  # 16
        "    tool_timeout: -3\n"  # 17
        "    stale_after: soon\n"  # 18
        "    approval_timeout: 1h\n"  # 19
    )
    write_config(tmp_path, team=team)
    assert problem_lines(tmp_path) == [
        f"{TEAM}:9: members.alice.approval_required.1: must be the name of a tool or a "
        "toolset (no '*', no '!'), got \"!fs\"",
        f"{TEAM}:9: members.alice.approval_required.2: must be the name of a tool or a "
        "toolset (no '*', no '!'), got \"*\"",
        f"{TEAM}:16: loop.waits.user_input_timeout: '1h1h': write each unit once, largest "
        "first (d, h, m, s), e.g. 1h30m",
        f"{TEAM}:17: loop.waits.tool_timeout: must be longer than 0 seconds, got -3",
        f"{TEAM}:18: loop.waits.stale_after: expected a duration such as 48h, 30m, 1h30m, "
        "90s or 2d, or a number of seconds, got 'soon'",
        f"{TEAM}:19: loop.waits.approval_timeout: unknown key (did you mean tool_timeout?)",
    ]


def test_an_approval_name_that_is_no_tool_or_toolset_is_located(tmp_path: Path) -> None:
    team = SAMPLE_TEAM.replace(
        "    name: Alice\n", "    name: Alice\n    approval_required: [shel]\n"
    )
    write_config(tmp_path, team=team)
    reg = standard_registry()
    [problem] = tool_selection_problems(tmp_path, reg.toolset_names, reg.tool_names)
    assert str(problem) == (
        f"{TEAM}:9: members.alice.approval_required.0: unknown tool or toolset 'shel' "
        "(did you mean shell?)"
    )


def test_the_readme_examples_load(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme[readme.index("## Waits and approvals") :]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    members, loop = blocks[0], blocks[1]
    ops = members.replace("members:\n", "").replace("toolsets: [fs, shell]", "toolsets: ['*']")
    write_config(tmp_path, team=SAMPLE_TEAM + ops + loop)
    config = load_config(tmp_path)
    assert config.team.members["ops"].approval_required == ["shell", "write_file"]
    assert config.team.loop.waits == WaitsConfig()  # the example shows the defaults


# ---------------------------------------------------------------------- properties


@given(st.integers(min_value=0, max_value=10**8))
def test_a_formatted_duration_parses_back(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


@given(
    st.lists(
        st.tuples(st.sampled_from(list(UNITS)), st.integers(min_value=0, max_value=10**5)),
        min_size=1,
        max_size=4,
    )
)
def test_units_parse_in_decreasing_order_only(parts: list[tuple[str, int]]) -> None:
    text = "".join(f"{n}{u}" for u, n in parts)
    ranks = [list(UNITS).index(u) for u, _ in parts]
    if all(a < b for a, b in itertools.pairwise(ranks)):
        assert parse_duration(text) == sum(n * UNITS[u] for u, n in parts)
    else:
        with pytest.raises(DurationError, match="largest first"):
            parse_duration(text)


@given(st.text(max_size=12))
def test_any_text_is_a_duration_or_a_clear_refusal(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except DurationError as err:
        assert "duration" in str(err) or "largest first" in str(err)
    else:
        assert seconds >= 0 and text.strip()


@given(st.text(max_size=20))
def test_an_approval_name_is_a_bare_name(name: str) -> None:
    bare = bool(name) and not any(c.isspace() for c in name) and name[0] not in "!*"
    try:
        assert check_approval_name(name) == name
    except PydanticCustomError:
        assert not bare
    else:
        assert bare
