"""Python tools: a module the test writes into the rtws, listed under `python_tools:`,
found with the rtws on sys.path, its `@tool` functions offered as a toolset named after
the module; and a toolset from an installed entry point."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from mindloop.config import ConfigError, load_config
from mindloop.rtws import init_rtws
from mindloop.tools import Acl, ToolContext, ToolOutput
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import build_registry, config_registry
from mindloop.toolsets.python import PythonToolError, parse_docstring, tool

TOOLS = '''
import asyncio
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from mindloop.tools import ToolContext, ToolOutput
from mindloop.toolsets.python import ReadPath, WritePath, resolve_path, tool


@tool
def word_count(path: Path, min_length: int = 1) -> int:
    """Count the words of a text file.

    Words are runs of non-blank characters.

    Args:
        path: The file, relative to the rtws.
        min_length: Only count words at least this long;
            shorter ones are skipped.

    Returns:
        The number of words.
    """
    return sum(len(w) >= min_length for w in path.read_text().split())


@tool(name="lookup_user", description="Find a user by name.")
def find(name: str, limit: Annotated[int, Field(ge=1, le=10)] = 3) -> dict:
    """:param name: Who to look for."""
    if name == "bob":
        raise LookupError("no such user: bob")
    return {"name": name, "limit": limit}


class Note(BaseModel):
    title: str
    words: int


@tool
async def write_note(target: WritePath, title: str, ctx: ToolContext) -> Note:
    """Write a note for the calling member."""
    await asyncio.sleep(0)
    body = f"{title} by {ctx.member}"
    target.write_text(body)
    return Note(title=title, words=len(body.split()))


@tool
def peek(raw: str, ctx: ToolContext) -> ToolOutput:
    """Read a path found at run time, through the guard."""
    return ToolOutput(resolve_path(ctx, raw).read_text(), is_error=False)


@tool
def maybe(path: ReadPath | None = None) -> None:
    """Accept an optional path."""
    assert path is None or path.is_absolute()


def helper() -> int:  # not a tool
    return 1


CALLS = {"fetch": 0}


@tool
def fetch_status(url: str) -> str:
    """Ask a service that answers 503 at first."""
    from mindloop.tools import TransientToolError

    CALLS["fetch"] += 1
    if CALLS["fetch"] < 3:
        raise TransientToolError(f"HTTP 503 from {url}")
    return f"200 from {url} at call {CALLS['fetch']}"
'''


def new_rtws(tmp_path: Path, modules: dict[str, str], python_tools: list[str]) -> Path:
    rtws = tmp_path / "proj"
    init_rtws(rtws, provider="mock")
    for rel, text in modules.items():
        path = rtws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    team_file = rtws / ".minds" / "team.yaml"
    team = yaml.safe_load(team_file.read_text())
    team["python_tools"] = python_tools
    team_file.write_text(yaml.safe_dump(team, sort_keys=False))
    (rtws / "notes.txt").write_text("alpha be gamma delta\n")
    (rtws / "docs").mkdir()
    return rtws


def unique(prefix: str) -> str:
    """Module names are per process: every test gets its own."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def call(
    registry: ToolRegistry, rtws: Path, tool_name: str, acl: Acl | None = None, **args: Any
) -> ToolOutput:
    ctx = ToolContext.for_test(rtws, member="dev", acl=acl or Acl())
    return await registry.execute(tool_name, json.dumps(args), ctx)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, str, ToolRegistry]:
    package = unique("myproject")
    module = f"{package}.tools"
    rtws = new_rtws(
        tmp_path, {f"{package}/__init__.py": "", f"{package}/tools.py": TOOLS}, [module]
    )
    return rtws, module, config_registry(load_config(rtws))


def test_a_module_becomes_a_toolset_named_after_it(project: tuple[Path, str, ToolRegistry]) -> None:
    rtws, module, registry = project
    assert module in registry.toolset_names
    names = [t.name for t in registry.select([module])]
    assert names == ["word_count", "lookup_user", "write_note", "peek", "maybe", "fetch_status"]
    assert str(rtws.resolve()) in sys.path  # how the module was found


def test_the_schema_comes_from_the_signature_and_docstring(
    project: tuple[Path, str, ToolRegistry],
) -> None:
    _, _, registry = project
    count = registry.get("word_count")
    assert count is not None
    assert (
        count.description
        == "Count the words of a text file.\n\nWords are runs of non-blank characters."
    )
    assert count.schema() == {
        "additionalProperties": False,
        "properties": {
            "path": {
                "description": "The file, relative to the rtws.",
                "title": "Path",
                "type": "string",
            },
            "min_length": {
                "default": 1,
                "description": "Only count words at least this long; shorter ones are skipped.",
                "title": "Min Length",
                "type": "integer",
            },
        },
        "required": ["path"],
        "type": "object",
    }
    lookup = registry.get("lookup_user")
    assert lookup is not None and lookup.description == "Find a user by name."
    props = lookup.schema()["properties"]
    assert props["name"]["description"] == "Who to look for."
    assert props["limit"]["maximum"] == 10 and props["limit"]["minimum"] == 1
    note = registry.get("write_note")
    assert note is not None and "ctx" not in note.schema()["properties"]  # injected


