"""The crash-point harness: a real `mindloop` process killed just before and just after
every commit, and around every tool call, then resumed (issue 10's fault-injection suite).

The scenario is `crash_scenario`'s tree (a root fans out to alice, who writes a file and
opens a session with carol, and to bob, who asks the human), with one change: once both
replies are in, the root records its progress in the Taskdoc (`change_mind`) before its
final answer. It runs as two commands: `mindloop chat "go"` (until the question for the
human) and `mindloop answer <question> SQLite` (to the end).

1. Counting: each command runs once with `MINDLOOP_TEST_CRASH_AT=count:<file>` and logs
   every point it reaches (`mindloop/store/crash_points.py`): the commits that changed
   rows (`commit.before`/`commit.after`, with the engine function that committed) and the
   tool calls (`tool.before`/`tool.after`). To these come the Taskdoc's named points
   inside `change_mind`'s file replacement (`taskdoc/audit.py`).
2. Killing: for each point, a fresh rtws; the command runs with
   `MINDLOOP_TEST_CRASH_AT=<point>:<n>` and ends there with `os._exit` (as a SIGKILL
   would: no cleanup, no `finally`). The store must be consistent at once, and every file
   a tool writes complete or absent.
3. Resuming as a user would (`chat` again if the message was never stored, `answer`
   again if the answer was not, then `mindloop run`), the end state must be exactly the
   uninterrupted one: every reply delivered once, one result per tool call, no duplicate
   generation, turn or question, nothing left running, the Taskdoc section equal to its
   last audit record (and no temp file left), the files complete.

CI kills at a sample of the points (every tool and Taskdoc point, and commit points
spread over both commands; 20-30 s on an idle machine). The full sweep: `MINDLOOP_CRASH_POINTS=all pytest
tests/dialogs/test_crash_points.py` (`=<k>` samples k points).
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mindloop.store import Store
from mindloop.store.crash_points import CRASH_ENV, CRASH_EXIT_CODE, POINTS
from mindloop.taskdoc import TaskPackage
from mindloop.taskdoc.audit import CRASH_POINTS, last_changes, temp_files
from tests.dialogs import crash_scenario as cs
from tests.dialogs import invariants as inv
from tests.scenario_util import write_script, write_team

SAMPLE = os.environ.get("MINDLOOP_CRASH_POINTS", "24")
EXEC_EVERY = 7  # every 7th trial execs fresh interpreters instead of forking
TIMEOUT = 60.0
PROGRESS = "Report written and reviewed; the database is SQLite.\n"
_CHANGE = [{"name": "change_mind", "arguments": {"selector": "progress", "content": PROGRESS}}]
_INTERRUPTED = "interrupted by a runtime restart"


def build_template(root: Path) -> Path:
    """`crash_scenario`'s rtws (no delays: the points are exact, not timed), the root
    recording its progress in the Taskdoc before its final answer."""
    cs.build_template(root, slow=False)
    write_team(root, cs.TEAM | {"lead": {"toolsets": ["fs", "control"]}})
    lead: list[dict[str, Any]] = [
        {"member": "lead", "role": "tool", "contains": _INTERRUPTED, "tool_calls": _CHANGE},
        {
            "member": "lead",
            "role": "tool",
            "contains": "Taskdoc section",
            "response": cs.FINAL_TEXT,
        },
        {
            "member": "lead",
            "contains": "provided response",
            "response": "Recording progress.",
            "tool_calls": _CHANGE,
        },
    ]
    rest = [
        {k: v for k, v in e.items() if k not in ("delay_ms", "chunk_delay_ms")}
        for e in cs.SCRIPT
        if not (e.get("member") == "lead" and e.get("contains") == "provided response")
    ]
    write_script(root, lead + rest)
    return root


@dataclass(frozen=True)
class Point:
    command: str  # "chat" or "answer"
    point: str  # one of crash_points.POINTS, or a Taskdoc point (audit.CRASH_POINTS)
    n: int  # its n-th occurrence in that command (0: a named point, reached once)
    where: str  # what commits there, or which tool runs

    def __str__(self) -> str:
        return f"{self.command}:{self.point}:{self.n} ({self.where})"

    @property
    def env(self) -> dict[str, str]:
        return {CRASH_ENV: f"{self.point}:{self.n}" if self.n else self.point}


# Inside `change_mind`'s file replacement (the root's `answer` phase runs it once); the
# Taskdoc's own tests kill there too, without the engine around.
TASKDOC_POINTS = [
    Point("answer", name, 0, "change_mind")
    for name in CRASH_POINTS
    if name.startswith("change_mind.")
]


class Runner:
    """Runs the scenario's commands on one rtws, through a launcher."""

    def __init__(self, rtws: Path, launcher: cs.ForkLauncher | cs.ExecLauncher) -> None:
        self.rtws = rtws
        self.launcher = launcher
        self.steps: list[str] = []
        self.n = 0

    def start(self, args: list[str], env: dict[str, str] | None = None) -> cs.Proc:
        self.n += 1
        log = self.rtws.parent / f"p{self.n}-{args[0]}.log"
        return self.launcher.start(["-C", str(self.rtws), *args], log, env)

    def run(self, *args: str, env: dict[str, str] | None = None, expect: int = 0) -> int:
        proc = self.start(list(args), env)
        code = proc.wait(TIMEOUT)
        self.steps.append(f"{args[0]}→{code}")
        # 4: the command ended waiting on the human (the scenario's question), as it should
        assert code in (expect, 0, 4), f"{self.steps}: `{' '.join(args)}` exited {code}\n" + _tail(
            proc.log
        )
        return code

    def chat(self, env: dict[str, str] | None = None, expect: int = 0) -> int:
        return self.run("chat", "-t", cs.TASK, "go", env=env, expect=expect)

    def question(self) -> str:
        return str(cs.Snapshot.read(self.rtws).questions[0].id)

    def answer(self, env: dict[str, str] | None = None, expect: int = 0) -> int:
        return self.run("answer", self.question(), cs.HUMAN_ANSWER, env=env, expect=expect)


