"""JSON Schemas of the configuration files, for editors (`mindloop schema`).

They are generated from the same pydantic models that validate the files, so an editor's
completion and red squiggles agree with `mindloop check`. What the models express in code
rather than in types is written into the schemas here: a provider's name is its key under
`providers` (writing `name:` is an error); `fbr-effort` is an integer in 0..100 (checked by
a plain validator, which has no schema of its own); and mcp.yaml's validators — a server
has `command` or `url` and not both, stdio keys only with `command` and HTTP keys only with
`url`, `tools` or `exclude`, and the shapes of server names, prefixes, URLs, tool names
and `${NAME}` references (from the same regular expressions the validators use).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from mindloop.config.llm import ENV_VAR_NAME, LlmConfig
from mindloop.config.loader import LLM_FILE, TEAM_FILE
from mindloop.config.mcp import _PREFIX, _SERVER_NAME, MCP_FILE, McpConfig
from mindloop.config.team import MAX_FBR_EFFORT, TeamSpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"

# The files with a schema: short name (as `mindloop schema NAME` takes it) -> file, model.
SCHEMA_FILES: dict[str, tuple[str, type[BaseModel]]] = {
    "team": (TEAM_FILE, TeamSpec),
    "llm": (LLM_FILE, LlmConfig),
    "mcp": (MCP_FILE, McpConfig),
}


def _defs(schema: dict[str, Any]) -> dict[str, Any]:
    defs: dict[str, Any] = schema.get("$defs", {})
    return defs


def _provider_name_is_the_key(schema: dict[str, Any]) -> None:
    entry = _defs(schema)["ProviderConfig"]
    entry["properties"].pop("name", None)
    entry["required"] = [r for r in entry.get("required", []) if r != "name"]


def _fbr_effort_is_an_integer(schema: dict[str, Any]) -> None:
    props = _defs(schema)["MemberSpec"]["properties"]
    props["fbr-effort"] = {
        "title": "FBR effort",
        "description": "Parallel FBR side dialogs a `!?@self` tellask starts (0 disables FBR).",
        "type": "integer",
        "minimum": 0,
        "maximum": MAX_FBR_EFFORT,
    }


# `${NAME}` references only, each naming a variable (mcp.py `_check_references`).
_NAME = ENV_VAR_NAME.pattern.removeprefix("^").removesuffix("$")
_ENV_TEXT = rf"^(?:[^$]|\$(?!\{{)|\$\{{{_NAME}\}})*$"
# Not blank, no surrounding whitespace (mcp.py `_check_tool_name`); `(?![\s\S])` is the
# true end of the text, alike in ECMA-262 (editors) and Python's `re`.
_TOOL_NAME = r"^\S(?:[\s\S]*\S)?(?![\s\S])"


def _branch(prop: dict[str, Any], kind: str) -> dict[str, Any]:
    """The `kind` branch of a property that may also be null (`str | None`, …)."""
    branch: dict[str, Any] = next(b for b in prop["anyOf"] if b.get("type") == kind)
    return branch


def _given(*keys: str) -> dict[str, Any]:
    """`keys` are written with a value (pydantic takes `key: null` for absent)."""
    return {"required": list(keys), "properties": {k: {"not": {"type": "null"}} for k in keys}}


def _none_of(keys: tuple[str, ...], why: str) -> dict[str, Any]:
    """None of `keys` may be written; `why` is in the error message (jsonschema quotes the
    schema a `not` matched, editors show its description)."""
    return {"not": {"description": why, "anyOf": [{"required": [k]} for k in keys]}}


def _mcp_servers(schema: dict[str, Any]) -> None:
    schema["properties"]["servers"]["propertyNames"] = {"pattern": _SERVER_NAME.pattern}
    server = _defs(schema)["McpServerConfig"]
    props = server["properties"]
    for key in ("args", "env", "headers"):
        node = props[key]
        (node.get("items") or node["additionalProperties"])["pattern"] = _ENV_TEXT
    _branch(props["url"], "string").update(pattern=_ENV_TEXT, allOf=[{"pattern": "^https?://"}])
    props["headers_env"]["additionalProperties"]["pattern"] = ENV_VAR_NAME.pattern
    _branch(props["tools"], "array")["items"]["pattern"] = _TOOL_NAME
    props["exclude"]["items"]["pattern"] = _TOOL_NAME
    props["prefix"]["pattern"] = _PREFIX.pattern
    server["allOf"] = [
        {
            "description": "a server needs command (started by mindloop, over stdio) or url "
            "(a streamable HTTP endpoint)",
            "anyOf": [_given("command"), _given("url")],
        },
        {
            "not": {
                "description": "a server has either command (stdio) or url (streamable "
                "HTTP), not both",
                **_given("command", "url"),
            }
        },
        {
            "if": _given("url"),
            "then": _none_of(
                ("args", "env", "cwd"), "args, env and cwd apply only to stdio servers (command)"
            ),
        },
        {
            "if": _given("command"),
            "then": _none_of(
                ("headers", "headers_env"),
                "headers and headers_env apply only to HTTP servers (url)",
            ),
        },
        {
            "not": {
                "description": "use tools (offer only these) or exclude (offer all but "
                "these), not both",
                "required": ["tools", "exclude"],
                "properties": {"tools": {"type": "array"}, "exclude": {"minItems": 1}},
            }
        },
    ]


_FIXES = {
    "team": [_fbr_effort_is_an_integer],
    "llm": [_provider_name_is_the_key],
    "mcp": [_mcp_servers],
}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one configuration file (`team`, `llm`, `mcp`); KeyError otherwise."""
    file, model = SCHEMA_FILES[name]
    schema = model.model_json_schema(mode="validation")
    for fix in _FIXES.get(name, []):
        fix(schema)
    # The file names the schema (the model's own title, e.g. `McpConfig`, would win if it
    # came after it).
    return {"$schema": DIALECT, **schema, "title": file}
