"""Helpers to script whole-team scenarios: write team.yaml and a mock script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from mindloop.store.location import DATABASE_URL_ENV


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


def as_user(user: int | None) -> list[str]:
    """The prefix that runs a command as uid = gid = `user` from root (`setpriv` starts the
    interpreter even where only root can reach it, then runs it with no privilege)."""
    if user is None:
        return []
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]


def state_env() -> dict[str, str]:
    """What a child process needs to find this test's state: the database URL when the
    suite runs on PostgreSQL (`MINDLOOP_TEST_DATABASE`), else nothing (the rtws's file)."""
    return {k: os.environ[k] for k in (DATABASE_URL_ENV,) if os.environ.get(k)}


def _cli_env(cwd: Path | None, env: dict[str, str] | None) -> dict[str, str]:
    """A user's environment for the CLI: no API keys, this test's state, `env` on top."""
    home = str(cwd or Path.cwd())
    return {"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": home, **state_env(), **(env or {})}


def ml(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, user: int | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the `mindloop` CLI in a child process, as a user would (no API keys in its env);
    as another user if `user` is given (see `as_user`)."""
    return subprocess.run(
        [*as_user(user), sys.executable, "-m", "mindloop.cli.app", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env=_cli_env(cwd, env),
    )


def ml_started(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`ml` started and left running (its stdout and stderr piped): for a test that
    watches its output and signals it."""
    return subprocess.Popen(
        [sys.executable, "-m", "mindloop.cli.app", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=_cli_env(cwd, env),
    )