def _tail(log: Path, lines: int = 30) -> str:
    text = log.read_text("utf-8", "replace").splitlines() if log.exists() else []
    return f"--- {log.name} ---\n" + "\n".join(text[-lines:])


def _count(runner: Runner, command: str, log: Path) -> list[Point]:
    env = {CRASH_ENV: f"count:{log}"}
    if command == "chat":
        runner.chat(env)
    else:
        runner.answer(env)
    points = []
    for line in log.read_text("utf-8").splitlines():
        point, n, where = line.split(" ", 2)
        points.append(Point(command, point, int(n), where))
    return points


def files_problems(rtws: Path, *, settled: bool) -> list[str]:
    """Every file a tool writes is complete or absent (present, once settled)."""
    problems = []
    for rel, content in cs.FILES.items():
        path = rtws / rel
        if path.exists() and path.read_text("utf-8") != content:
            problems.append(f"{rel} is incomplete: {path.read_text('utf-8')!r}")
        elif settled and not path.exists():
            problems.append(f"{rel} is missing")
    return problems


def taskdoc_problems(rtws: Path) -> list[str]:
    """The progress section equals its last audit record (which holds the scenario's
    text), and no temp file of an interrupted change is left in the package."""
    pkg = TaskPackage(rtws, cs.TASK)
    store = Store.for_rtws(rtws)
    try:
        last = last_changes(store, pkg.rel_path)
    finally:
        store.close()
    problems = []
    if (
        set(last) != {"progress.md"}
        or last["progress.md"].content_after.strip() != PROGRESS.strip()
    ):
        problems.append(f"audit records: { {k: c.content_after for k, c in last.items()} }")
    for rel, change in last.items():
        text = pkg.read_section_or_none(rel)
        if text != change.content_after:
            problems.append(f"{rel} is {text!r}, its last audit record {change.content_after!r}")
    problems += [f"temp file left: {p.name}" for p in temp_files(pkg)]
    return problems


def end_problems(rtws: Path) -> list[str]:
    state = inv.State.read(rtws)
    problems = cs.check_done(cs.Snapshot.read(rtws), rtws) + inv.settled_problems(state)
    problems += [f"a generation was cut off: {e['data']}" for e in state.cancelled]
    return problems + files_problems(rtws, settled=True) + taskdoc_problems(rtws)


