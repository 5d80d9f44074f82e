"""Function tools: the contract (base), the path guard and the registry.

The concrete toolsets (fs, shell, control, Taskdoc) live in `mindloop.toolsets`; this
package imports nothing above the bottom layer, so every toolset and the engine can build
on it without an import circle.
"""

from mindloop.tools.base import (
    DEFAULT_OUTPUT_CAP,
    Acl,
    CourseControl,
    ReminderService,
    TaskdocAudit,
    TaskdocChangeOutcome,
    Tool,
    ToolContext,
    ToolOutput,
    TransientToolError,
    call_key,
)
from mindloop.tools.pathguard import AccessDenied, is_encapsulated, resolve_agent_path
from mindloop.tools.registry import ToolArgs, ToolRegistry

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "AccessDenied",
    "Acl",
    "CourseControl",
    "ReminderService",
    "TaskdocAudit",
    "TaskdocChangeOutcome",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "TransientToolError",
    "call_key",
    "is_encapsulated",
    "resolve_agent_path",
]
