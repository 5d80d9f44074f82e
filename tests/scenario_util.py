"""Helpers to script whole-team scenarios: write team.yaml and a mock script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def write_team(rtws: Path, members: dict[str, dict[str, Any]], **defaults: Any) -> None:
    team = {
        "member_defaults": {"provider": "mock", "model": "mock-model", **defaults},
        "default_responder": next(iter(members)),
        "members": members,
    }
    (rtws / ".minds" / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False), "utf-8")


def write_script(rtws: Path, responses: list[dict[str, Any]], model: str = "mock-model") -> None:
    path = rtws / ".minds" / "mock" / f"{model}.yaml"
    path.write_text(
        yaml.safe_dump({"responses": responses}, sort_keys=False, allow_unicode=True), "utf-8"
    )
