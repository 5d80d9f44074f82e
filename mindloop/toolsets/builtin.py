"""The built-in toolsets every registry starts from: `fs`, `shell` and `control`."""

from __future__ import annotations

from mindloop.i18n import Lang
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets.control import control_tools
from mindloop.toolsets.fs import fs_tools
from mindloop.toolsets.shell import shell_tools
from mindloop.toolsets.taskdoc import taskdoc_tools


def standard_registry(lang: Lang = "en") -> ToolRegistry:
    """A fresh registry with the built-in toolsets: `fs`, `shell` and `control` (the
    Taskdoc tools and dialog control, whose texts follow the work language)."""
    registry = ToolRegistry()
    registry.add_toolset("fs", fs_tools())
    registry.add_toolset("shell", shell_tools())
    registry.add_toolset("control", taskdoc_tools(lang) + control_tools(lang))
    return registry
