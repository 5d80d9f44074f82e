"""ToolRegistry: selection with '*' and '!x', and execute turning every failure into text."""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from mindloop.errors import MindloopError
from mindloop.tools import (
    DEFAULT_OUTPUT_CAP,
    AccessDenied,
    Tool,
    ToolArgs,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    TransientToolError,
)
from mindloop.toolsets import standard_registry


class EchoArgs(ToolArgs):
    text: str = Field(description="What to echo.")
    times: int = Field(default=1, ge=1, description="How often.")


async def _echo(args: EchoArgs, ctx: ToolContext) -> ToolOutput:
    return ToolOutput(args.text * args.times)


async def _boom(args: EchoArgs, ctx: ToolContext) -> ToolOutput:
    raise RuntimeError(f"kaboom {args.text}")


async def _denied(args: EchoArgs, ctx: ToolContext) -> ToolOutput:
    raise AccessDenied("ACCESS_DENIED: `x`: nope. Use something else.")


def _tool(
    name: str, fn: Callable[[EchoArgs, ToolContext], Awaitable[ToolOutput]] = _echo
) -> Tool[Any]:
    return Tool(name, f"{name} tool", EchoArgs, fn)


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.add_toolset("alpha", [_tool("a1"), _tool("a2")])
    reg.add_toolset("beta", [_tool("b1"), _tool("boom", _boom), _tool("denied", _denied)])
    return reg


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext.for_test(tmp_path, member="m", dialog_id="d")


def _names(tools: list[Tool[Any]]) -> list[str]:
    return [t.name for t in tools]


@pytest.mark.parametrize(
    ("toolsets", "tools", "expected"),
    [
        (["*"], [], ["a1", "a2", "b1", "boom", "denied"]),
        (["*", "!beta"], [], ["a1", "a2"]),
        (["!beta", "*"], [], ["a1", "a2"]),
        (["*", "!a2", "!boom"], [], ["a1", "b1", "denied"]),
        (["alpha"], ["b1"], ["a1", "a2", "b1"]),
        (["alpha"], ["!a1"], ["a2"]),
        ([], ["boom"], ["boom"]),
        ([], [], []),
    ],
)
def test_select(
    registry: ToolRegistry, toolsets: list[str], tools: list[str], expected: list[str]
) -> None:
    assert _names(registry.select(toolsets, tools)) == expected


@pytest.mark.parametrize(
    ("toolsets", "tools", "named"),
    [(["gamma"], [], "gamma"), (["!nope"], [], "nope"), (["*"], ["zzz"], "zzz")],
)
def test_select_unknown_names_raise(
    registry: ToolRegistry, toolsets: list[str], tools: list[str], named: str
) -> None:
    with pytest.raises(MindloopError, match=named):
        registry.select(toolsets, tools)


def test_duplicate_tool_or_toolset_names_are_rejected(registry: ToolRegistry) -> None:
    with pytest.raises(MindloopError, match="a1"):
        registry.add_toolset("gamma", [_tool("a1")])
    with pytest.raises(MindloopError, match="alpha"):
        registry.add_toolset("alpha", [_tool("zz")])
    assert registry.get("zz") is None


def test_get_and_toolset_assignment(registry: ToolRegistry) -> None:
    tool = registry.get("b1")
    assert tool is not None and tool.toolset == "beta"
    assert registry.get("missing") is None


async def test_execute_ok(registry: ToolRegistry, ctx: ToolContext) -> None:
    out = await registry.execute("a1", '{"text": "ab", "times": 2}', ctx)
    assert out == ToolOutput("abab")


async def test_execute_unknown_tool_lists_available(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    out = await registry.execute("nope", "{}", ctx)
    assert out.is_error
    assert "unknown tool 'nope'" in out.text and "a1, a2, b1" in out.text


async def test_execute_refuses_tools_outside_the_members_selection(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    out = await registry.execute("boom", '{"text": "x"}', ctx, allowed={"a1"})
    assert out.is_error and "unknown tool 'boom'" in out.text and "available tools: a1" in out.text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"text": ', "invalid JSON arguments for a1: Expecting value at line 1 column 10"),
        ('{"text": "a",\n "times": }', "invalid JSON arguments for a1: Expecting value at line 2"),
        ("[1, 2]", "invalid arguments for a1: expected a JSON object, got list"),
    ],
)
async def test_execute_invalid_json(
    registry: ToolRegistry, ctx: ToolContext, raw: str, expected: str
) -> None:
    out = await registry.execute("a1", raw, ctx)
    assert out.is_error
    assert out.text.startswith(expected)


@pytest.mark.parametrize(
    ("raw", "lines"),
    [
        ("{}", ["- text: field required"]),
        ("", ["- text: field required"]),
        (
            '{"text": 5, "times": 0}',
            [
                "- text: input should be a valid string",
                "- times: input should be greater than or equal to 1",
            ],
        ),
        ('{"text": "a", "colour": "red"}', ["- colour: unknown argument"]),
    ],
)
async def test_execute_validation_errors_in_plain_words(
    registry: ToolRegistry, ctx: ToolContext, raw: str, lines: list[str]
) -> None:
    out = await registry.execute("a1", raw, ctx)
    assert out.is_error
    assert out.text.splitlines()[0] == "invalid arguments for a1:"
    for line in lines:
        assert line in out.text.splitlines()


