"""The built-in toolsets (fs, shell, control) and the standard registry that names them.

Each module here is one toolset of concrete tools over the contract in `mindloop.tools`
(base, registry, path guard) and the typed services of its `ToolContext`; it may use the
store, the Taskdoc and the config, never the dialog engine. The engine imports the
registry builder and the services it hands to tools from here.
"""

from __future__ import annotations

from mindloop.i18n import Lang
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets.control import REMINDER_TOOLS, CourseSwitch, StoreReminders, control_tools
from mindloop.toolsets.fs import fs_tools
from mindloop.toolsets.shell import llm_secret_env_names, shell_tools
from mindloop.toolsets.taskdoc import ROOT_ONLY_TOOLS, StoreTaskdocAudit, taskdoc_tools

__all__ = [
    "REMINDER_TOOLS",
    "ROOT_ONLY_TOOLS",
    "CourseSwitch",
    "StoreReminders",
    "StoreTaskdocAudit",
    "control_tools",
    "fs_tools",
    "llm_secret_env_names",
    "shell_tools",
    "standard_registry",
    "taskdoc_tools",
]


def standard_registry(lang: Lang = "en") -> ToolRegistry:
    """A fresh registry with the built-in toolsets: `fs`, `shell` and `control` (the
    Taskdoc tools and dialog control, whose texts follow the work language)."""
    registry = ToolRegistry()
    registry.add_toolset("fs", fs_tools())
    registry.add_toolset("shell", shell_tools())
    registry.add_toolset("control", taskdoc_tools(lang) + control_tools(lang))
    return registry
