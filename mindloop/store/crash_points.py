"""Crash points for the fault-injection tests: the process ends here as a SIGKILL would.

Tests set `MINDLOOP_TEST_CRASH_AT` in a child process's environment:

- `<point>:<n>` ends the process with `os._exit(86)` (no cleanup, no `finally`) the n-th
  time it reaches `<point>`: `commit.before` / `commit.after` (a store transaction that
  changed rows, just before / just after it commits: `Store.tx`), `tool.before` /
  `tool.after` (a tool call just before it runs / just after it returned, its result not
  committed yet: `ToolStep`), `generation.after` (a model call returned, its turn not
  committed yet: `Driver`);
- `count:<file>` ends nothing but appends `<point> <n> <where>` to `<file>` at every
  point reached: how a test enumerates the points of a scenario.

The Taskdoc's named points (`change_mind.after_commit`, …: `taskdoc/audit.py`) use the
same variable. It is read once, at import: unset (every real run), `CRASH` is None and a
crash point costs one comparison.
"""

from __future__ import annotations

import os
import sys

CRASH_ENV = "MINDLOOP_TEST_CRASH_AT"
CRASH_EXIT_CODE = 86
POINTS = ("commit.before", "commit.after", "tool.before", "tool.after", "generation.after")


class CrashPoints:
    def __init__(self, point: str | None, n: int, log: str | None) -> None:
        self.point = point
        self.n = n
        self.log = log
        self.counts: dict[str, int] = {}

    @classmethod
    def from_env(cls, raw: str | None) -> CrashPoints | None:
        """None when unset or naming a Taskdoc point (no `:`)."""
        if not raw or ":" not in raw:
            return None
        what, _, arg = raw.partition(":")
        if what == "count":
            return cls(None, 0, arg)
        if what not in POINTS or not arg.isdigit():
            raise ValueError(f"{CRASH_ENV}={raw!r}: expected count:<file> or <point>:<n>")
        return cls(what, int(arg), None)

    def reached(self, point: str, where: str = "") -> None:
        n = self.counts[point] = self.counts.get(point, 0) + 1
        if self.log is not None:
            with open(self.log, "a", encoding="utf-8") as fh:
                fh.write(f"{point} {n} {where or _caller()}\n")
        elif point == self.point and n == self.n:
            os._exit(CRASH_EXIT_CODE)


def _caller() -> str:
    """The engine function that committed (the first frame outside the store)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(("mindloop.store", "contextlib")):
            return f"{name.removeprefix('mindloop.')}.{frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


CRASH: CrashPoints | None = CrashPoints.from_env(os.environ.get(CRASH_ENV))
