"""An rtws for the Router's tests: the scaffolded team (member `dev` on the mock) and a
mock script whose Router entries are given per test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mindloop.rtws import init_rtws
from mindloop.taskdoc import TaskPackage
from tests.scenario_util import write_script

ROUTE = "route_message"


def route(*, match: str | None = None, role: str | None = None, **arguments: Any) -> dict[str, Any]:
    """A mock entry answering the Router's call (`offers_tool`) with one decision."""
    entry: dict[str, Any] = {"offers_tool": ROUTE}
    if match is not None:
        entry["contains"] = match
    if role is not None:
        entry["role"] = role
    entry["tool_calls"] = [{"name": ROUTE, "arguments": arguments}]
    return entry


def project(tmp_path: Path, responses: list[dict[str, Any]], tasks: dict[str, str]) -> Path:
    """An rtws with the packages `tasks` (slug -> goal) and the mock script `responses`."""
    rtws = tmp_path / "p"
    init_rtws(rtws, provider="mock")
    for slug, goal in tasks.items():
        TaskPackage.create(rtws, slug, goal=goal)
    write_script(rtws, responses)
    return rtws
