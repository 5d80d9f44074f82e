"""Shared fixtures: a fresh rtws per test, built with the public scaffold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mindloop.rtws import init_rtws


def write_team(rtws: Path, members: dict[str, dict[str, Any]], **defaults: Any) -> None:
    team = {
        "member_defaults": {"provider": "mock", "model": "mock-model", **defaults},
        "default_responder": next(iter(members)),
        "members": members,
    }
    (rtws / ".minds" / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False), "utf-8")


def write_script(rtws: Path, responses: list[dict[str, Any]], model: str = "mock-model") -> None:
    path = rtws / ".minds" / "mock" / f"{model}.yaml"
    path.write_text(yaml.safe_dump({"responses": responses}, sort_keys=False, allow_unicode=True), "utf-8")


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    """A fresh rtws on the mock provider (members and script set by each test)."""
    root = tmp_path / "proj"
    init_rtws(root, provider="mock")
    return root
