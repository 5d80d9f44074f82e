"""Python tools: the user's own functions, offered to members like the built-in tools.

    # myproject/tools.py
    from pathlib import Path
    from mindloop.toolsets.python import WritePath, tool

    @tool
    def word_count(path: Path, min_length: int = 1) -> int:
        '''Count the words of a text file.

        Args:
            path: The file, relative to the rtws.
            min_length: Only count words at least this long.
        '''
        return sum(len(w) >= min_length for w in path.read_text().split())

A module listed under `python_tools:` in team.yaml is imported and each function of it
decorated with `@tool` becomes a tool of the toolset named after the module
(`myproject.tools`), which members select like any toolset. Installed packages can offer
toolsets too, as entry points of the `mindloop.tools` group (`name = "pkg.module"`): the
toolset is named after the entry point.

The JSON schema comes from the signature: each parameter's type (anything pydantic
validates, `Annotated[..., Field(...)]` included) and default; the description from the
docstring's text before its sections, each parameter's from its `Args:` entry (or
`:param x:`). A parameter typed `ToolContext` receives the call's context and is not
offered. Paths go through the path guard with the calling member's ACLs: a parameter
typed `Path` (or `ReadPath`) is resolved for reading, `WritePath` for writing — the
function receives an absolute path inside the rtws, or the call fails with the guard's
ACCESS_DENIED before the function runs; `resolve_path(ctx, raw, mode)` does the same for
a path a tool finds on its own.

An exception the function raises becomes the tool's error result, with its message
(`mindloop.tools.TransientToolError`: after the engine's retries with backoff); a
returned `ToolOutput` is used as it is, a string as the text, anything else as JSON.
Plain functions run on a worker thread (a blocking call does not stall other dialogs),
`async def` ones on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_args, get_origin, overload

from pydantic import BaseModel, Field, create_model

from mindloop.errors import MindloopError
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.pathguard import Mode, resolve_agent_path
from mindloop.tools.registry import ToolArgs
from mindloop.toolsets.files import off_loop

__all__ = [
    "ENTRY_POINT_GROUP",
    "PathAccess",
    "PythonToolError",
    "ReadPath",
    "WritePath",
    "entry_point_toolsets",
    "module_tools",
    "resolve_path",
    "tool",
]

ENTRY_POINT_GROUP = "mindloop.tools"
TOOL_ATTRIBUTE = "__mindloop_tool__"

_PROVIDER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?)\s*:\s*$"
)
_ARG_SECTIONS = {"Args", "Arguments", "Parameters", "Params"}
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:\s]+\s+)?(\w+)\s*:\s*(.*)$")

F = TypeVar("F", bound=Callable[..., Any])


class PythonToolError(MindloopError):
    """A `@tool` function or a tools module that cannot be offered (said at import)."""


@dataclass(frozen=True)
class PathAccess:
    """Marks a `Path` parameter: the path guard resolves it for `mode` before the call."""

    mode: Mode


ReadPath = Annotated[Path, PathAccess("read")]
WritePath = Annotated[Path, PathAccess("write")]


def resolve_path(ctx: ToolContext, raw: str, mode: Mode = "read") -> Path:
    """`raw` (as an agent wrote it) as an absolute path inside the rtws that the calling
    member may use for `mode`; raises AccessDenied (the call's error result) otherwise."""
    return resolve_agent_path(ctx, raw, ctx.acl, mode)


# ---------------------------------------------------------------------------- the decorator


@dataclass(frozen=True)
class _Param:
    name: str
    kind: inspect._ParameterKind
    path_mode: Mode | None = None  # a guarded path parameter


@dataclass(frozen=True)
class PythonTool:
    """What `@tool` records on a function: everything needed to offer and call it."""

    name: str
    description: str
    args_model: type[BaseModel]
    fn: Callable[..., Any]
    params: tuple[_Param, ...]
    context_param: _Param | None
    timeout: float | None

    def as_tool(self) -> Tool[Any]:
        return Tool(self.name, self.description, self.args_model, self._run)

    async def _run(self, args: BaseModel, ctx: ToolContext) -> ToolOutput:
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for param in self.params:
            value = getattr(args, param.name)
            if param.path_mode is not None and value is not None:
                value = resolve_agent_path(ctx, value, ctx.acl, param.path_mode)
            _bind(param, value, positional, keywords)
        if self.context_param is not None:
            _bind(self.context_param, ctx, positional, keywords)
        try:
            if inspect.iscoroutinefunction(self.fn):
                result = await asyncio.wait_for(self.fn(*positional, **keywords), self.timeout)
            else:
                result = await off_loop(
                    lambda: self.fn(*positional, **keywords), deadline=self.timeout
                )
        except TimeoutError:
            return ToolOutput(
                f"Error: {self.name} did not finish within {self.timeout:g} s", is_error=True
            )
        return _output(result)


def _bind(param: _Param, value: Any, positional: list[Any], keywords: dict[str, Any]) -> None:
    if param.kind is inspect.Parameter.POSITIONAL_ONLY:
        positional.append(value)
    else:
        keywords[param.name] = value


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout: float | None = None
) -> Callable[[F], F]: ...


