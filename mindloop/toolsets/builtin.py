"""The built-in toolsets every registry starts from: `fs`, `shell`, `control` and `waits`."""

from __future__ import annotations

from mindloop.config.loop import WaitsConfig
from mindloop.i18n import Lang
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets.control import control_tools
from mindloop.toolsets.fs import fs_tools
from mindloop.toolsets.shell import shell_tools
from mindloop.toolsets.taskdoc import taskdoc_tools
from mindloop.toolsets.waits import wait_tools


def standard_registry(lang: Lang = "en", *, waits: WaitsConfig | None = None) -> ToolRegistry:
    """A fresh registry with the built-in toolsets: `fs`, `shell`, `control` (the
    Taskdoc tools and dialog control, whose texts follow the work language) and `waits`
    (`wait_for`, within `waits`' limits)."""
    registry = ToolRegistry()
    registry.add_toolset("fs", fs_tools())
    registry.add_toolset("shell", shell_tools())
    registry.add_toolset("control", taskdoc_tools(lang) + control_tools(lang))
    registry.add_toolset("waits", wait_tools(waits))
    return registry