async def test_calls_run_the_function_and_render_what_it_returns(
    project: tuple[Path, str, ToolRegistry],
) -> None:
    rtws, _, registry = project
    count = await call(registry, rtws, "word_count", path="notes.txt", min_length=4)
    assert count == ToolOutput("3")
    user = await call(registry, rtws, "lookup_user", name="ann")
    assert json.loads(user.text) == {"name": "ann", "limit": 3}
    note = await call(registry, rtws, "write_note", target="docs/n.md", title="Plan")
    assert not note.is_error and json.loads(note.text) == {"title": "Plan", "words": 3}
    assert (rtws / "docs" / "n.md").read_text() == "Plan by dev"
    assert await call(registry, rtws, "maybe") == ToolOutput("(the tool returned nothing)")
    assert not (await call(registry, rtws, "maybe", path="notes.txt")).is_error
    assert (await call(registry, rtws, "peek", raw="notes.txt")).text.startswith("alpha")


async def test_an_exception_becomes_the_tool_error_with_its_message(
    project: tuple[Path, str, ToolRegistry],
) -> None:
    rtws, _, registry = project
    out = await call(registry, rtws, "lookup_user", name="bob")
    assert out.is_error and out.text == "lookup_user failed: LookupError: no such user: bob"
    bad = await call(registry, rtws, "lookup_user", name="ann", limit=11)
    assert bad.is_error and bad.text.startswith("invalid arguments for lookup_user:\n- limit:")
    extra = await call(registry, rtws, "word_count", path="notes.txt", colour="red")
    assert extra.is_error and "- colour: unknown argument" in extra.text


async def test_paths_go_through_the_guard_with_the_members_acl(
    project: tuple[Path, str, ToolRegistry], tmp_path: Path
) -> None:
    rtws, _, registry = project
    (tmp_path / "outside.txt").write_text("secret")
    for raw in ("../outside.txt", str(tmp_path / "outside.txt"), ".minds/team.yaml"):
        out = await call(registry, rtws, "word_count", path=raw)
        assert out.is_error and out.text.startswith("ACCESS_DENIED"), (raw, out.text)
        found = await call(registry, rtws, "peek", raw=raw)
        assert found.is_error and found.text.startswith("ACCESS_DENIED")
    no_docs = Acl(no_write_dirs=("docs",))
    refused = await call(registry, rtws, "write_note", no_docs, target="docs/x.md", title="t")
    assert refused.is_error and refused.text.startswith("ACCESS_DENIED")
    assert not (rtws / "docs" / "x.md").exists()  # refused before the function ran
    allowed = await call(registry, rtws, "write_note", no_docs, target="x.md", title="t")
    assert not allowed.is_error
    # Reading is not writing: a write-only restriction leaves reads alone.
    assert not (
        await call(registry, rtws, "word_count", no_docs, path="docs/../notes.txt")
    ).is_error


def problems(rtws: Path) -> list[str]:
    with pytest.raises(ConfigError) as err:
        config_registry(load_config(rtws))
    return [str(p) for p in err.value.problems]


