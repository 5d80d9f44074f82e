"""The standard tool registry: fs, shell and control (Taskdoc + dialog control)."""

from __future__ import annotations

from mindloop.i18n import Lang
from mindloop.tools.registry import ToolRegistry, default_registry


def standard_registry(lang: Lang = "en") -> ToolRegistry:
    from mindloop.dialogs.control_tools import control_tools
    from mindloop.taskdoc import taskdoc_tools

    reg = default_registry()
    reg.add_toolset("control", taskdoc_tools(lang) + control_tools(lang))
    return reg
