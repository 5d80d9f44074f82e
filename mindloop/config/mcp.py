"""`.minds/mcp.yaml`: the MCP servers whose tools a team may use.

Each entry under `servers` becomes the toolset `mcp:<name>`, which members select in
team.yaml like any other toolset. A server is reached over stdio (`command`, `args`, `env`,
`cwd`: mindloop starts it) or over streamable HTTP (`url`, `headers`: it is already
running somewhere). The file is optional: without it there are no MCP toolsets.

Secrets never live in this file. `${NAME}` in `args`, `env` values, `url` and `headers`
values stands for the environment variable NAME, read when the server is started (a
variable that is not set then is an error naming it, not an empty string);
`headers_env` maps a header to the NAME of the variable holding its whole value.

Cross-key rules (stdio keys on an HTTP server, `tools` and `exclude` together) are field
validators reading the keys declared before them, so each error points at the line of
the key that is wrong, not at the whole server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mindloop.config.llm import ENV_VAR_NAME
from mindloop.config.problems import render_value
from mindloop.errors import MindloopError

MCP_FILE = ".minds/mcp.yaml"
# The toolset of server `git` is `mcp:git`.
TOOLSET_PREFIX = "mcp:"

DEFAULT_STARTUP_TIMEOUT = 30.0
DEFAULT_CALL_TIMEOUT = 120.0

MCP_CONFIG = ConfigDict(extra="forbid", strict=True)

_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_PREFIX = re.compile(r"^[A-Za-z0-9_-]*$")
_REFERENCE = re.compile(r"\$\{([^}]*)\}")

Transport = Literal["stdio", "http"]


class MissingEnvVar(MindloopError):
    """A `${NAME}` (or `headers_env`) names a variable that is not set."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the environment variable {name} is not set")
        self.name = name


def env_references(text: str) -> list[str]:
    """The variable names `text` refers to as `${NAME}`."""
    return _REFERENCE.findall(text)


