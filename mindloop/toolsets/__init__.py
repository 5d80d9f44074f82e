"""The toolsets: built-in (fs, shell, control), the user's Python tools, MCP servers; and
the registry builders that name them.

Each module here is one toolset of concrete tools over the contract in `mindloop.tools`
(base, registry, path guard) and the typed services of its `ToolContext`; it may use the
store, the Taskdoc and the config, never the dialog engine. The engine imports the
registry builder and the services it hands to tools from here: `standard_registry` (the
built-ins alone) and `config_registry` (everything an rtws's configuration describes:
built-ins, `python_tools`, entry points, MCP servers; see `configured`).
"""

from __future__ import annotations

from mindloop.toolsets.builtin import standard_registry
from mindloop.toolsets.configured import McpMode, RegistryBuild, build_registry, config_registry
from mindloop.toolsets.control import REMINDER_TOOLS, CourseSwitch, StoreReminders, control_tools
from mindloop.toolsets.fs import fs_tools
from mindloop.toolsets.shell import llm_secret_env_names, shell_tools
from mindloop.toolsets.taskdoc import ROOT_ONLY_TOOLS as _TASKDOC_ROOT_ONLY
from mindloop.toolsets.taskdoc import StoreTaskdocAudit, taskdoc_tools
from mindloop.toolsets.workspace import ROOT_ONLY_TOOLS as _WORKSPACE_ROOT_ONLY

# Tools only a root dialog is offered (a side dialog calling one gets the tool's own error).
ROOT_ONLY_TOOLS: frozenset[str] = _TASKDOC_ROOT_ONLY | _WORKSPACE_ROOT_ONLY

__all__ = [
    "REMINDER_TOOLS",
    "ROOT_ONLY_TOOLS",
    "CourseSwitch",
    "McpMode",
    "RegistryBuild",
    "StoreReminders",
    "StoreTaskdocAudit",
    "build_registry",
    "config_registry",
    "control_tools",
    "fs_tools",
    "llm_secret_env_names",
    "shell_tools",
    "standard_registry",
    "taskdoc_tools",
]