def tool(
    fn: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> F | Callable[[F], F]:
    """Make `fn` a tool of its module's toolset (see the module docstring). `name`
    defaults to the function's name, `description` to its docstring; `timeout` (seconds)
    bounds a call. The function itself is returned unchanged, still callable."""

    def decorate(func: F) -> F:
        setattr(func, TOOL_ATTRIBUTE, _describe(func, name, description, timeout))
        return func

    return decorate(fn) if fn is not None else decorate


def _describe(
    fn: Callable[..., Any], name: str | None, description: str | None, timeout: float | None
) -> PythonTool:
    where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
    tool_name: str = name or str(getattr(fn, "__name__", ""))
    if not _PROVIDER_NAME.match(tool_name):
        raise PythonToolError(
            f"@tool {where}: {tool_name!r} is not a tool name model providers accept "
            "(1-64 letters, digits, '_' or '-'); pass name=..."
        )
    if timeout is not None and timeout <= 0:
        raise PythonToolError(f"@tool {where}: timeout must be positive, got {timeout}")
    summary, param_docs = parse_docstring(inspect.getdoc(fn) or "")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as err:  # an annotation naming something undefined
        raise PythonToolError(f"@tool {where}: cannot read its annotations: {err}") from err
    fields: dict[str, Any] = {}
    params: list[_Param] = []
    context: _Param | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise PythonToolError(
                f"@tool {where}: *{param.name} is not supported; name every parameter"
            )
        if param.name not in hints:
            raise PythonToolError(
                f"@tool {where}: parameter {param.name!r} has no type annotation; a tool's "
                "parameters are typed (the schema offered to the model comes from the types)"
            )
        annotation = hints[param.name]
        if annotation is ToolContext:
            context = _Param(param.name, param.kind)
            continue
        mode = path_mode(annotation)
        if mode is not None:
            annotation = str | None if _admits_none(annotation) else str
        default = ... if param.default is inspect.Parameter.empty else param.default
        if mode is not None and isinstance(default, Path):
            default = str(default)
        fields[param.name] = (
            annotation,
            Field(default, description=param_docs.get(param.name)),
        )
        params.append(_Param(param.name, param.kind, mode))
    model = create_model(f"{tool_name}_args", __base__=ToolArgs, **fields)
    return PythonTool(
        name=tool_name,
        description=description or summary or f"The Python tool {where}.",
        args_model=model,
        fn=fn,
        params=tuple(params),
        context_param=context,
        timeout=timeout,
    )


def path_mode(annotation: Any) -> Mode | None:
    """The guard mode of a path parameter's annotation (`Path`, `ReadPath`, `WritePath`,
    optionally `| None`), or None for any other type."""
    if annotation is Path:
        return "read"
    if get_origin(annotation) is Annotated:
        base, *meta = get_args(annotation)
        for item in meta:
            if isinstance(item, PathAccess):
                return item.mode
        return path_mode(base)
    if get_origin(annotation) in (typing.Union, types.UnionType):
        modes = {path_mode(arg) for arg in get_args(annotation) if arg is not type(None)}
        if len(modes) == 1:
            return modes.pop()
    return None


def _admits_none(annotation: Any) -> bool:
    return get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in get_args(
        annotation
    )


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary of a docstring (its text before the first section) and the description
    of each parameter (Google `Args:` entries, or reST `:param name:` lines)."""
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent: int | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        rest = _REST_PARAM.match(stripped)
        if rest:
            section, current = "rest", rest.group(1)
            params[current] = rest.group(2).strip()
            continue
        header = _SECTION.match(stripped)
        if header and not line.startswith((" ", "\t")):
            section, current, indent = header.group(1), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in _ARG_SECTIONS and section != "rest":
            continue
        if not stripped:
            continue
        depth = len(line) - len(line.lstrip())
        entry = _GOOGLE_ARG.match(stripped)
        if section != "rest" and entry and (indent is None or depth <= indent):
            indent = depth
            current = entry.group(1).lstrip("*")
            params[current] = entry.group(3).strip()
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(summary).strip(), params


def _output(result: Any) -> ToolOutput:
    if isinstance(result, ToolOutput):
        return result
    if result is None:
        return ToolOutput("(the tool returned nothing)")
    if isinstance(result, str):
        return ToolOutput(result)
    if isinstance(result, BaseModel):
        return ToolOutput(result.model_dump_json(indent=2))
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        result = dataclasses.asdict(result)
    try:
        return ToolOutput(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return ToolOutput(str(result))


# ---------------------------------------------------------------------------- finding tools


def module_tools(module_name: str) -> list[Tool[Any]]:
    """The `@tool` functions defined in module `module_name` (imported now), as tools.

    Raises PythonToolError when the module does not import or defines no tool."""
    try:
        module = importlib.import_module(module_name)
    except PythonToolError:
        raise
    except Exception as err:
        raise PythonToolError(f"cannot import {module_name}: {type(err).__name__}: {err}") from err
    found = [
        spec
        for value in vars(module).values()
        if isinstance(spec := getattr(value, TOOL_ATTRIBUTE, None), PythonTool)
        and getattr(value, "__module__", None) == module.__name__
    ]
    if not found:
        raise PythonToolError(
            f"{module_name} defines no tools: decorate its functions with "
            "@tool (from mindloop.toolsets.python import tool)"
        )
    return [spec.as_tool() for spec in found]


def entry_point_toolsets() -> list[tuple[str, str, list[Tool[Any]] | PythonToolError]]:
    """(toolset name, module, tools or the error) for every entry point of the
    `mindloop.tools` group of the installed distributions."""
    from importlib.metadata import entry_points

    found: list[tuple[str, str, list[Tool[Any]] | PythonToolError]] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            tools: list[Tool[Any]] | PythonToolError = module_tools(ep.module)
        except PythonToolError as err:
            tools = err
        found.append((ep.name, ep.value, tools))
    return found