async def test_execute_tool_exception_becomes_error_output(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    out = await registry.execute("boom", '{"text": "now"}', ctx)
    assert out == ToolOutput("boom failed: RuntimeError: kaboom now", is_error=True)


async def test_execute_access_denied_is_passed_through(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    out = await registry.execute("denied", '{"text": "x"}', ctx)
    assert out == ToolOutput("ACCESS_DENIED: `x`: nope. Use something else.", is_error=True)


async def test_execute_caps_output_with_a_note(registry: ToolRegistry, ctx: ToolContext) -> None:
    out = await registry.execute("a1", '{"text": "x", "times": 100}', replace(ctx, output_cap=10))
    assert out.text == "x" * 10 + "\n[output truncated: 10 of 100 characters shown]"


async def test_execute_default_cap(registry: ToolRegistry, ctx: ToolContext) -> None:
    n = DEFAULT_OUTPUT_CAP + 5
    out = await registry.execute("a1", f'{{"text": "y", "times": {n}}}', ctx)
    assert out.text.endswith(f"[output truncated: {DEFAULT_OUTPUT_CAP} of {n} characters shown]")
    exact = await registry.execute("a1", f'{{"text": "y", "times": {DEFAULT_OUTPUT_CAP}}}', ctx)
    assert exact.text == "y" * DEFAULT_OUTPUT_CAP


def test_standard_registry_is_fresh_and_has_clean_schemas() -> None:
    one, two = standard_registry(), standard_registry()
    assert one.toolset_names == ["fs", "shell", "control", "workspace"]
    assert _names(one.select(["fs"])) == [
        "read_file",
        "write_file",
        "list_dir",
        "search",
        "move",
        "delete",
    ]
    assert _names(one.select(["shell"])) == ["run_shell"]
    one.add_toolset("extra", [_tool("c1")])
    assert two.get("c1") is None
    for tool in one.select(["*"]):
        schema = tool.schema()
        assert schema["type"] == "object" and "title" not in schema
        assert schema["additionalProperties"] is False
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name} lacks a description"


async def test_a_file_system_error_names_rtws_relative_paths_only(tmp_path: Path) -> None:
    """Whatever spelling of the rtws an OS error carries (as given or symlink-free), the
    model sees the reason and rtws-relative names, never the host path."""
    real = tmp_path / "real"
    real.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(real)

    async def loop(args: EchoArgs, ctx: ToolContext) -> ToolOutput:
        raise OSError(errno.ELOOP, "Too many levels of symbolic links", str(ctx.rtws / "a/b"))

    async def moved(args: EchoArgs, ctx: ToolContext) -> ToolOutput:
        raise OSError(errno.ENOTDIR, "Not a directory", str(real / "x"), None, str(alias / "y"))

    async def bug(args: EchoArgs, ctx: ToolContext) -> ToolOutput:
        raise RuntimeError(f"cannot handle {ctx.rtws}/deep/file")

    reg = ToolRegistry()
    reg.add_toolset("t", [_tool("loop", loop), _tool("moved", moved), _tool("bug", bug)])
    ctx = ToolContext.for_test(alias)
    out = await reg.execute("loop", '{"text": "x"}', ctx)
    assert out == ToolOutput("loop failed: Too many levels of symbolic links: `a/b`", True)
    out = await reg.execute("moved", '{"text": "x"}', ctx)
    assert out == ToolOutput("moved failed: Not a directory: `x` -> `y`", True)
    out = await reg.execute("bug", '{"text": "x"}', ctx)
    assert out == ToolOutput("bug failed: RuntimeError: cannot handle deep/file", True)


async def test_results_are_storable_text(registry: ToolRegistry, ctx: ToolContext) -> None:
    """A lone surrogate (a file name that is not UTF-8, say) comes back escaped."""
    out = await registry.execute("a1", '{"text": "name\\udcff"}', ctx)
    assert out.text == "name\\udcff" and out.text.encode("utf-8")


class _Flaky:
    """A tool that fails transiently `fails` times, then answers."""

    def __init__(self, fails: int) -> None:
        self.fails = fails
        self.calls = 0

    async def __call__(self, args: EchoArgs, ctx: ToolContext) -> ToolOutput:
        self.calls += 1
        if self.calls <= self.fails:
            raise TransientToolError(f"HTTP 503 from the service (call {self.calls})")
        return ToolOutput(f"ok after {self.calls}")


async def test_a_transient_failure_is_retried_after_each_backoff_then_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """agent-loop §8.1 TRANSIENT: back off 1, 2, 4 s (`loop.retries.transient_backoff`),
    then TOOL_ERROR; the model sees only the outcome."""
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    monkeypatch.setattr("mindloop.tools.registry.asyncio.sleep", sleep)
    flaky = _Flaky(fails=2)
    reg = ToolRegistry()
    reg.add_toolset("net", [Tool("fetch", "fetch tool", EchoArgs, flaky)])
    ctx = ToolContext.for_test(tmp_path, transient_backoff=(1.0, 2.0, 4.0))
    out = await reg.execute("fetch", '{"text": "x"}', ctx)
    assert (out.text, out.is_error, flaky.calls, slept) == ("ok after 3", False, 3, [1.0, 2.0])

    slept.clear()
    always = _Flaky(fails=99)
    reg.add_toolset("down", [Tool("fetch2", "fetch tool", EchoArgs, always)])
    out = await reg.execute("fetch2", '{"text": "x"}', ctx)
    assert out.is_error and always.calls == 4 and slept == [1.0, 2.0, 4.0]
    assert "transient" in out.text and "4 attempts" in out.text and "call 4" in out.text

    once = _Flaky(fails=1)  # without a backoff (a context outside the engine): no retry
    reg.add_toolset("plain", [Tool("fetch3", "fetch tool", EchoArgs, once)])
    out = await reg.execute("fetch3", '{"text": "x"}', ToolContext.for_test(tmp_path))
    assert out.is_error and once.calls == 1
