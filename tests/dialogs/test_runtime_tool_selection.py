"""`DialogRuntime` checks team.yaml's toolset and tool names against the registry it will
use, before the store is opened: a Python API user gets the same file:line error as the
CLI, and a typo is never found mid-drive by the member it hits."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.config import ConfigError
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.tools.registry import ToolRegistry
from tests.scenario_util import write_team


def test_unknown_toolset_or_tool_is_a_file_line_error_before_anything_is_written(
    rtws: Path,
) -> None:
    write_team(
        rtws, {"dev": {"toolsets": ["fs"]}, "ux": {"toolsets": ["fss"], "tools": ["read_fil"]}}
    )
    lines = (rtws / ".minds" / "team.yaml").read_text("utf-8").splitlines()
    fss = next(i for i, line in enumerate(lines, 1) if "fss" in line)
    rd = next(i for i, line in enumerate(lines, 1) if "- read_fil" in line)
    with pytest.raises(ConfigError) as err:
        DialogRuntime(rtws)
    assert [str(p) for p in err.value.problems] == [
        f".minds/team.yaml:{fss}: members.ux.toolsets.0: unknown toolset 'fss' "
        "(did you mean fs?); '*' selects all, '!name' excludes a toolset or one tool",
        f".minds/team.yaml:{rd}: members.ux.tools.0: unknown tool 'read_fil' "
        "(did you mean read_file?); toolsets go under toolsets",
    ]
    assert not (rtws / ".mindloop").exists()  # the store was never opened


def test_the_registry_passed_in_decides_which_names_exist(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["bench"]}})
    with pytest.raises(ConfigError, match=r"members\.dev\.toolsets\.0: unknown toolset 'bench'"):
        DialogRuntime(rtws)  # the standard registry has no `bench`
    own = ToolRegistry()
    own.add_toolset("bench", [])  # a program's own registry
    DialogRuntime(rtws, tools=own).store.close()
