"""MCP toolsets: each server of `.minds/mcp.yaml` is the toolset `mcp:<server>`.

How the registry learns a server's tools: a tool list is known only once the server runs,
and the first request of a member offers its tools, so the server is started (within its
`startup_timeout`) when the registry of a runtime that needs it is built — the first time
in the process; later registries reuse the running server (see `mcp_host`). Only servers
that some member selects are started (by name or by `'*'`; all of them when team.yaml
names single tools that no other toolset has, since those may be any server's). A
selected server that cannot start is a `file:line` error naming its entry, and nothing
runs. `mindloop check` starts nothing: it knows the toolset names from mcp.yaml; `check
--probe` starts every server and lists its tools.

What is offered: the server's tools, filtered by `tools` (only these) or `exclude` (all
but these), each named `<prefix><tool>`, with the server's description and its input
JSON schema exactly as listed. A tool whose schema is not a valid JSON Schema object, or
whose name a model provider would refuse, is left out and reported (by `check --probe`,
and in the log). A call's arguments are checked against that schema here, so the model
gets the same "invalid arguments" errors as for any tool; the server's result (text
blocks, structured content, `isError`) becomes the tool result. Anything else that goes
wrong — the server stopped, did not answer in time, is down — is an error result naming
the server, never a hang (the host bounds every wait).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from mindloop.config.mcp import McpConfig, McpServerConfig
from mindloop.tools.base import Tool, ToolContext, ToolOutput

if TYPE_CHECKING:
    import mcp.types as mcp_types

    from mindloop.toolsets.mcp_host import McpConnection, ServerSpec

log = logging.getLogger("mindloop.mcp")

# What model providers accept as a function name (OpenAI's rule, the strictest).
_PROVIDER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpArgs(BaseModel):
    """The arguments of an MCP tool, kept as given: the server's JSON schema (not a
    pydantic model) describes them, and `McpTool` checks them against it."""

    model_config = ConfigDict(extra="allow")

    def arguments(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


@dataclass
class McpTool(Tool[McpArgs]):
    """A tool of an MCP server: offered with the server's own JSON schema."""

    input_schema: dict[str, Any] = field(default_factory=dict)
    server: str = ""
    remote_name: str = ""  # the name the server knows it by (without the prefix)

    def schema(self) -> dict[str, Any]:
        return self.input_schema


@dataclass
class ServerTools:
    """What one server offers, and what it lists that cannot be offered."""

    server: str
    tools: list[McpTool]
    skipped: list[str] = field(default_factory=list)  # one sentence per tool left out
    missing: list[tuple[int, str]] = field(default_factory=list)  # `tools:` entries not listed
    listed: list[str] = field(default_factory=list)  # every name the server lists

    @property
    def toolset(self) -> str:
        return McpConfig.toolset_name(self.server)


def server_specs(rtws: Path, config: McpConfig) -> dict[str, ServerSpec]:
    """The `ServerSpec` of every configured server (imports the SDK: call only when there
    are servers to start)."""
    from mindloop.toolsets.mcp_host import ServerSpec

    root = Path(rtws).resolve()
    return {name: ServerSpec(root, name, cfg) for name, cfg in config.servers.items()}


# ---------------------------------------------------------------------------- offering


def offered_tools(
    server: str, cfg: McpServerConfig, listing: list[mcp_types.Tool], connection: McpConnection
) -> ServerTools:
    """The tools of `listing` that `cfg` offers, as registry tools calling `connection`."""
    names = [t.name for t in listing]
    out = ServerTools(server=server, tools=[], listed=names)
    if cfg.tools is not None:
        out.missing = [(i, n) for i, n in enumerate(cfg.tools) if n not in names]
    for name in cfg.exclude:
        if name not in names:
            out.skipped.append(f"exclude names {name!r}, which the server does not list")
    for listed in listing:
        if cfg.tools is not None and listed.name not in cfg.tools:
            continue
        if listed.name in cfg.exclude:
            continue
        offered = cfg.prefix + listed.name
        if not _PROVIDER_NAME.match(offered):
            out.skipped.append(
                f"tool {listed.name!r} left out: {offered!r} is not a name model providers "
                "accept (1-64 letters, digits, '_' or '-'); set a prefix or exclude it"
            )
            continue
        problem = schema_problem(listed.input_schema)
        if problem is not None:
            out.skipped.append(f"tool {listed.name!r} left out: its input schema {problem}")
            continue
        out.tools.append(_tool(server, cfg, listed, offered, connection))
    for note in out.skipped:
        log.warning("MCP server %r: %s", server, note)
    return out