def expand_env(text: str, environ: Mapping[str, str]) -> str:
    """`text` with every `${NAME}` replaced by the variable's value; MissingEnvVar when
    one is not set (an empty value is a value)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise MissingEnvVar(name)
        return environ[name]

    return _REFERENCE.sub(value, text)


def _check_references(text: str) -> str:
    for name in env_references(text):
        if not ENV_VAR_NAME.match(name):
            raise PydanticCustomError(
                "config",
                "${{{name}}} is not an environment variable reference: write ${{NAME}} with "
                "letters, digits and '_'",
                {"name": name},
            )
    rest = _REFERENCE.sub("", text)
    if "${" in rest:
        raise PydanticCustomError(
            "config", "unterminated ${: write ${NAME} to use the environment variable NAME"
        )
    return text


def _check_env_name(name: str) -> str:
    if not ENV_VAR_NAME.match(name):
        raise PydanticCustomError(
            "config",
            "must be the NAME of an environment variable (letters, digits, '_'), got {got}",
            {"got": render_value(name)},
        )
    return name


def _check_server_name(name: str) -> str:
    if not _SERVER_NAME.match(name):
        raise PydanticCustomError(
            "config",
            "a server name starts with a letter or digit and uses only letters, digits, '_', "
            "'-' and '.' (it is written as the toolset mcp:<name>), got {got}",
            {"got": render_value(name)},
        )
    return name


def _check_tool_name(name: str) -> str:
    if not name.strip() or name != name.strip():
        raise PydanticCustomError(
            "config",
            "must be a tool name as the server lists it, got {got}",
            {"got": render_value(name)},
        )
    return name


EnvText = Annotated[str, AfterValidator(_check_references)]
EnvName = Annotated[str, AfterValidator(_check_env_name)]
ServerName = Annotated[str, AfterValidator(_check_server_name)]
McpToolName = Annotated[str, AfterValidator(_check_tool_name)]


def _only_for(transport: Transport, key: str, info: ValidationInfo) -> None:
    """Refuse a transport-specific key on a server of the other transport."""
    other = "url" if transport == "stdio" else "command"
    if info.data.get(other) is not None:
        kind = "stdio servers (command)" if transport == "stdio" else "HTTP servers (url)"
        raise PydanticCustomError(
            "config",
            "{field} applies only to {kind}; this server has {other}",
            {"field": key, "kind": kind, "other": other},
        )


class McpServerConfig(BaseModel):
    """One entry of `servers`: how to reach the server, which of its tools to offer."""

    model_config = MCP_CONFIG

    # Declared first: the validators of the keys below read them (info.data).
    command: str | None = Field(default=None, min_length=1)
    url: EnvText | None = None
    args: list[EnvText] = Field(default_factory=list)
    env: dict[str, EnvText] = Field(default_factory=dict)
    cwd: str | None = Field(default=None, min_length=1)
    headers: dict[str, EnvText] = Field(default_factory=dict)
    headers_env: dict[str, EnvName] = Field(default_factory=dict)
    tools: list[McpToolName] | None = None
    exclude: list[McpToolName] = Field(default_factory=list)
    prefix: str = ""
    startup_timeout: float = Field(default=DEFAULT_STARTUP_TIMEOUT, gt=0)
    call_timeout: float = Field(default=DEFAULT_CALL_TIMEOUT, gt=0)

    @field_validator("url")
    @classmethod
    def _url(cls, url: str | None, info: ValidationInfo) -> str | None:
        if url is None:
            return None
        if info.data.get("command") is not None:
            raise PydanticCustomError(
                "config",
                "a server has either command (stdio) or url (streamable HTTP), not both",
            )
        if not re.match(r"^https?://", url):
            raise PydanticCustomError(
                "config",
                "must be an http:// or https:// URL of a streamable HTTP endpoint, got {got}",
                {"got": render_value(url)},
            )
        return url

    @field_validator("args", "env", "cwd")
    @classmethod
    def _stdio_only(cls, value: object, info: ValidationInfo) -> object:
        _only_for("stdio", str(info.field_name), info)
        return value

    @field_validator("headers", "headers_env")
    @classmethod
    def _http_only(cls, value: object, info: ValidationInfo) -> object:
        _only_for("http", str(info.field_name), info)
        return value

    @field_validator("exclude")
    @classmethod
    def _exclude(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if value and info.data.get("tools") is not None:
            raise PydanticCustomError(
                "config",
                "use tools (offer only these) or exclude (offer all but these), not both",
            )
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, prefix: str) -> str:
        if not _PREFIX.match(prefix):
            raise PydanticCustomError(
                "config",
                "a prefix uses only letters, digits, '_' and '-' (it starts every tool name "
                "of the server), got {got}",
                {"got": render_value(prefix)},
            )
        return prefix

    @model_validator(mode="after")
    def _reachable(self) -> McpServerConfig:
        if self.command is None and self.url is None:
            raise ValueError(
                "a server needs command (started by mindloop, over stdio) or url (a "
                "streamable HTTP endpoint)"
            )
        return self

    @property
    def transport(self) -> Transport:
        return "stdio" if self.command is not None else "http"

    def env_names(self) -> list[str]:
        """Every environment variable this server's configuration reads."""
        texts = [*self.args, *self.env.values(), *self.headers.values()]
        if self.url is not None:
            texts.append(self.url)
        names = [name for text in texts for name in env_references(text)]
        return list(dict.fromkeys([*names, *self.headers_env.values()]))


class McpConfig(BaseModel):
    """mcp.yaml as written (and as used: nothing to resolve)."""

    model_config = MCP_CONFIG

    servers: dict[ServerName, McpServerConfig] = Field(default_factory=dict)

    @staticmethod
    def toolset_name(server: str) -> str:
        return f"{TOOLSET_PREFIX}{server}"