def _kill_and_resume(runner: Runner, p: Point) -> bool:
    """Run the scenario dying at `p`, resume it, check everything. Whether it died."""
    rtws = runner.rtws
    if p.command == "chat":
        died = runner.chat(p.env, expect=CRASH_EXIT_CODE) == CRASH_EXIT_CODE
    else:
        died = runner.answer(p.env, expect=CRASH_EXIT_CODE) == CRASH_EXIT_CODE
    state = inv.State.read(rtws)
    problems = cs.check_always(cs.Snapshot.read(rtws)) + inv.consistent(state)
    problems += files_problems(rtws, settled=False)
    assert not problems, f"{p}: right after the crash:\n  " + "\n  ".join(problems)
    if p.command == "chat":
        snap = cs.Snapshot.read(rtws)
        root = snap.root()
        if root is None or not any(m.kind == "user" for m in snap.messages[root.id]):
            # Died before the message was stored: the user sends it again.
            args = ["-d", root.id] if root is not None else ["-t", cs.TASK]
            runner.run("chat", *args, "go")
        runner.run("run")
        problems = cs.check_waiting_for_human(cs.Snapshot.read(rtws))
        assert not problems, f"{p}: resumed up to the question:\n  " + "\n  ".join(problems)
        runner.answer()
    else:
        if any(q.status == "open" for q in cs.Snapshot.read(rtws).questions):
            runner.answer()  # died before the answer was recorded: answered again
        runner.run("run")
    problems = end_problems(rtws)
    assert not problems, f"{p}: at the end ({runner.steps}):\n  " + "\n  ".join(problems)
    return died


def sample(points: list[Point], k: int) -> list[Point]:
    """Every tool and Taskdoc point, and commit points spread evenly over both commands."""
    tools = [p for p in points if not p.point.startswith("commit.")]
    commits = [p for p in points if p.point.startswith("commit.")]
    room = max(k - len(tools), 0)
    if room >= len(commits):
        return tools + commits
    step = len(commits) / room if room else 0
    return tools + [commits[int(i * step)] for i in range(room)]


@pytest.mark.sqlite_only  # a fresh rtws per crash point: its state must live in it
def test_a_kill_at_every_commit_and_tool_boundary_resumes_to_the_same_end(
    tmp_path: Path,
) -> None:
    template = build_template(tmp_path / "template" / "rtws")
    fork = cs.ForkLauncher()
    exe = cs.ExecLauncher()
    t0 = time.monotonic()
    try:
        # The uninterrupted run, counting its points; its middle state is the start of
        # every trial that kills `answer`.
        base = tmp_path / "base" / "rtws"
        shutil.copytree(template, base)
        runner = Runner(base, fork)
        points = _count(runner, "chat", tmp_path / "chat.points")
        problems = cs.check_waiting_for_human(cs.Snapshot.read(base))
        assert not problems, "the uninterrupted chat:\n  " + "\n  ".join(problems)
        after_chat = tmp_path / "after_chat" / "rtws"
        shutil.copytree(base, after_chat)
        points += _count(runner, "answer", tmp_path / "answer.points")
        problems = end_problems(base)
        assert not problems, "the uninterrupted scenario:\n  " + "\n  ".join(problems)
        assert Counter(p.point for p in points).keys() == set(POINTS), points
        points += TASKDOC_POINTS

        chosen = points if SAMPLE == "all" else sample(points, int(SAMPLE))
        died = 0
        for i, p in enumerate(chosen):
            rtws = tmp_path / f"t{i}" / "rtws"
            shutil.copytree(template if p.command == "chat" else after_chat, rtws)
            launcher = exe if i % EXEC_EVERY == EXEC_EVERY - 1 else fork
            died += _kill_and_resume(Runner(rtws, launcher), p)
            shutil.rmtree(rtws.parent)
    finally:
        fork.close()
        exe.close()
    by_kind = Counter(p.point for p in chosen)
    print(
        f"crash points: {len(points)} in the scenario ({dict(Counter(p.point for p in points))}); "
        f"killed at {len(chosen)} ({dict(by_kind)}), {died} died there; "
        f"{time.monotonic() - t0:.1f}s"
    )
    # The scenario is deterministic enough that nearly every point is reached again.
    assert died >= len(chosen) * 0.9, f"only {died} of {len(chosen)} kills landed"
