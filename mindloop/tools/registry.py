"""Toolsets by name, member tool selection, and the one place tool calls are executed.

`execute` is the boundary between a model's raw function call and a tool: whatever goes
wrong there (unknown tool, malformed JSON, bad arguments, a refused path, a file-system
error, a crashing tool, an enormous output) becomes a `ToolOutput(is_error=True)` the model
can read and correct, so a bad call never breaks the dialog. Every result leaves here as
storable text (no lone surrogates) and every error names rtws-relative paths only
(`pathguard.os_error_text` is the one rendering of a file-system error).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Collection, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mindloop.errors import MindloopError
from mindloop.tools.base import Tool, ToolContext, ToolOutput, TransientToolError, printable
from mindloop.tools.pathguard import AccessDenied, os_error_text, scrub_rtws

_LOOP_OWNED = "owned by the work loop: its phases offer it, members do not select it"


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown arguments are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


def cap_text(text: str, cap: int) -> str:
    """Keep the head of `text` within `cap` characters, with a note when cut."""
    if len(text) <= cap:
        return text
    return f"{text[:cap]}\n[output truncated: {cap} of {len(text)} characters shown]"


def _describe_validation_error(tool: str, err: ValidationError) -> str:
    lines = [f"invalid arguments for {tool}:"]
    for problem in err.errors():
        loc = ".".join(str(part) for part in problem["loc"]) or "(arguments)"
        msg = problem["msg"]
        msg = msg[:1].lower() + msg[1:]
        if problem["type"] == "extra_forbidden":
            msg = "unknown argument"
        lines.append(f"- {loc}: {msg}")
    return "\n".join(lines)


class ToolRegistry:
    """Named toolsets of tools; tool names are unique across toolsets.

    A toolset added with `loop_owned=True` (the work loop's tools: `self_md_patch`,
    `kb_request`, …) can be executed like any other, but no member selects it: `select`
    never returns it (not even for `'*'`) and refuses its name, and `toolset_names` /
    `tool_names` (what team.yaml may name) leave it out. A turn policy offers it
    (DESIGN.md §8.9)."""

    def __init__(self) -> None:
        self._toolsets: dict[str, list[Tool[Any]]] = {}
        self._tools: dict[str, Tool[Any]] = {}
        self._loop_owned: set[str] = set()  # toolset names

    def add_toolset(self, name: str, tools: list[Tool[Any]], *, loop_owned: bool = False) -> None:
        if name in self._toolsets:
            raise MindloopError(f"toolset {name!r} is already registered")
        for tool in tools:
            if tool.name in self._tools:
                raise MindloopError(
                    f"tool {tool.name!r} of toolset {name!r} is already registered "
                    f"by toolset {self._tools[tool.name].toolset!r}"
                )
        for tool in tools:
            tool.toolset = name
            self._tools[tool.name] = tool
        self._toolsets[name] = list(tools)
        if loop_owned:
            self._loop_owned.add(name)

    def has_toolset(self, name: str) -> bool:
        return name in self._toolsets

    @property
    def toolset_names(self) -> list[str]:
        """The toolsets a member may select (loop-owned ones left out)."""
        return [n for n in self._toolsets if n not in self._loop_owned]

    @property
    def tool_names(self) -> list[str]:
        """The tools a member may select (loop-owned ones left out)."""
        return [n for n, t in self._tools.items() if t.toolset not in self._loop_owned]

    def loop_tools(self, names: Iterable[str]) -> list[Tool[Any]]:
        """The loop-owned tools named (a policy's offer); unknown names are errors."""
        found = []
        for name in names:
            tool = self._tools.get(name)
            if tool is None or tool.toolset not in self._loop_owned:
                raise MindloopError(f"{name!r} is not a loop-owned tool of this registry")
            found.append(tool)
        return found

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def select(self, toolsets: Iterable[str], tools: Iterable[str] = ()) -> list[Tool[Any]]:
        """Tools of a member: toolsets (`'*'` = all, `'!x'` excludes a toolset or tool) plus
        individual `tools` (`'!x'` there excludes a tool). Unknown names are errors."""
        included: dict[str, Tool[Any]] = {}
        excluded: set[str] = set()
        unknown: list[str] = []

        for entry in toolsets:
            name = entry.strip()
            if name == "*":
                for set_name, members in self._toolsets.items():
                    if set_name not in self._loop_owned:
                        included.update((t.name, t) for t in members)
            elif name.startswith("!"):
                target = name[1:].strip()
                if target in self._toolsets:
                    excluded.update(t.name for t in self._toolsets[target])
                elif target in self._tools:
                    excluded.add(target)
                else:
                    unknown.append(f"toolset or tool {target!r}")
            elif name in self._loop_owned:
                unknown.append(f"toolset {name!r} ({_LOOP_OWNED})")
            elif name in self._toolsets:
                included.update((t.name, t) for t in self._toolsets[name])
            else:
                unknown.append(f"toolset {name!r}")

        for entry in tools:
            name = entry.strip()
            target = name[1:].strip() if name.startswith("!") else name
            if target in self._tools and self._tools[target].toolset in self._loop_owned:
                unknown.append(f"tool {target!r} ({_LOOP_OWNED})")
            elif target not in self._tools:
                unknown.append(f"tool {target!r}")
            elif name.startswith("!"):
                excluded.add(target)
            else:
                included[target] = self._tools[target]

        if unknown:
            raise MindloopError(
                f"unknown {', '.join(unknown)}; toolsets: "
                f"{', '.join(self.toolset_names) or '(none)'}"
                f"; tools: {', '.join(self.tool_names) or '(none)'}"
            )
        order = {name: i for i, name in enumerate(self._tools)}
        chosen = [t for name, t in included.items() if name not in excluded]
        return sorted(chosen, key=lambda t: order[t.name])

    async def execute(
        self,
        tool_name: str,
        raw_arguments: str,
        ctx: ToolContext,
        *,
        allowed: Collection[str] | None = None,
    ) -> ToolOutput:
        """Run one function call; every failure comes back as an error output.

        `allowed` (the caller's selected tool names) refuses tools the member was not given.
        """
        cap = ctx.output_cap
        tool = self._tools.get(tool_name)
        if tool is None or (allowed is not None and tool_name not in allowed):
            names = sorted(allowed) if allowed is not None else sorted(self._tools)
            return ToolOutput(
                f"unknown tool {tool_name!r}; available tools: {', '.join(names) or '(none)'}",
                is_error=True,
            )

        parsed = _parse_arguments(tool_name, raw_arguments)
        if isinstance(parsed, ToolOutput):
            return parsed
        try:
            args = tool.args_model.model_validate(parsed)
        except ValidationError as err:
            return ToolOutput(_describe_validation_error(tool_name, err), is_error=True)

        try:
            result = await _run_retrying(tool, args, ctx)
        except TransientToolError as err:
            attempts = len(ctx.transient_backoff) + 1
            text = f"{tool_name} failed (transient, {attempts} attempts): {err}"
            return ToolOutput(cap_text(printable(scrub_rtws(text, ctx.rtws)), cap), is_error=True)
        except AccessDenied as err:
            return ToolOutput(cap_text(printable(str(err)), cap), is_error=True)
        except OSError as err:  # what the file system refused, named rtws-relative
            return ToolOutput(
                cap_text(f"{tool_name} failed: {os_error_text(err, ctx.rtws)}", cap),
                is_error=True,
            )
        except Exception as err:  # a tool bug must not end the dialog; the model sees it
            text = scrub_rtws(f"{tool_name} failed: {type(err).__name__}: {err}", ctx.rtws)
            return ToolOutput(cap_text(printable(text), cap), is_error=True)
        text = cap_text(printable(result.text), cap)
        # Most results are short printable text: returned as they are, not copied.
        return result if text is result.text else dataclasses.replace(result, text=text)


async def _run_retrying(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> ToolOutput:
    """Run the call; a transient failure is tried again after each wait of the context's
    backoff, and the last one raised."""
    for delay in ctx.transient_backoff:
        try:
            return await tool.run(args, ctx)
        except TransientToolError:
            await asyncio.sleep(delay)
    return await tool.run(args, ctx)


def _parse_arguments(tool_name: str, raw: str) -> dict[str, Any] | ToolOutput:
    if not raw or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        return ToolOutput(
            f"invalid JSON arguments for {tool_name}: {err.msg} at line {err.lineno} "
            f"column {err.colno}",
            is_error=True,
        )
    if not isinstance(value, dict):
        return ToolOutput(
            f"invalid arguments for {tool_name}: expected a JSON object, got "
            f"{type(value).__name__}",
            is_error=True,
        )
    return value
