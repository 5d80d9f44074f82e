"""Crash safety of dialog trees: SIGKILL a real `mindloop` process at random instants.

Each trial runs the scenario of `crash_scenario` (a root that tellasks two teammates at
once; one writes a file and opens a session with a third member, the other asks the
human) in a fresh rtws:

1. `mindloop chat "go"`, SIGKILLed after a random delay, or (a quarter of the trials)
   the moment a tool's file appears, i.e. between a tool's effect and its result;
2. sometimes `mindloop run`, SIGKILLed again at random;
3. `mindloop run` until quiescent: the question for the human must be open, the rest
   of the tree done, nothing duplicated;
4. `mindloop answer <id> SQLite`, which drives the tree to its end; or, sometimes, that
   process SIGKILLed at random (answered again if the kill came before the answer was
   recorded), then `mindloop run` until quiescent;
5. the end state: every side dialog exactly once, every reply recorded and injected
   exactly once, no pending record, the question answered once, the root's final answer
   exactly once, no dialog left running, tool-call ids unique per dialog, every tool call
   answered, the files the tools wrote in place.

After every kill the store must already be consistent (`check_always`). The random
delays range over the scenario's normal duration (from the process opening the store
to its exit), measured once up front. Processes come from a fork server that imported
the CLI once (see `crash_scenario.ForkLauncher`); every 17th trial execs
`python -m mindloop.cli.app` instead. Set MINDLOOP_CRASH_SEED to explore other seeds; a
failure prints seed, trial and the steps taken.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.dialogs import crash_scenario as cs

SEED = int(os.environ.get("MINDLOOP_CRASH_SEED", "7321"))
TRIALS = 52
EXEC_EVERY = 17  # every 17th trial execs fresh interpreters instead of forking
TIMEOUT = 60.0


@dataclass
class Trial:
    seed: int
    index: int
    rtws: Path
    launcher: cs.ExecLauncher | cs.ForkLauncher
    rng: random.Random
    seen: Counter[str] = field(default_factory=Counter)  # where the kills landed
    steps: list[str] = field(default_factory=list)
    n: int = 0

    def where(self) -> str:
        return (
            f"seed={self.seed} trial={self.index} launcher={self.launcher.name} steps={self.steps}"
        )

    def start(self, *args: str) -> cs.Proc:
        self.n += 1
        return self.launcher.start(
            ["-C", str(self.rtws), *args], self.rtws.parent / f"p{self.n}.log"
        )

    def _started(self, *args: str) -> tuple[cs.Proc, float]:
        """Start a command; return it once it has the store open (past its imports)."""
        proc = self.start(*args)
        deadline = time.monotonic() + TIMEOUT
        while not proc.has_store_open(self.rtws):  # wait on observable state
            assert time.monotonic() < deadline, f"{self.where()}: no store after {TIMEOUT}s"
            time.sleep(0.001)
        return proc, time.monotonic()

    def finish(self, *args: str) -> float:
        """Run a command to its end; it must succeed: exit 0, or 4 when it ended waiting on
        the human (DESIGN §8.6; the state checks that follow say which is due). Returns how
        long it worked."""
        proc, t0 = self._started(*args)
        code = proc.wait(TIMEOUT)
        worked = time.monotonic() - t0
        self.steps.append(args[0])
        assert code in (0, 4), (
            f"{self.where()}: `mindloop {' '.join(args)}` exited {code}\n{_tail(proc.log)}"
        )
        return worked

    def killed(self, max_delay: float, *args: str, when_exists: Path | None = None) -> float:
        """Run a command and SIGKILL it a random delay after it opened the store — or,
        with `when_exists`, the moment that file appears (a tool just wrote it: the kill
        lands between the tool's effect and its recorded result). Then the store must be
        consistent. Returns the delay."""
        delay = self.rng.uniform(0, max_delay)
        proc, t0 = self._started(*args)
        if when_exists is None:
            time.sleep(delay)  # the random kill point itself
        else:
            while not when_exists.exists() and not proc.has_exited():  # observable state
                time.sleep(0.0002)
            delay = time.monotonic() - t0
        proc.kill()
        code = proc.wait(TIMEOUT)
        self.steps.append(f"{args[0]}(kill@{delay * 1000:.0f}ms→{code})")
        snap = cs.Snapshot.read(self.rtws)
        self.expect(cs.check_always(snap), "after the kill", proc.log)
        self.seen.update(cs.kill_site(snap) if code < 0 else {"exited before the kill"})
        return delay

    def expect(self, problems: list[str], when: str, log: Path | None = None) -> None:
        if problems:
            logs = _tail(log) if log else ""
            pytest.fail(f"{self.where()}: {when}:\n  " + "\n  ".join(problems) + "\n" + logs)


def _tail(log: Path, lines: int = 40) -> str:
    if not log.exists():
        return "(no output)"
    text = log.read_text("utf-8", "replace").splitlines()
    return f"--- {log.name} (last {lines} lines) ---\n" + "\n".join(text[-lines:])


@dataclass
class Durations:
    """How long the uninterrupted scenario's phases work: from opening the store (past
    process start-up) to exit."""

    chat: float
    answer: float


def _measure(template: Path, work: Path, launcher: cs.ForkLauncher) -> Durations:
    """Run the scenario once without kills (and check it ends right): the random kill
    delays range over these durations."""
    rtws = work / "baseline" / "rtws"
    shutil.copytree(template, rtws)
    trial = Trial(SEED, -1, rtws, launcher, random.Random(SEED))
    chat = trial.finish("chat", "-t", cs.TASK, "go")
    snap = cs.Snapshot.read(rtws)
    trial.expect(cs.check_waiting_for_human(snap), "baseline chat")
    answer = trial.finish("answer", snap.questions[0].id, cs.HUMAN_ANSWER)
    trial.expect(cs.check_done(cs.Snapshot.read(rtws), rtws), "baseline end")
    return Durations(chat=chat, answer=answer)


def _run_trial(trial: Trial, d: Durations) -> None:
    rng = trial.rng
    written = trial.rtws / rng.choice(sorted(cs.FILES)) if rng.random() < 0.25 else None
    first = trial.killed(d.chat, "chat", "-t", cs.TASK, "go", when_exists=written)
    snap = cs.Snapshot.read(trial.rtws)
    root = snap.root()
    if root is None or not any(m.kind == "user" for m in snap.messages[root.id]):
        # Killed before `chat` stored the message: the user sends it again.
        args = ["chat", "-t", cs.TASK, "go"] if root is None else ["chat", "-d", root.id, "go"]
        trial.finish(*args)
    if rng.random() < 0.4:  # about what the first kill left undone
        trial.killed(max(d.chat - first, 0.02), "run")
    trial.finish("run")
    snap = cs.Snapshot.read(trial.rtws)
    trial.expect(cs.check_waiting_for_human(snap), "after the restart ran to quiescence")
    question = snap.questions[0].id
    if rng.random() < 0.6:
        trial.killed(d.answer, "answer", question, cs.HUMAN_ANSWER)
        if any(q.status == "open" for q in cs.Snapshot.read(trial.rtws).questions):
            trial.finish("answer", question, cs.HUMAN_ANSWER)  # killed before it was recorded
        trial.finish("run")
    else:  # `answer` drives the tree on by itself, to the end
        trial.finish("answer", question, cs.HUMAN_ANSWER)
    trial.expect(cs.check_done(cs.Snapshot.read(trial.rtws), trial.rtws), "at the end")


@pytest.mark.sqlite_only  # a fresh rtws per trial: its state must live in it
def test_sigkill_at_random_points_keeps_the_tree_consistent(tmp_path: Path) -> None:
    template = cs.build_template(tmp_path / "template")
    fork = cs.ForkLauncher()
    exe = cs.ExecLauncher()
    try:
        durations = _measure(template, tmp_path, fork)
        seen: Counter[str] = Counter()
        for i in range(TRIALS):
            rtws = tmp_path / f"t{i}" / "rtws"
            shutil.copytree(template, rtws)
            launcher = exe if i % EXEC_EVERY == EXEC_EVERY - 1 else fork
            trial = Trial(SEED, i, rtws, launcher, random.Random(f"{SEED}:{i}"), seen)
            _run_trial(trial, durations)
            shutil.rmtree(rtws.parent)
        print("where the kills landed:", dict(seen.most_common()))
        mid_drive = sum(n for site, n in seen.items() if site.endswith("mid-drive"))
        assert mid_drive >= TRIALS // 3, f"seed={SEED}: too few kills landed mid-drive: {seen}"
    finally:
        fork.close()
        exe.close()