def test_modules_that_cannot_be_offered_are_located_errors(tmp_path: Path) -> None:
    empty, broken, untyped, clash = (unique(n) for n in ("empty", "broken", "untyped", "clash"))
    rtws = new_rtws(
        tmp_path,
        {
            f"{empty}.py": "def f(x: int) -> int:\n    return x\n",
            f"{broken}.py": "import no_such_module_anywhere\n",
            f"{untyped}.py": "from mindloop.toolsets.python import tool\n@tool\ndef f(x):\n    return x\n",
            f"{clash}.py": "from mindloop.toolsets.python import tool\n@tool\ndef read_file(p: str) -> str:\n    return p\n",
        },
        [empty, broken, untyped, clash, "not_there_at_all"],
    )
    team = (rtws / ".minds" / "team.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(team, 1) if text.startswith("python_tools:")) + 1
    assert problems(rtws) == [
        f".minds/team.yaml:{line}: python_tools.0: {empty} defines no tools: decorate its "
        "functions with @tool (from mindloop.toolsets.python import tool)",
        f".minds/team.yaml:{line + 1}: python_tools.1: cannot import {broken}: "
        "ModuleNotFoundError: No module named 'no_such_module_anywhere'",
        f".minds/team.yaml:{line + 2}: python_tools.2: @tool {untyped}.f: parameter 'x' has no "
        "type annotation; a tool's parameters are typed (the schema offered to the model "
        "comes from the types)",
        f".minds/team.yaml:{line + 3}: python_tools.3: its tool 'read_file' has the name of a "
        "tool of toolset 'fs'; rename one of them",
        f".minds/team.yaml:{line + 4}: python_tools.4: cannot import not_there_at_all: "
        "ModuleNotFoundError: No module named 'not_there_at_all'",
    ]


def test_an_installed_entry_point_offers_a_toolset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    module = unique("plugin_tools")
    (site / f"{module}.py").parent.mkdir(parents=True)
    (site / f"{module}.py").write_text(
        "from mindloop.toolsets.python import tool\n\n"
        "@tool\ndef shout(text: str) -> str:\n    '''Say it loudly.'''\n    return text.upper()\n"
    )
    dist = site / f"{module}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[mindloop.tools]\nloud = {module}\n")
    monkeypatch.syspath_prepend(str(site))
    rtws = new_rtws(tmp_path, {}, [])
    build = build_registry(load_config(rtws))
    assert build.problems == []
    assert [t.name for t in build.registry.select(["loud"])] == ["shout"]


def test_the_decorator_refuses_what_it_cannot_offer() -> None:
    with pytest.raises(PythonToolError, match=r"\*args is not supported"):

        @tool
        def spread(*args: int) -> None: ...

    with pytest.raises(PythonToolError, match="is not a tool name model providers accept"):

        @tool(name="has space")
        def named(x: int) -> None: ...

    @tool
    def plain(x: int) -> int:
        return x

    assert plain(2) == 2  # still the user's function


def test_docstring_sections() -> None:
    summary, params = parse_docstring(
        "Do it.\n\nMore.\n\nArgs:\n    a (int): First\n        and more.\n    **kw: Rest.\n"
        "Raises:\n    ValueError: bad\n"
    )
    assert summary == "Do it.\n\nMore."
    assert params == {"a": "First and more.", "kw": "Rest."}
    summary, params = parse_docstring("Sum.\n:param int x: The x.\n:param y: The y\n  continued.")
    assert summary == "Sum." and params == {"x": "The x.", "y": "The y continued."}


WORDS = st.from_regex(r"[A-Za-z][A-Za-z0-9,.]{0,8}( [A-Za-z0-9,.]{1,8}){0,4}", fullmatch=True)


@given(
    summary=WORDS,
    params=st.dictionaries(
        st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True), WORDS, max_size=4
    ),
    typed=st.booleans(),
)
def test_google_style_args_are_read_back(summary: str, params: dict[str, str], typed: bool) -> None:
    lines = [summary, "", "Args:"]
    for name, text in params.items():
        lines.append(f"    {name}{' (str)' if typed else ''}: {text}")
    lines += ["", "Returns:", "    something: not a parameter"]
    got_summary, got = parse_docstring("\n".join(lines))
    assert got_summary == summary
    assert got == params


async def test_a_transient_failure_is_retried_by_the_engine_with_the_configured_backoff(
    project: tuple[Path, str, ToolRegistry],
) -> None:
    """A Python tool raising `mindloop.tools.TransientToolError` is called again after each
    wait of `loop.retries.transient_backoff` (agent-loop §8.1): the model sees one result."""
    from mindloop.dialogs.runtime import DialogRuntime
    from mindloop.testing import Call, ScriptedModel, Turn

    rtws, module, _ = project
    team_file = rtws / ".minds" / "team.yaml"
    team = yaml.safe_load(team_file.read_text())
    team.setdefault("loop", {})["retries"] = {"transient_backoff": ["0s", "0s"]}
    for member in team["members"].values():
        member["toolsets"] = [module]
    team_file.write_text(yaml.safe_dump(team, sort_keys=False))
    model = ScriptedModel(
        [
            Turn(tool_calls=[Call(name="fetch_status", arguments={"url": "svc"})]),
            Turn(text="done"),
        ]
    )
    rt = DialogRuntime(rtws, providers={"mock": model})
    try:
        did = rt.create_root_dialog("tasks/example.tsk", member=next(iter(team["members"]))).id
        rt.post_user_message(did, "check the service")
        await rt.drive(did)
        (result,) = [m for m in rt.store.load_history(did) if m.kind == "tool_result"]
        assert result.data["content"] == "200 from svc at call 3"
        assert not result.data["is_error"]
    finally:
        await rt.aclose()
