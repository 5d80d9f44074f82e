"""`toolsets`/`tools` names in team.yaml are checked against the registry that will run
the team (the schema cannot know them): file:line errors with a did-you-mean."""

from __future__ import annotations

from pathlib import Path

from config_testutil import write_config

from mindloop.config import load_config, tool_selection_problems
from mindloop.toolsets import standard_registry

TEAM = """\
member_defaults:
  provider: mock
  model: mock-model
  toolsets: [fs, control, '!shel']
members:
  alice:
    toolsets: ['*', '!shell', '!read_file']
    tools: [run_shell, '!write_file']
  bob:
    tools: ['*', read_fil]
"""


def _problems(rtws: Path) -> list[str]:
    reg = standard_registry()
    return [str(p) for p in tool_selection_problems(rtws, reg.toolset_names, reg.tool_names)]


def test_unknown_names_are_reported_where_they_are_written(tmp_path: Path) -> None:
    write_config(tmp_path, team=TEAM)
    assert _problems(tmp_path) == [
        ".minds/team.yaml:4: member_defaults.toolsets.2: unknown toolset 'shel' (did you mean "
        "shell?); '*' selects all, '!name' excludes a toolset or one tool",
        ".minds/team.yaml:10: members.bob.tools.0: unknown tool '*' (tools: "
        + ", ".join(standard_registry().tool_names)
        + "); toolsets go under toolsets",
        ".minds/team.yaml:10: members.bob.tools.1: unknown tool 'read_fil' (did you mean "
        "read_file?); toolsets go under toolsets",
    ]
    # The schema itself accepts them: a program may run the team with its own registry.
    load_config(tmp_path)


def test_every_name_the_registry_knows_passes(tmp_path: Path) -> None:
    team = TEAM.replace("'!shel'", "'!shell'").replace(
        "tools: ['*', read_fil]", "tools: [read_file]"
    )
    write_config(tmp_path, team=team)
    assert _problems(tmp_path) == []


def test_a_custom_registry_decides(tmp_path: Path) -> None:
    write_config(tmp_path, team=TEAM.replace("[fs, control, '!shel']", "[bench]"))
    problems = tool_selection_problems(tmp_path, ["bench"], ["noop"])
    assert [p.path for p in problems] == [
        "members.alice.toolsets.1",
        "members.alice.toolsets.2",
        "members.alice.tools.0",
        "members.alice.tools.1",
        "members.bob.tools.0",
        "members.bob.tools.1",
    ]
