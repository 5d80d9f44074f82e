"""Crash safety of dialog trees: SIGKILL a real `mindloop` process at random instants.

Each trial runs the scenario of `crash_scenario` (a root that tellasks two teammates at
once; one writes a file and opens a session with a third member, the other asks the
human) in a fresh rtws:

1. `mindloop chat "go"`, SIGKILLed after a random delay;
2. sometimes `mindloop run`, SIGKILLed again at random;
3. `mindloop run` until quiescent: the question for the human must be open, the rest
   of the tree done, nothing duplicated;
4. `mindloop answer <id> SQLite`, sometimes SIGKILLed at random (answered again if the
   kill came before the answer was recorded), then `mindloop run` until quiescent;
5. the end state: every side dialog exactly once, every reply recorded and injected
   exactly once, no pending record, the question answered once, the root's final answer
   exactly once, no dialog left running, tool-call ids unique per dialog, every tool call
   answered, the files the tools wrote in place.

After every kill the store must already be consistent (`check_always`). The random
delays range over the scenario's normal duration, measured once up front. Set
MINDLOOP_CRASH_SEED to explore other seeds; a failure prints seed and trial.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.dialogs import crash_scenario as cs

SEED = int(os.environ.get("MINDLOOP_CRASH_SEED", "7321"))
TRIALS = 60
EXEC_EVERY = 12  # every 12th trial execs a fresh interpreter instead of forking
TIMEOUT = 60.0


@dataclass
class Trial:
    seed: int
    index: int
    rtws: Path
    launcher: cs.ExecLauncher | cs.ForkLauncher
    rng: random.Random
    steps: list[str] = field(default_factory=list)
    n: int = 0

    def where(self) -> str:
        return f"seed={self.seed} trial={self.index} launcher={self.launcher.name} steps={self.steps}"

    def start(self, *args: str) -> cs.Proc:
        self.n += 1
        return self.launcher.start(["-C", str(self.rtws), *args], self.rtws.parent / f"p{self.n}.log")

    def finish(self, *args: str) -> None:
        """Run a command to its end; it must succeed."""
        proc = self.start(*args)
        self.steps.append(" ".join(args[:1]))
        code = proc.wait(TIMEOUT)
        assert code == 0, f"{self.where()}: `mindloop {' '.join(args)}` exited {code}\n{_tail(proc.log)}"

    def killed(self, max_delay: float, *args: str) -> None:
        """Run a command and SIGKILL it after a random delay (counted from when it has
        the store open, i.e. past its imports); then the store must be consistent."""
        delay = self.rng.uniform(0, max_delay)
        proc = self.start(*args)
        deadline = time.monotonic() + TIMEOUT
        while not proc.has_store_open(self.rtws):  # wait on observable state
            assert time.monotonic() < deadline, f"{self.where()}: no store after {TIMEOUT}s"
            time.sleep(0.001)
        time.sleep(delay)  # the random kill point itself
        proc.kill()
        code = proc.wait(TIMEOUT)
        self.steps.append(f"{args[0]}(kill@{delay * 1000:.0f}ms→{code})")
        self.expect(cs.check_always(cs.Snapshot.read(self.rtws)), "after the kill", proc.log)

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
    """How long the uninterrupted scenario's phases take, past process start-up."""

    chat: float
    answer: float


def _measure(template: Path, work: Path, launcher: cs.ForkLauncher) -> Durations:
    """Run the scenario once without kills (and check it ends right): the random kill
    delays range over these durations."""
    rtws = work / "baseline" / "rtws"
    shutil.copytree(template, rtws)
    trial = Trial(SEED, -1, rtws, launcher, random.Random(SEED))
    t0 = time.monotonic()
    trial.finish("chat", "-t", cs.TASK, "go")
    chat = time.monotonic() - t0
    snap = cs.Snapshot.read(rtws)
    trial.expect(cs.check_waiting_for_human(snap), "baseline chat")
    t0 = time.monotonic()
    trial.finish("answer", snap.questions[0].id, cs.HUMAN_ANSWER)
    answer = time.monotonic() - t0
    trial.expect(cs.check_done(cs.Snapshot.read(rtws), rtws), "baseline end")
    return Durations(chat=chat, answer=answer)


def _run_trial(trial: Trial, d: Durations) -> None:
    rng = trial.rng
    trial.killed(d.chat, "chat", "-t", cs.TASK, "go")
    snap = cs.Snapshot.read(trial.rtws)
    root = snap.root()
    if root is None or not any(m.kind == "user" for m in snap.messages[root.id]):
        # Killed before `chat` stored the message: the user sends it again.
        args = ["chat", "-t", cs.TASK, "go"] if root is None else ["chat", "-d", root.id, "go"]
        trial.finish(*args)
    if rng.random() < 0.4:
        trial.killed(d.chat, "run")
    trial.finish("run")
    snap = cs.Snapshot.read(trial.rtws)
    trial.expect(cs.check_waiting_for_human(snap), "after the restart ran to quiescence")
    question = snap.questions[0].id
    if rng.random() < 0.6:
        trial.killed(d.answer, "answer", question, cs.HUMAN_ANSWER)
    if any(q.status == "open" for q in cs.Snapshot.read(trial.rtws).questions):
        trial.finish("answer", question, cs.HUMAN_ANSWER)
    trial.finish("run")
    trial.expect(cs.check_done(cs.Snapshot.read(trial.rtws), trial.rtws), "at the end")


def test_sigkill_at_random_points_keeps_the_tree_consistent(tmp_path: Path) -> None:
    template = cs.build_template(tmp_path / "template")
    fork = cs.ForkLauncher()
    exe = cs.ExecLauncher()
    try:
        durations = _measure(template, tmp_path, fork)
        for i in range(TRIALS):
            rtws = tmp_path / f"t{i}" / "rtws"
            shutil.copytree(template, rtws)
            launcher = exe if i % EXEC_EVERY == EXEC_EVERY - 1 else fork
            trial = Trial(SEED, i, rtws, launcher, random.Random(f"{SEED}:{i}"))
            _run_trial(trial, durations)
            shutil.rmtree(rtws.parent)
    finally:
        fork.close()
        exe.close()
