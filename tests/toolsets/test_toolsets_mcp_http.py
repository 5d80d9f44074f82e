"""MCP toolsets over streamable HTTP, against a server built with the `mcp` SDK's own
`MCPServer` and served by uvicorn on 127.0.0.1 (`mcp_http_server.py`), behind a bearer
token and an API-key header like a hosted server."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mindloop.config import ConfigError
from mindloop.tools import ToolContext, ToolOutput
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import config_registry
from mindloop.toolsets.mcp_host import ServerStatus, shutdown_mcp
from tests.toolsets.mcp_util import (
    config_of,
    connection_of,
    http_server,
    new_project,
    wait_until,
    write_mcp,
)

TOKEN = "t0k3n-for-tests"
KEY = "k3y-for-tests"


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    shutdown_mcp()


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_BEARER", TOKEN)
    monkeypatch.setenv("FIXTURE_API_KEY", KEY)


def remote(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "url": url,
        "headers": {"Authorization": "Bearer ${FIXTURE_BEARER}"},
        "headers_env": {"X-Fixture-Key": "FIXTURE_API_KEY"},
        **extra,
    }


async def call(registry: ToolRegistry, rtws: Path, name: str, **args: Any) -> ToolOutput:
    return await registry.execute(name, json.dumps(args), ToolContext.for_test(rtws))


@pytest.mark.usefixtures("secrets")
async def test_an_http_server_behind_secret_headers_offers_and_runs_its_tools(
    tmp_path: Path,
) -> None:
    with http_server(FIXTURE_TOKEN=TOKEN, FIXTURE_KEY=KEY) as (url, _):
        rtws = new_project(tmp_path, {"calc": remote(url, prefix="calc_")}, ["mcp:calc"])
        registry = config_registry(config_of(rtws))
        names = [t.name for t in registry.select(["mcp:calc"])]
        assert names == ["calc_add", "calc_fail", "calc_sleep"]
        add = await call(registry, rtws, "calc_add", a=2, b=40)
        assert not add.is_error
        # The text block, then the structured content it does not spell out.
        assert add.text == '42\nstructured content:\n{\n  "result": 42\n}'
        failed = await call(registry, rtws, "calc_fail", message="no")
        assert failed.is_error and "fail" in failed.text


async def test_a_refused_header_is_a_located_error_naming_the_http_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIXTURE_BEARER", "wrong")
    monkeypatch.setenv("FIXTURE_API_KEY", KEY)
    with http_server(FIXTURE_TOKEN=TOKEN, FIXTURE_KEY=KEY) as (url, _):
        rtws = new_project(tmp_path, {"calc": remote(url)}, ["mcp:calc"])
        with pytest.raises(ConfigError) as err:
            config_registry(config_of(rtws))
    (problem,) = [str(p) for p in err.value.problems]
    assert problem.startswith(".minds/mcp.yaml:2: servers.calc: could not be started: ")
    assert f"HTTP 401 Unauthorized from {url}" in problem
    assert "wrong" not in problem  # a secret is never echoed


async def test_nobody_listening_fails_fast_with_the_reason(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that is free now, and closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rtws = new_project(tmp_path, {"calc": {"url": f"http://127.0.0.1:{port}/mcp"}}, ["mcp:calc"])
    started = time.monotonic()
    with pytest.raises(ConfigError) as err:
        config_registry(config_of(rtws))
    assert time.monotonic() - started < 10
    assert "servers.calc: could not be started: ConnectError" in str(err.value)


@pytest.mark.usefixtures("secrets")
async def test_a_slow_call_times_out_and_the_server_stays_in_use(tmp_path: Path) -> None:
    with http_server(FIXTURE_TOKEN=TOKEN, FIXTURE_KEY=KEY) as (url, _):
        rtws = new_project(tmp_path, {"calc": remote(url, call_timeout=1)}, ["mcp:calc"])
        registry = config_registry(config_of(rtws))
        started = time.monotonic()
        slow = await call(registry, rtws, "sleep", seconds=30)
        assert time.monotonic() - started < 6
        assert slow.is_error
        assert "MCP server 'calc' did not answer within 1 s; the call was abandoned" in slow.text
        assert connection_of(rtws, "calc").status is ServerStatus.UP  # it still answers pings
        fine = await call(registry, rtws, "add", a=1, b=1)
        assert not fine.is_error and fine.text.startswith("2")


@pytest.mark.usefixtures("secrets")
async def test_a_server_that_went_away_fails_visibly_and_is_then_down(tmp_path: Path) -> None:
    with http_server(FIXTURE_TOKEN=TOKEN, FIXTURE_KEY=KEY) as (url, proc):
        rtws = new_project(tmp_path, {"calc": remote(url)}, ["mcp:calc"])
        registry = config_registry(config_of(rtws))
        assert not (await call(registry, rtws, "add", a=1, b=2)).is_error
        proc.kill()
        proc.wait(10)
        started = time.monotonic()
        gone = await call(registry, rtws, "add", a=1, b=2)
        assert gone.is_error and "MCP server 'calc'" in gone.text
        # Whatever the first failure said, it is down now: restarting found nobody.
        wait_until(lambda: connection_of(rtws, "calc").status is not ServerStatus.UP)
        again = await call(registry, rtws, "add", a=1, b=2)
        assert again.is_error and "MCP server 'calc' is down" in again.text
        assert time.monotonic() - started < 15


async def test_changing_mcp_yaml_gets_a_new_connection(tmp_path: Path) -> None:
    with http_server() as (url, _):
        rtws = new_project(tmp_path, {"calc": {"url": url}}, ["mcp:calc"])
        before = config_registry(config_of(rtws))
        assert before.get("add") is not None
        write_mcp(rtws, {"calc": {"url": url, "prefix": "v2_"}})
        after = config_registry(config_of(rtws))
        assert after.get("v2_add") is not None and after.get("add") is None
        assert not (await call(after, rtws, "v2_add", a=3, b=4)).is_error
