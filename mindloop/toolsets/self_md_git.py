"""Committing a self.md change to git: exactly `self.md` and its history file, nothing
else (agent-loop §9.1 step 4, `loop.self_md.git_commit`).

`git commit --only -- <the two paths>` commits those paths' working-tree content and
nothing that was staged for other paths (which stays staged). The message is
`self-improve(<member>): <summary>` with trailers `Idempotency-Key`, `Task` and
`Evidence`; a change whose key already has a commit is not committed again (a replayed
call). Hooks are skipped (`--no-verify`: the runtime commits its own two files, a
project's pre-commit checks are for people's changes) and so is signing; when git has no
identity configured, the commit is authored by `mindloop <mindloop@localhost>`.

A failure (git missing, not a repository, a lock held) never undoes the change: the
caller reports it beside the applied result.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

GIT_TIMEOUT = 30.0
FALLBACK_IDENTITY = ("-c", "user.name=mindloop", "-c", "user.email=mindloop@localhost")


class GitFailed(Exception):
    """A git command failed; the message is git's own first line."""


def _git(rtws: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", "-C", str(rtws), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise GitFailed(f"git could not run: {err}") from None
    if check and done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()
        raise GitFailed(first[0] if first else f"git {args[0]} exited {done.returncode}")
    return done


def in_git_repo(rtws: Path) -> bool:
    """Whether the rtws is inside a git work tree."""
    try:
        done = _git(rtws, "rev-parse", "--is-inside-work-tree", check=False)
    except GitFailed:
        return False
    return done.returncode == 0 and done.stdout.strip() == "true"


def commit_with_key(rtws: Path, key: str) -> str | None:
    """The commit on HEAD's history whose `Idempotency-Key` trailer is `key`, if any."""
    done = _git(
        rtws, "log", "-F", f"--grep=Idempotency-Key: {key}", "--format=%H", "-n", "1", check=False
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def commits_by_key(rtws: Path) -> dict[str, str]:
    """Idempotency key -> commit, for every self-improve commit on HEAD's history."""
    done = _git(
        rtws,
        "log",
        "-F",
        "--grep=Idempotency-Key: ",
        "--format=%H%x00%(trailers:key=Idempotency-Key,valueonly,separator=%x01)",
        check=False,
    )
    found: dict[str, str] = {}
    if done.returncode != 0:
        return found
    for line in done.stdout.splitlines():
        commit, _, keys = line.partition("\x00")
        for key in keys.split("\x01"):
            if key.strip():
                found.setdefault(key.strip(), commit)
    return found


def commit_paths(
    rtws: Path, paths: Sequence[str], subject: str, trailers: Sequence[tuple[str, str]]
) -> str:
    """Commit exactly `paths` (rtws-relative) with `subject` and trailers; returns the
    new commit's hash. Raises `GitFailed`."""
    identity: tuple[str, ...] = ()
    if not _git(rtws, "config", "user.email", check=False).stdout.strip():
        identity = FALLBACK_IDENTITY
    _git(rtws, "add", "-f", "--", *paths)
    body = "\n".join(f"{k}: {v}" for k, v in trailers if v)
    message = f"{subject}\n\n{body}\n" if body else f"{subject}\n"
    _git(
        rtws,
        *identity,
        "-c",
        "commit.gpgsign=false",
        "commit",
        "--only",
        "--no-verify",
        "--quiet",
        "-m",
        message,
        "--",
        *paths,
    )
    return _git(rtws, "rev-parse", "HEAD").stdout.strip()
