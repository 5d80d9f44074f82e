"""The registry an rtws's configuration describes: the built-in toolsets, the Python tool
modules of team.yaml and of installed entry points, and the MCP servers of mcp.yaml.

Every entry point (the CLI, the service, `DialogRuntime`, `mindloop check`) builds its
registry here, so they agree on which toolsets and tools exist. A part that cannot be
offered (a module that does not import, a server that does not start, a tool name taken
twice) is a `ConfigProblem` naming the line of team.yaml or mcp.yaml that asks for it.

Python tool modules are imported with the rtws appended to `sys.path`: a module
`myproject/tools.py` (or a package `myproject/`) at the rtws root is found as
`myproject.tools`, and installed modules are found as usual (they win over a file of the
same name in the rtws). A module is imported once per process.

MCP servers (see `toolsets.mcp`): `McpMode.SELECTED` starts the servers that some member
selects, which is what a runtime needs; `ALL` starts every server (`check --probe`);
`NONE` starts nothing and registers each server's toolset name without tools (`check`).
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from mindloop.config import (
    MCP_FILE,
    TEAM_FILE,
    Config,
    ConfigError,
    ConfigProblem,
    McpConfig,
    located_problem,
)
from mindloop.config.mcp import TOOLSET_PREFIX
from mindloop.i18n import Lang
from mindloop.tools.base import Tool
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets.builtin import standard_registry
from mindloop.toolsets.mcp import ServerTools
from mindloop.toolsets.phase_end import TOOLSET as LOOP_TOOLSET
from mindloop.toolsets.phase_end import phase_end_tools
from mindloop.toolsets.python import PythonToolError, entry_point_toolsets, module_tools
from mindloop.toolsets.self_improve import add_loop_toolsets
from mindloop.toolsets.waits import add_wait_toolset

# How long building a registry waits for the MCP servers it starts, beyond the longest
# `startup_timeout` among them (they start in parallel).
STARTUP_MARGIN = 10.0


class McpMode(StrEnum):
    SELECTED = "selected"
    ALL = "all"
    NONE = "none"


@dataclass
class ServerReport:
    """What `check --probe` shows of one MCP server."""

    server: str
    toolset: str
    tools: list[Tool[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # tools left out, and why
    started: bool = False


@dataclass
class RegistryBuild:
    registry: ToolRegistry
    problems: list[ConfigProblem] = field(default_factory=list)
    servers: list[ServerReport] = field(default_factory=list)
    # Toolset names whose tools are not known (MCP servers not started): tool names in
    # team.yaml cannot all be judged.
    open_toolsets: list[str] = field(default_factory=list)


def config_registry(config: Config, *, lang: Lang | None = None) -> ToolRegistry:
    """The registry a runtime of `config` uses; ConfigError when a part cannot be offered."""
    build = build_registry(config, lang=lang)
    if build.problems:
        raise ConfigError(build.problems)
    return build.registry


def build_registry(
    config: Config, *, lang: Lang | None = None, mcp: McpMode = McpMode.SELECTED
) -> RegistryBuild:
    registry = standard_registry(lang or config.team.work_language)
    summary = config.team.loop.memory.sections.last_step_summary
    registry.add_toolset(LOOP_TOOLSET, phase_end_tools(summary), loop_owned=True)
    add_loop_toolsets(registry, config)
    add_wait_toolset(registry, config.team.loop.waits)
    build = RegistryBuild(registry)
    _add_python_tools(config, build)
    _add_entry_points(build)
    _add_mcp(config, build, mcp)
    return build


def _add(build: RegistryBuild, name: str, tools: list[Tool[Any]]) -> str | None:
    """Register a toolset; the problem (a name taken) as a sentence, or None."""
    if build.registry.has_toolset(name):
        return f"the toolset name {name!r} is taken by another toolset"
    for tool in tools:
        other = build.registry.get(tool.name)
        if other is not None:
            return (
                f"its tool {tool.name!r} has the name of a tool of toolset {other.toolset!r}; "
                "rename one of them"
            )
    build.registry.add_toolset(name, tools)
    return None


def _add_python_tools(config: Config, build: RegistryBuild) -> None:
    if not config.team.python_tools:
        return
    root = str(Path(config.rtws).resolve())
    if root not in sys.path:
        sys.path.append(root)
    for i, module in enumerate(config.team.python_tools):
        try:
            taken = _add(build, module, module_tools(module))
        except PythonToolError as err:
            taken = str(err)
        if taken is not None:
            if not build.registry.has_toolset(module):
                build.registry.add_toolset(module, [])  # known, unusable: one problem
            build.problems.append(
                located_problem(config.rtws, TEAM_FILE, ("python_tools", i), taken)
            )


def _add_entry_points(build: RegistryBuild) -> None:
    for name, value, tools in entry_point_toolsets():
        where = f"entry point {name} = {value} (group mindloop.tools)"
        taken = str(tools) if isinstance(tools, PythonToolError) else _add(build, name, tools)
        if taken is not None:
            build.problems.append(ConfigProblem(file=where, message=taken))


# ---------------------------------------------------------------------------- MCP


def selected_servers(config: Config, known: set[str]) -> list[str]:
    """The servers some member's toolsets select; all of them when a member names a tool
    (or excludes a name) that no other toolset has, since it may be any server's.
    `known`: the toolset and tool names registered so far."""
    names = list(config.mcp.servers)
    wanted: set[str] = set()
    for member in config.team.members.values():
        for entry in member.toolsets:
            name = entry.strip()
            target = name.removeprefix("!").strip()
            if name == "*" or (
                name.startswith("!") and target not in known and not _is_mcp(target)
            ):
                return names
            if not name.startswith("!") and _is_mcp(target):
                wanted.add(target.removeprefix(TOOLSET_PREFIX))
        for entry in member.tools:
            if entry.strip().removeprefix("!").strip() not in known:
                return names
    return [n for n in names if n in wanted]


def _is_mcp(name: str) -> bool:
    return name.startswith(TOOLSET_PREFIX)


def _add_mcp(config: Config, build: RegistryBuild, mode: McpMode) -> None:
    servers = config.mcp.servers
    if not servers:
        return
    if mode is McpMode.NONE:
        start: list[str] = []
    elif mode is McpMode.ALL:
        start = list(servers)
    else:
        known = set(build.registry.toolset_names) | set(build.registry.tool_names)
        start = selected_servers(config, known)
    listed = _start_servers(config, start, build) if start else {}
    for name in servers:
        toolset = McpConfig.toolset_name(name)
        report = ServerReport(server=name, toolset=toolset)
        build.servers.append(report)
        offered = listed.get(name)
        if offered is None:
            # Not started (or failed to, which is a problem already): the name is known,
            # so team.yaml naming it is not a second, misleading "unknown toolset".
            if name not in start:
                build.open_toolsets.append(toolset)
            build.registry.add_toolset(toolset, [])
            continue
        report.started = True
        report.tools = list(offered.tools)
        report.notes = list(offered.skipped)
        for i, missing in offered.missing:
            build.problems.append(
                located_problem(
                    config.rtws,
                    MCP_FILE,
                    ("servers", name, "tools", i),
                    f"the server does not list a tool {missing!r} (it lists: "
                    f"{', '.join(offered.listed) or '(none)'})",
                )
            )
        taken = _add(build, toolset, list(offered.tools))
        if taken is not None:
            build.registry.add_toolset(toolset, [])  # known, unusable: one problem, not two
            build.problems.append(
                located_problem(
                    config.rtws,
                    MCP_FILE,
                    ("servers", name),
                    f"{taken} (a prefix: renames every tool of this server)",
                )
            )


def _start_servers(
    config: Config, names: list[str], build: RegistryBuild
) -> dict[str, ServerTools]:
    """Start `names` in parallel on the MCP host; their offered tools, problems for the
    ones that did not start."""
    try:
        from mindloop.toolsets.mcp import offered_tools, server_specs
        from mindloop.toolsets.mcp_host import McpServerDown, describe, mcp_host
    except ImportError as err:
        build.problems.append(
            ConfigProblem(
                file=MCP_FILE,
                message=f"MCP servers are configured but the MCP SDK cannot be imported "
                f"({err}); install it with: pip install 'mindloop[mcp]'",
            )
        )
        return {}
    specs = server_specs(config.rtws, config.mcp)
    host = mcp_host()
    connections = {name: host.connection(specs[name]) for name in names}

    async def list_all() -> list[Any]:
        return await asyncio.gather(
            *(c.listing() for c in connections.values()), return_exceptions=True
        )

    wait = max(config.mcp.servers[n].startup_timeout for n in names) + STARTUP_MARGIN
    try:
        results = host.run(list_all(), wait)
    except TimeoutError:
        results = [TimeoutError(f"it did not start within {wait:g} s")] * len(names)
    offered: dict[str, ServerTools] = {}
    for (name, connection), result in zip(connections.items(), results, strict=True):
        if isinstance(result, BaseException):
            text = str(result) if isinstance(result, McpServerDown) else describe(result)
            build.problems.append(
                located_problem(config.rtws, MCP_FILE, ("servers", name), _started_not(text))
            )
            continue
        offered[name] = offered_tools(name, config.mcp.servers[name], result, connection)
    return offered


def _started_not(text: str) -> str:
    """The host says "MCP server 'x' could not be started: why"; the problem already names
    the server's line, so keep the why."""
    _, sep, why = text.partition(" could not be started: ")
    return f"could not be started: {why}" if sep else text
