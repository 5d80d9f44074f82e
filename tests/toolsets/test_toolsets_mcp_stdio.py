"""MCP toolsets over stdio, end to end against real servers nobody here wrote:
`mcp-server-time` and `mcp-server-git` (installed by the test extra, started by the
registry like a user's configuration would), plus a few scripts that fail on purpose."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mindloop.config import ConfigError
from mindloop.tools import ToolContext, ToolOutput
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import McpMode, build_registry, config_registry
from mindloop.toolsets.mcp_host import ServerSpec, ServerStatus, mcp_host, shutdown_mcp
from tests.toolsets.mcp_util import (
    PY,
    config_of,
    connection_of,
    git_server,
    kill_server,
    new_project,
    server_processes,
    time_server,
    wait_reaped,
    write_mcp,
)


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    shutdown_mcp()


async def call(registry: ToolRegistry, rtws: Path, name: str, **args: Any) -> ToolOutput:
    ctx = ToolContext.for_test(rtws, dialog_id="d-mcp")
    return await registry.execute(name, json.dumps(args), ctx)


def problems_of(rtws: Path) -> list[str]:
    with pytest.raises(ConfigError) as err:
        config_registry(config_of(rtws))
    return [str(p) for p in err.value.problems]


def line_of(rtws: Path, text: str) -> int:
    lines = (rtws / ".minds" / "mcp.yaml").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


async def test_real_servers_become_toolsets_offering_their_schemas_as_listed(
    tmp_path: Path,
) -> None:
    rtws = new_project(
        tmp_path,
        {
            "time": time_server(exclude=["convert_time"]),
            "git": git_server(tools=["git_status", "git_log"], prefix="repo_"),
        },
        ["fs", "mcp:time", "mcp:git"],
    )
    config = config_of(rtws)
    registry = config_registry(config)
    assert {"mcp:time", "mcp:git"} <= set(registry.toolset_names)
    chosen = registry.select(["mcp:time", "mcp:git"])
    assert [t.name for t in chosen] == ["get_current_time", "repo_git_status", "repo_git_log"]
    assert [t.toolset for t in chosen] == ["mcp:time", "mcp:git", "mcp:git"]
    # The schema offered is the one the server lists, untouched.
    host = mcp_host()
    listed = {
        t.name: t.input_schema
        for name in ("time", "git")
        for t in host.connection(ServerSpec(rtws.resolve(), name, config.mcp.servers[name])).tools
    }
    assert chosen[0].schema() == listed["get_current_time"]
    assert chosen[1].schema() == listed["git_status"]
    assert chosen[0].schema()["required"] == ["timezone"]
    assert "Get current time" in chosen[0].description


async def test_calls_return_the_servers_text_structured_content_and_errors(
    tmp_path: Path,
) -> None:
    rtws = new_project(
        tmp_path, {"time": time_server(), "git": git_server()}, ["mcp:time", "mcp:git"]
    )
    registry = config_registry(config_of(rtws))

    paris = await call(registry, rtws, "get_current_time", timezone="Europe/Paris")
    assert not paris.is_error
    assert json.loads(paris.text)["timezone"] == "Europe/Paris"  # structured == text: once

    bad = await call(registry, rtws, "get_current_time", timezone="Nowhere/Atlantis")
    assert bad.is_error and "Nowhere/Atlantis" in bad.text  # the server's isError result

    log = await call(registry, rtws, "git_log", repo_path=".")
    assert not log.is_error and "first commit" in log.text

    # Arguments are checked against the server's schema before anything is sent.
    missing = await call(registry, rtws, "get_current_time")
    assert missing.is_error
    assert missing.text.splitlines() == [
        "invalid arguments for get_current_time:",
        "- (arguments): 'timezone' is a required property",
    ]
    wrong = await call(registry, rtws, "git_log", repo_path=".", max_count="ten")
    assert wrong.is_error and "- max_count: 'ten' is not of type 'integer'" in wrong.text


async def test_a_server_is_started_once_and_shared_by_every_registry_of_the_process(
    tmp_path: Path,
) -> None:
    rtws = new_project(tmp_path, {"time": time_server()}, ["mcp:time"])
    first = config_registry(config_of(rtws))
    second = config_registry(config_of(rtws))
    assert len(server_processes("mcp_server_time")) == 1
    for registry in (first, second):
        out = await call(registry, rtws, "get_current_time", timezone="UTC")
        assert not out.is_error
    assert len(server_processes("mcp_server_time")) == 1


async def test_only_the_servers_members_select_are_started(tmp_path: Path) -> None:
    rtws = new_project(tmp_path, {"time": time_server(), "git": git_server()}, ["mcp:time"])
    registry = config_registry(config_of(rtws))
    assert server_processes("mcp_server_time") and not server_processes("mcp_server_git")
    assert registry.select(["mcp:git"]) == []  # named, not started: nobody uses it
    # `check` without --probe starts nothing and still knows the toolset names.
    shutdown_mcp()
    build = build_registry(config_of(rtws), mcp=McpMode.NONE)
    assert {"mcp:time", "mcp:git"} <= set(build.registry.toolset_names)
    assert build.open_toolsets == ["mcp:time", "mcp:git"]
    assert not server_processes("mcp_server_time")


async def test_a_crashed_server_is_restarted_once_then_reported_down(tmp_path: Path) -> None:
    rtws = new_project(tmp_path, {"time": time_server()}, ["mcp:time"])
    registry = config_registry(config_of(rtws))
    first = kill_server(rtws, "time", "mcp_server_time")
    # A crash while idle: the next call goes to a restarted server.
    again = await call(registry, rtws, "get_current_time", timezone="UTC")
    assert not again.is_error, again.text
    assert connection_of(rtws, "time").status is ServerStatus.UP
    second = kill_server(rtws, "time", "mcp_server_time")
    assert second.pid != first.pid
    started = time.monotonic()
    down = await call(registry, rtws, "get_current_time", timezone="UTC")
    assert down.is_error
    assert "MCP server 'time' is down: it stopped again after 1 restart(s)" in down.text
    assert "until mindloop is restarted" in down.text
    still = await call(registry, rtws, "get_current_time", timezone="UTC")
    assert still.is_error and "is down" in still.text
    assert time.monotonic() - started < 5
    assert connection_of(rtws, "time").status is ServerStatus.DOWN
    assert not server_processes("mcp_server_time")


async def test_a_hung_server_times_out_then_is_replaced(tmp_path: Path) -> None:
    rtws = new_project(tmp_path, {"time": time_server(call_timeout=1.5)}, ["mcp:time"])
    registry = config_registry(config_of(rtws))
    (hung,) = server_processes("mcp_server_time")
    hung.suspend()
    started = time.monotonic()
    out = await call(registry, rtws, "get_current_time", timezone="UTC")
    elapsed = time.monotonic() - started
    assert out.is_error
    assert "did not answer within 1.5 s and no longer responds" in out.text
    assert elapsed < 1.5 + 5 + 3  # the call timeout, the ping, some slack
    after = await call(registry, rtws, "get_current_time", timezone="UTC")
    assert not after.is_error, after.text
    wait_reaped(hung)


def test_a_missing_command_is_a_located_error(tmp_path: Path) -> None:
    rtws = new_project(
        tmp_path, {"ghost": {"command": str(tmp_path / "no-such-server")}}, ["mcp:ghost"]
    )
    (problem,) = problems_of(rtws)
    line = line_of(rtws, "ghost:")
    assert problem.startswith(f".minds/mcp.yaml:{line}: servers.ghost: could not be started: ")
    assert "no-such-server" in problem and "not found" in problem


def test_a_server_that_dies_at_start_is_reported_with_its_stderr(tmp_path: Path) -> None:
    script = "import sys; sys.stderr.write('boom: no settings file\\n'); sys.exit(3)"
    rtws = new_project(tmp_path, {"dies": {"command": PY, "args": ["-c", script]}}, ["mcp:dies"])
    (problem,) = problems_of(rtws)
    assert "servers.dies: could not be started" in problem
    assert "boom: no settings file" in problem


def test_a_server_that_never_answers_fails_its_start_in_time(tmp_path: Path) -> None:
    script = "import time; time.sleep(600)  # mindloop-test-hang"
    rtws = new_project(
        tmp_path,
        {"mute": {"command": PY, "args": ["-c", script], "startup_timeout": 1.5}},
        ["mcp:mute"],
    )
    started = time.monotonic()
    (problem,) = problems_of(rtws)
    assert time.monotonic() - started < 10
    assert "servers.mute: could not be started: it did not answer within 1.5 s" in problem
    shutdown_mcp()
    assert not server_processes("time.sleep(600)  # mindloop-test-hang")


def test_an_unset_variable_is_named_when_the_server_starts(tmp_path: Path) -> None:
    server = time_server(env={"TOKEN": "${MINDLOOP_TEST_SURELY_UNSET}"})
    rtws = new_project(tmp_path, {"time": server}, ["mcp:time"])
    (problem,) = problems_of(rtws)
    assert "servers.time: could not be started: the environment variable " in problem
    assert "MINDLOOP_TEST_SURELY_UNSET is not set" in problem


# A stdio server that reports the environment and working directory it was started with.
ENV_REPORTER = """
import json, os
from mcp.server import MCPServer

