"""Loop-owned toolsets: executable, offered by a policy, never selected by a member
(DESIGN.md §8.9): `'*'` leaves them out, naming one in team.yaml is an error that says
why, and the names team.yaml may use do not list them."""

from __future__ import annotations

import pytest

from mindloop.config.loop import LoopConfig
from mindloop.errors import MindloopError
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import standard_registry
from mindloop.toolsets.self_improve import SELF_IMPROVE_TOOLS, self_improve_tools


def _registry() -> ToolRegistry:
    reg = standard_registry()
    reg.add_toolset("self_improve", self_improve_tools(LoopConfig()), loop_owned=True)
    return reg


def test_a_star_selection_leaves_loop_tools_out() -> None:
    reg = _registry()
    names = {t.name for t in reg.select(["*"])}
    assert "read_file" in names and not names & set(SELF_IMPROVE_TOOLS)
    assert "self_improve" not in reg.toolset_names
    assert not set(reg.tool_names) & set(SELF_IMPROVE_TOOLS)
    assert reg.has_toolset("self_improve")


@pytest.mark.parametrize(
    ("toolsets", "tools", "named"),
    [
        (["self_improve"], [], "toolset 'self_improve'"),
        (["fs"], ["kb_request"], "tool 'kb_request'"),
    ],
)
def test_naming_a_loop_toolset_or_tool_is_refused(
    toolsets: list[str], tools: list[str], named: str
) -> None:
    with pytest.raises(MindloopError, match=f"{named} \\(owned by the work loop"):
        _registry().select(toolsets, tools)


def test_a_policy_gets_loop_tools_by_name() -> None:
    reg = _registry()
    assert [t.name for t in reg.loop_tools(SELF_IMPROVE_TOOLS)] == list(SELF_IMPROVE_TOOLS)
    with pytest.raises(MindloopError, match="'read_file' is not a loop-owned tool"):
        reg.loop_tools(["read_file"])
