"""A member's `approval_required` in team.yaml: strict, every problem at its file:line, an
unknown tool or toolset named with a suggestion; the approval-name guard holds for any
input (hypothesis). (`loop.waits` itself is `config.loop`'s, tested in test_config_loop.)"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import PydanticCustomError

from mindloop.config import load_config, tool_selection_problems
from mindloop.config.team import check_approval_name
from mindloop.toolsets import standard_registry
from tests.config.config_testutil import SAMPLE_TEAM, problem_lines, write_config

TEAM = ".minds/team.yaml"


def test_approval_names_load_and_default_to_none(tmp_path: Path) -> None:
    write_config(tmp_path)
    assert load_config(tmp_path).team.members["alice"].approval_required == []
    team = SAMPLE_TEAM.replace(
        "    name: Alice\n", "    name: Alice\n    approval_required: [shell, write_file]\n"
    )
    write_config(tmp_path, team=team)
    assert load_config(tmp_path).team.members["alice"].approval_required == [
        "shell",
        "write_file",
    ]
    reg = standard_registry()
    assert tool_selection_problems(tmp_path, reg.toolset_names, reg.tool_names) == []


def test_bad_approval_names_are_reported_at_their_line(tmp_path: Path) -> None:
    team = SAMPLE_TEAM.replace(
        "    name: Alice\n", "    name: Alice\n    approval_required: [shell, '!fs', '*']\n"
    )  # line 9
    team = team.replace("  bob:\n", "  bob:\n    approval_required: shell\n")  # line 12
    write_config(tmp_path, team=team)
    assert problem_lines(tmp_path) == [
        f"{TEAM}:9: members.alice.approval_required.1: must be the name of a tool or a "
        "toolset (no '*', no '!'), got \"!fs\"",
        f"{TEAM}:9: members.alice.approval_required.2: must be the name of a tool or a "
        "toolset (no '*', no '!'), got \"*\"",
        f'{TEAM}:12: members.bob.approval_required: must be a list, got "shell"',
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


def test_the_readme_example_loads(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme[readme.index("## Waits and approvals") :]
    members = re.findall(r"```yaml\n(.*?)```", section, re.S)[0]
    ops = members.replace("members:\n", "").replace("toolsets: [fs, shell]", "toolsets: ['*']")
    write_config(tmp_path, team=SAMPLE_TEAM + ops)
    config = load_config(tmp_path)
    assert config.team.members["ops"].approval_required == ["shell", "write_file"]


# ---------------------------------------------------------------------- properties


@given(st.text(max_size=20))
def test_an_approval_name_is_a_bare_name(name: str) -> None:
    bare = bool(name) and not any(c.isspace() for c in name) and name[0] not in "!*"
    try:
        assert check_approval_name(name) == name
    except PydanticCustomError:
        assert not bare
    else:
        assert bare
