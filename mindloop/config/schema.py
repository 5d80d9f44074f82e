"""JSON Schemas of the configuration files, for editors (`mindloop schema`).

They are generated from the same pydantic models that validate the files, so an editor's
completion and red squiggles agree with `mindloop check`. Two things the models express
in code rather than in types are written into the schemas here: a provider's name is its
key under `providers` (writing `name:` is an error), and `fbr-effort` is an integer in
0..100 (checked by a plain validator, which has no schema of its own).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from mindloop.config.llm import LlmConfig
from mindloop.config.loader import LLM_FILE, TEAM_FILE
from mindloop.config.team import MAX_FBR_EFFORT, TeamSpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"

# The files with a schema: short name (as `mindloop schema NAME` takes it) -> file, model.
SCHEMA_FILES: dict[str, tuple[str, type[BaseModel]]] = {
    "team": (TEAM_FILE, TeamSpec),
    "llm": (LLM_FILE, LlmConfig),
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


_FIXES = {"team": [_fbr_effort_is_an_integer], "llm": [_provider_name_is_the_key]}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one configuration file (`team`, `llm`); KeyError otherwise."""
    file, model = SCHEMA_FILES[name]
    schema = model.model_json_schema(mode="validation")
    for fix in _FIXES.get(name, []):
        fix(schema)
    return {
        "$schema": DIALECT,
        "title": file,
        **schema,
    }
