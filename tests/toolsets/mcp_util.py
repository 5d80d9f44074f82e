"""Helpers for the MCP tests: real servers (installed by the test extra) in an rtws's
mcp.yaml, the SDK-built HTTP fixture server, and the server processes of this process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import yaml

from mindloop.config import load_config
from mindloop.rtws import init_rtws
from mindloop.toolsets.mcp_host import McpConnection, ServerSpec, ServerStatus, mcp_host

PY = sys.executable
HTTP_SERVER = Path(__file__).with_name("mcp_http_server.py")


def time_server(**extra: Any) -> dict[str, Any]:
    """`mcp-server-time` over stdio, on UTC (offline: it reads the tz database it ships)."""
    return {"command": PY, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"], **extra}


def git_server(**extra: Any) -> dict[str, Any]:
    """`mcp-server-git` over stdio, confined to the rtws (a git repository)."""
    return {"command": PY, "args": ["-m", "mcp_server_git", "--repository", "."], **extra}


def new_project(base: Path, servers: dict[str, Any], toolsets: list[str]) -> Path:
    """An rtws on the mock provider whose member `dev` has `toolsets`, with `servers` in
    mcp.yaml; a git repository with one commit (for mcp-server-git)."""
    rtws = base / "proj"
    init_rtws(rtws, provider="mock")
    team = {
        "member_defaults": {"provider": "mock", "model": "mock-model"},
        "default_responder": "dev",
        "members": {"dev": {"toolsets": toolsets}},
    }
    (rtws / ".minds" / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False))
    write_mcp(rtws, servers)
    git = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "."], cwd=rtws, check=True)
    subprocess.run([*git, "add", "README.md"], cwd=rtws, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first commit"], cwd=rtws, check=True)
    return rtws


def write_mcp(rtws: Path, servers: dict[str, Any]) -> None:
    text = yaml.safe_dump({"servers": servers}, sort_keys=False)
    (rtws / ".minds" / "mcp.yaml").write_text(text)


def config_of(rtws: Path) -> Any:
    return load_config(rtws)


def server_processes(module: str) -> list[psutil.Process]:
    """The live processes of this process's tree running `python -m <module>`."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if module in proc.cmdline() and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def wait_until(predicate: Any, timeout: float = 20.0) -> None:
    """Wait (bounded) for an observable state."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def connection_of(rtws: Path, server: str) -> McpConnection:
    """The process's connection to `server` of `rtws` (as the registry made it)."""
    spec = ServerSpec(rtws.resolve(), server, load_config(rtws).mcp.servers[server])
    return mcp_host().connection(spec)


def kill_server(rtws: Path, server: str, module: str) -> psutil.Process:
    """Kill the one process of `server` and wait until the host has seen it go."""
    (proc,) = server_processes(module)
    proc.kill()
    connection = connection_of(rtws, server)
    wait_until(lambda: connection.status is not ServerStatus.UP)
    return proc


def wait_reaped(proc: psutil.Process) -> None:
    """Wait until `proc` is gone for good: not even a zombie, so its parent (the MCP host)
    has seen it end and wound its session down."""
    wait_until(lambda: not psutil.pid_exists(proc.pid))


@contextmanager
def http_server(**env: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The fixture server on 127.0.0.1: (its /mcp URL, its process)."""
    proc = subprocess.Popen(
        [PY, str(HTTP_SERVER)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **env},
    )
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        assert port.isdigit(), f"fixture server did not start: {port!r}"
        url = f"http://127.0.0.1:{port}/mcp"
        yield url, proc
    finally:
        proc.kill()
        proc.wait(10)
