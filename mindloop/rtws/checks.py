"""`mindloop check` beyond the YAML schema: tool names, Python tool modules, MCP servers
(started only with `--probe`), mock scripts, Taskdoc layouts.

Problems make `check` fail; warnings (an API key variable not set in this shell) are
printed but do not, since the key may well be set where the team actually runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mindloop.config import MCP_FILE, Config, ConfigError, load_config, tool_selection_problems
from mindloop.providers.mock_script import validate_script
from mindloop.providers.pool import DEFAULT_SCRIPT_DIR
from mindloop.providers.pricing import PriceTable
from mindloop.taskdoc.audit import audit_warnings
from mindloop.taskdoc.effective import layout_problems
from mindloop.workspace.api import workspace_problems

if TYPE_CHECKING:
    from mindloop.toolsets.configured import ServerReport


def _relative(rtws: Path, line: str) -> str:
    """Problems name files rtws-relative, as the config problems do."""
    prefix = str(rtws.resolve()) + os.sep
    return line.replace(prefix, "") if line.startswith(prefix) else line


def _mock_problems(rtws: Path, config: Config) -> list[str]:
    problems: list[str] = []
    for prov in config.llm.providers.values():
        if prov.kind != "mock":
            continue
        script_dir = prov.script_dir or DEFAULT_SCRIPT_DIR
        for key, model in prov.models.items():
            rel = f"{script_dir.rstrip('/')}/{model.name or key}.yaml"
            script = rtws.resolve() / rel
            if script.exists():
                problems += [_relative(rtws, p) for p in validate_script(script)]
                continue
            users = [
                m.id
                for m in config.team.members.values()
                if m.provider == prov.name and m.model == key
            ]
            if users:
                who = ", ".join(f"@{u}" for u in users)
                problems.append(
                    f"{rel}: missing: mock model {key!r} of provider {prov.name!r} (used by "
                    f"{who}) answers from this file; create it (format: docs/mock-provider.md)"
                )
    return problems


@dataclass
class RtwsCheck:
    """What `check` found beyond the YAML schema; `servers`: the MCP servers, with their
    tools when probed."""

    problems: list[str] = field(default_factory=list)
    servers: list[ServerReport] = field(default_factory=list)


def check_rtws(rtws: Path, *, probe: bool = False) -> list[str]:
    """Problems outside the team.yaml/llm.yaml/mcp.yaml schema, one line each, naming the
    file; `probe` starts every MCP server (otherwise none is started)."""
    return inspect_rtws(rtws, probe=probe).problems


def inspect_rtws(rtws: Path, *, probe: bool = False) -> RtwsCheck:
    """`check_rtws`, with the MCP servers' reports (their tools when `probe`)."""
    from mindloop.toolsets import McpMode, build_registry

    rtws = Path(rtws)
    found = RtwsCheck()
    try:
        config: Config | None = load_config(rtws)
    except ConfigError:
        config = None  # reported by check_config already
    if config is not None:
        build = build_registry(config, mcp=McpMode.ALL if probe else McpMode.NONE)
        found.servers = build.servers
        found.problems += [_relative(rtws, str(p)) for p in build.problems]
        names = tool_selection_problems(
            rtws,
            build.registry.toolset_names,
            build.registry.tool_names,
            open_tools=bool(build.open_toolsets),
        )
        found.problems += [str(p) for p in names]
        found.problems += _mock_problems(rtws, config)
    found.problems += layout_problems(rtws)
    found.problems += workspace_problems(rtws)
    return found


def rtws_warnings(rtws: Path) -> list[str]:
    """Things that will fail at run time in this shell but may be fine elsewhere, and
    Taskdoc sections whose file disagrees with their last audit record."""
    warnings = audit_warnings(rtws)
    try:
        config = load_config(Path(rtws))
    except ConfigError:
        return warnings
    for prov in config.llm.providers.values():
        users = [m.id for m in config.team.members.values() if m.provider == prov.name]
        if prov.api_key_env and users and not os.environ.get(prov.api_key_env):
            warnings.append(
                f".minds/llm.yaml: providers.{prov.name}.api_key_env: the environment variable "
                f"{prov.api_key_env} is not set here; "
                f"{', '.join('@' + u for u in users)} cannot generate until it is"
            )
    for name, server in config.mcp.servers.items():
        unset = [v for v in server.env_names() if v not in os.environ]
        if unset:
            warnings.append(
                f"{MCP_FILE}: servers.{name}: the environment variable(s) {', '.join(unset)} "
                "are not set here; the server cannot start until they are"
            )
    return warnings + unpriced_warnings(config)


def unpriced_warnings(config: Config) -> list[str]:
    """With a `max_cost` cap, the models members use that have no known price: their
    generations would count for nothing toward it."""
    caps = config.team.caps
    if caps.drive.max_cost is None and caps.task.max_cost is None:
        return []
    prices = PriceTable(config.llm)
    out = []
    used = sorted({(m.provider, m.model) for m in config.team.members.values()})
    for provider, model in used:
        cfg = config.llm.providers.get(provider)
        info = cfg.models.get(model) if cfg is not None else None
        wire = info.name if info is not None else model  # what generations are priced by
        if cfg is not None and prices.cost(provider, wire, 1, 1) is None:
            out.append(
                f".minds/llm.yaml: providers.{provider}.models.{model}: no known price, so its "
                "generations count for nothing toward caps max_cost; set its price: "
                "{input_per_mtok: …, output_per_mtok: …}"
            )
    return out
