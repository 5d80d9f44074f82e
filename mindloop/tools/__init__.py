"""Function tools: the contract (base), the path guard, the registry and built-in toolsets."""

from mindloop.tools.base import DEFAULT_OUTPUT_CAP, Acl, Tool, ToolContext, ToolOutput
from mindloop.tools.pathguard import AccessDenied, is_encapsulated, resolve_agent_path
from mindloop.tools.registry import ToolArgs, ToolRegistry, default_registry

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "AccessDenied",
    "Acl",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "default_registry",
    "is_encapsulated",
    "resolve_agent_path",
]
