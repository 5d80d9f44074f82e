"""The built-in toolsets every registry starts from: `fs`, `shell`, `control`, `workspace`."""

from __future__ import annotations

from mindloop.i18n import Lang
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets.control import control_tools
from mindloop.toolsets.fs import fs_tools
from mindloop.toolsets.shell import shell_tools
from mindloop.toolsets.taskdoc import taskdoc_tools
from mindloop.toolsets.workspace import workspace_tools


def standard_registry(lang: Lang = "en") -> ToolRegistry:
    """A fresh registry with the built-in toolsets: `fs`, `shell` and `control` (the
    Taskdoc tools and dialog control, whose texts follow the work language), and
    `workspace` (the node tree, docs and rules; members name it to get it)."""
    registry = ToolRegistry()
    registry.add_toolset("fs", fs_tools())
    registry.add_toolset("shell", shell_tools())
    registry.add_toolset("control", taskdoc_tools(lang) + control_tools(lang))
    registry.add_toolset("workspace", workspace_tools(lang))  # opt-in: not a default toolset
    return registry