def schema_problem(schema: object) -> str | None:
    """Why `schema` cannot be offered as a tool's parameters, or None."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict):
        return "is not a JSON object"
    if schema.get("type") != "object":
        return f'must have "type": "object" at its root, got {schema.get("type")!r}'
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as err:
        return f"is not a valid JSON Schema: {err.message}"
    return None


def _tool(
    server: str,
    cfg: McpServerConfig,
    listed: mcp_types.Tool,
    offered: str,
    connection: McpConnection,
) -> McpTool:
    from jsonschema.validators import validator_for

    schema = listed.input_schema
    validator = validator_for(schema)(schema)
    remote = listed.name
    # Waiting longer than the server's own limits (plus a restart) never happens.
    deadline = cfg.startup_timeout + cfg.call_timeout + _host_margin()

    async def run(args: McpArgs, ctx: ToolContext) -> ToolOutput:
        from mindloop.toolsets.mcp_host import McpCallFailed, McpServerDown, mcp_host

        arguments = args.arguments()
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            lines = [f"invalid arguments for {offered}:"]
            for err in errors[:10]:
                where = ".".join(str(p) for p in err.absolute_path) or "(arguments)"
                lines.append(f"- {where}: {err.message}")
            return ToolOutput("\n".join(lines), is_error=True)
        try:
            result = await mcp_host().call(connection.call(remote, arguments), deadline)
        except (McpCallFailed, McpServerDown) as err:
            return ToolOutput(f"Error: {err}", is_error=True)
        except TimeoutError:
            return ToolOutput(
                f"Error: MCP server {server!r} did not answer within {deadline:g} s; the call "
                "was abandoned (it may still take effect)",
                is_error=True,
            )
        return render_result(result)

    description = listed.description or listed.title or f"Tool {remote} of MCP server {server}."
    return McpTool(
        name=offered,
        description=description,
        args_model=McpArgs,
        run=run,
        input_schema=schema,
        server=server,
        remote_name=remote,
    )


def _host_margin() -> float:
    from mindloop.toolsets.mcp_host import CALLER_GRACE, PING_TIMEOUT

    return PING_TIMEOUT + 2 * CALLER_GRACE


# ---------------------------------------------------------------------------- results


def render_result(result: mcp_types.CallToolResult) -> ToolOutput:
    """A call's result as the model sees it: the text of every content block (other media
    described, not inlined), then the structured content unless a text block already
    says exactly that, and the server's `isError`."""
    import mcp.types as mcp_types

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
            parts.append(
                f"[{kind} {block.mime_type}, {_decoded_size(block.data)} bytes: not shown]"
            )
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link {block.uri}: {block.name}]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            res = block.resource
            if isinstance(res, mcp_types.TextResourceContents):
                parts.append(f"[resource {res.uri}]\n{res.text}")
            else:
                size = _decoded_size(res.blob)
                parts.append(
                    f"[resource {res.uri}, {res.mime_type or 'binary'}, {size} bytes: not shown]"
                )
    structured = result.structured_content
    if structured is not None and not any(_same_json(p, structured) for p in parts):
        shown = json.dumps(structured, indent=2, ensure_ascii=False, default=str)
        parts.append(f"structured content:\n{shown}")
    text = "\n".join(parts) if parts else "(the tool returned nothing)"
    return ToolOutput(text, is_error=result.is_error)


def _decoded_size(b64: str) -> int:
    """The size of base64 data once decoded (without decoding it)."""
    data = b64.strip()
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def _same_json(text: str, value: object) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False
