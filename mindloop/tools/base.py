"""What a function tool is, and what it may see when it runs.

A tool declares a pydantic model for its arguments (the JSON schema offered to the model
is derived from it) and an async `run`. It receives a `ToolContext` that names the rtws,
the calling member's ACLs and the dialog, and returns text. Failures the model should
see are returned as `ToolOutput(is_error=True)`, never raised.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

DEFAULT_OUTPUT_CAP = 48_000


@dataclass(frozen=True)
class Acl:
    """Directory ACLs of a member, as rtws-relative glob patterns (empty = no limit)."""

    read_dirs: tuple[str, ...] = ()
    write_dirs: tuple[str, ...] = ()
    no_read_dirs: tuple[str, ...] = ()
    no_write_dirs: tuple[str, ...] = ()


@dataclass
class ToolContext:
    """What a running tool may know: where it is and on whose behalf."""

    rtws: Path
    member: str
    dialog_id: str
    acl: Acl = field(default_factory=Acl)
    is_root: bool = True
    # Services the dialog layer injects (store, taskdoc, dialog controls); tools look up
    # what they need by name and fail clearly if absent.
    services: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolOutput:
    text: str
    is_error: bool = False


ToolFn = Callable[[BaseModel, ToolContext], Awaitable[ToolOutput]]


@dataclass
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    run: ToolFn
    toolset: str = ""

    def schema(self) -> dict[str, Any]:
        """JSON schema of the arguments, as providers expect it (shared: do not mutate)."""
        return _arguments_schema(self.args_model)


@functools.cache
def _arguments_schema(args_model: type[BaseModel]) -> dict[str, Any]:
    """Generating a schema costs about 2 ms; every dialog a runtime loads needs its tools'."""
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    return schema