server = MCPServer("env-reporter")


@server.tool()
def report() -> str:
    \"\"\"The server's working directory and environment.\"\"\"
    return json.dumps({"cwd": os.getcwd(), "env": dict(os.environ)})


server.run("stdio")
"""


async def test_a_stdio_server_gets_its_env_and_cwd_and_no_other_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Configured `env` (with `${NAME}` read from mindloop's environment) and `cwd` (from
    the rtws) reach the process; mindloop's own variables — a provider key, the variable a
    `${NAME}` named — do not: only the SDK's minimal set (PATH, HOME, …) is inherited."""
    script = tmp_path / "env_reporter.py"
    script.write_text(ENV_REPORTER)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-servers")
    monkeypatch.setenv("MINDLOOP_TEST_GREETING", "hello from the shell")
    server = {
        "command": PY,
        "args": [str(script)],
        "env": {"GREETING": "${MINDLOOP_TEST_GREETING}", "PLAIN": "as written"},
        "cwd": "sub/dir",
    }
    rtws = new_project(tmp_path, {"reporter": server}, ["mcp:reporter"])
    (rtws / "sub" / "dir").mkdir(parents=True)
    out = await call(config_registry(config_of(rtws)), rtws, "report")
    assert not out.is_error, out.text
    seen = json.loads(out.text.splitlines()[0])  # the text block (then its structured copy)
    assert Path(seen["cwd"]) == (rtws / "sub" / "dir").resolve()
    env = seen["env"]
    assert env["GREETING"] == "hello from the shell" and env["PLAIN"] == "as written"
    assert "OPENAI_API_KEY" not in env and "MINDLOOP_TEST_GREETING" not in env
    assert env["PATH"] == os.environ["PATH"]


def test_filters_and_names_are_checked_against_the_listing(tmp_path: Path) -> None:
    rtws = new_project(
        tmp_path,
        {
            "time": time_server(tools=["get_current_time", "get_weather"]),
            "clock": time_server(),
        },
        ["mcp:time", "mcp:clock"],
    )
    problems = problems_of(rtws)
    assert problems == [
        f".minds/mcp.yaml:{line_of(rtws, '- get_weather')}: servers.time.tools.1: the server "
        "does not list a tool 'get_weather' (it lists: get_current_time, convert_time)",
        f".minds/mcp.yaml:{line_of(rtws, 'clock:')}: servers.clock: its tool 'get_current_time' "
        "has the name of a tool of toolset 'mcp:time'; rename one of them (a prefix: renames "
        "every tool of this server)",
    ]
    # A prefix is the fix.
    write_mcp(
        rtws, {"time": time_server(tools=["get_current_time"]), "clock": time_server(prefix="c_")}
    )
    registry = config_registry(config_of(rtws))
    assert [t.name for t in registry.select(["mcp:clock"])] == [
        "c_get_current_time",
        "c_convert_time",
    ]
