"""Shared fixtures for tool tests: a populated rtws, a context, and a tree snapshot."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mindloop.tools import Acl, ToolContext, ToolOutput
from mindloop.toolsets import standard_registry

GOAL_MARKER = "GOAL_MARKER_7f3a"
RISK_MARKER = "RISK_MARKER_91bc"
MINDS_MARKER = "MINDS_MARKER_2d4e"


def build_rtws(base: Path) -> Path:
    """An rtws with a Taskdoc package, encapsulated dirs, and symlinks into and out of them."""
    rtws = base / "rtws"
    outside = base / "outside"
    outside.mkdir(parents=True)
    (outside / "secret.txt").write_text("outside secret\n")
    files = {
        "README.md": "# Project\nhello world\n",
        "src/app.py": "def main():\n    return 'hello'\n",
        "tasks/login.tsk/goals.md": f"{GOAL_MARKER}\n",
        "tasks/login.tsk/constraints.md": "- MUST work\n",
        "tasks/login.tsk/progress.md": "started\n",
        "tasks/login.tsk/bearinmind/risks.md": f"{RISK_MARKER}\n",
        "tasks/login.tsk/ux/checklist.md": f"{GOAL_MARKER} ux\n",
        "X.TSK/goals.md": f"{GOAL_MARKER} upper\n",
        ".minds/team.yaml": f"{MINDS_MARKER}: 1\n",
        ".mindloop/state.txt": f"{MINDS_MARKER} runtime\n",
    }
    for rel, content in files.items():
        path = rtws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    links = rtws / "links"
    links.mkdir()
    (links / "pkg").symlink_to("../tasks/login.tsk")
    (links / "goals").symlink_to("../tasks/login.tsk/goals.md")
    (links / "minds").symlink_to("../.minds")
    (links / "out").symlink_to(outside)
    (links / "readme").symlink_to("../README.md")
    return rtws


def snapshot(*roots: Path) -> dict[str, str]:
    """Every entry under the roots with its kind and content hash or link target."""
    state: dict[str, str] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                key = str(path)
                if path.is_symlink():
                    state[key] = "link:" + os.readlink(path)
                elif path.is_dir():
                    state[key] = "dir"
                else:
                    state[key] = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return state


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    return build_rtws(tmp_path)


@pytest.fixture
def make_ctx(rtws: Path) -> Callable[..., ToolContext]:
    def make(acl: Acl | None = None, **fields: Any) -> ToolContext:
        return ToolContext.for_test(rtws, dialog_id="d1", acl=acl or Acl(), **fields)

    return make


Call = Callable[..., Awaitable[ToolOutput]]


@pytest.fixture
def call(make_ctx: Callable[..., ToolContext]) -> Call:
    """Run a tool through the registry the way the dialog engine does (JSON in, text out)."""
    registry = standard_registry()

    async def run(
        name: str, acl: Acl | None = None, ctx_fields: dict[str, Any] | None = None, **args: Any
    ) -> ToolOutput:
        """`ctx_fields` sets ToolContext fields (e.g. output_cap) for this call."""
        return await registry.execute(name, json.dumps(args), make_ctx(acl, **(ctx_fields or {})))

    return run


@pytest.fixture(scope="session")
def rtws_builder() -> Callable[[Path], Path]:
    return build_rtws


@pytest.fixture(scope="session")
def tree_snapshot() -> Callable[..., dict[str, str]]:
    return snapshot


@pytest.fixture(scope="session")
def markers() -> dict[str, str]:
    return {"goal": GOAL_MARKER, "risk": RISK_MARKER, "minds": MINDS_MARKER}
