"""One driver per dialog across processes, proved with real `mindloop` processes.

Issue 9's reproduction and its two neighbours:

- a `chat` SIGKILLed mid-generation, then two `mindloop run` started at once: exactly
  one resumes the dialog, which gets exactly one generation (before the claims, 7 of 8
  trials drove it twice);
- a message posted (`chat --dialog`) while another process is generating that dialog's
  answer gets a generation of its own, after the one in flight;
- a process stalled (SIGSTOP) past its claim's expiry: another takes over, and the
  stalled one, continued, commits nothing; one that generates or runs a tool for longer
  than the time to live keeps its claim (the heartbeat);
- a `run --watch` in the background while `chat`s come in: each message is answered by
  exactly one generation, and each `chat` prints its answer and exits 0;
- the stress run: three `run --watch` SIGKILLed at random and restarted, while `chat`s
  and `answer`s come in on one rtws, over a multi-dialog scenario; every invariant is
  checked once the last claim expired.

Every test waits on state it can observe (the store, a process's exit), never on a
fixed sleep, and kills and reaps every process it started in a `finally`. The claim's
time to live is shortened with `MINDLOOP_CLAIM_TTL` so that expiry happens within the
test; dead owners on this host are recognised at once anyway.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mindloop.store import DialogStatus, Store
from tests.dialogs import crash_scenario as cs
from tests.dialogs import invariants as inv
from tests.dialogs.procs import Proc, Procs, has_state, read_store, tail, wait_until
from tests.scenario_util import write_script, write_team

TIMEOUT = 90.0  # a generous bound for one command on a loaded 2-core machine
RESUMING = "resuming 1 interrupted dialog(s)"


def _status(rtws: Path) -> list[DialogStatus]:
    if not has_state(rtws):
        return []
    return read_store(rtws, lambda s: [d.status for d in s.list_dialogs()])


# ---------------------------------------------------------------- the reproduction

TRIALS = 5
SLOW_ANSWER = "the one and only answer"


@pytest.mark.sqlite_only  # copies the rtws per trial: its state must live in the copy
def test_a_killed_chat_is_resumed_by_exactly_one_of_two_runs(rtws: Path, tmp_path: Path) -> None:
    """`chat` with a slow answer, SIGKILLed while its generation streams (the dialog is
    `running` under its claim); then two `run` at the same instant. In every trial one of
    them prints that it resumes the dialog, and the dialog gets one generation."""
    write_team(rtws, {"dev": {}})
    write_script(rtws, [{"default": True, "delay_ms": 1500, "response": SLOW_ANSWER}])
    resumed_by: list[int] = []
    for trial in range(TRIALS):
        work = tmp_path / f"t{trial}"
        shutil.copytree(rtws, work / "rtws")
        procs = Procs(work / "rtws", work / "logs", env={"MINDLOOP_CLAIM_TTL": "2"})
        try:
            chat = procs.start("chat", "hello")

            def running(chat: Proc = chat, procs: Procs = procs) -> bool:
                assert chat.alive(), f"chat ended before the kill\n{tail(chat)}"
                return _status(procs.rtws) == [DialogStatus.RUNNING]

            wait_until(running, TIMEOUT, "the chat's dialog to be running")
            procs.kill(chat)
            runs = [procs.start("run"), procs.start("run")]
            codes = [procs.finish(r, TIMEOUT) for r in runs]
            assert codes == [0, 0], "\n".join(tail(r) for r in runs)
            printed = [RESUMING in r.output() for r in runs]
            where = f"trial {trial}:\n" + "\n".join(tail(r) for r in runs)
            assert sum(printed) == 1, where
            resumed_by.append(printed.index(True))

            state = inv.State.read(procs.rtws)
            (root,) = state.dialogs
            answers = [m for m in state.messages[root.id] if m.kind == "assistant"]
            assert [m.data["text"] for m in answers] == [SLOW_ANSWER], where
            assert len(state.generations[root.id]) == 1, where
            assert not inv.settled_problems(state), inv.settled_problems(state)
        finally:
            procs.close()
    print(f"{TRIALS} trials; the resuming run was the first/second started: {resumed_by}")


def test_a_message_posted_while_another_process_drives_the_dialog_is_answered(
    rtws: Path, tmp_path: Path
) -> None:
    """`chat --dialog X` while another `chat` is generating X's answer: the generation in
    flight never saw the new message, so it answers only the first; the second message
    gets a generation of its own, and each `chat` reports its own answer. (Before the
    fix, the new message was stored before the turn in flight, so X looked answered: the
    message never got an answer and the second `chat` printed the first one's.)"""
    write_team(rtws, {"dev": {}})
    write_script(
        rtws,
        [
            {"contains": "question 01", "response": "answer 01"},
            {"contains": "question 00", "delay_ms": 2000, "response": "answer 00"},
        ],
    )
    procs = Procs(rtws, tmp_path / "logs", env={"MINDLOOP_CLAIM_TTL": "2"})
    try:
        first = procs.start("chat", "question 00")

        def running() -> list[str]:
            assert first.alive(), tail(first)
            if not has_state(rtws):
                return []
            return read_store(
                rtws, lambda s: [d.id for d in s.list_dialogs() if d.status == "running"]
            )

        (did,) = wait_until(running, TIMEOUT, "the first chat to drive its dialog")
        second = procs.start("chat", "--dialog", did, "question 01")
        assert procs.finish(second, TIMEOUT) == 0, tail(second)
        assert procs.finish(first, TIMEOUT) == 0, tail(first)
        assert "answer 00" in first.output(), tail(first)
        assert "answer 01" in second.output() and "answer 00" not in second.output(), tail(second)
        state = inv.State.read(rtws)
        problems = inv.settled_problems(state)
        assert not problems, "\n".join(problems)
        said = [(m.kind, m.data["text"]) for m in state.messages[did]]
        assert said == [
            ("user", "question 00"),
            ("assistant", "answer 00"),
            ("user", "question 01"),
            ("assistant", "answer 01"),
        ], said
    finally:
        procs.close()


def test_a_process_stalled_past_its_claim_commits_nothing(rtws: Path, tmp_path: Path) -> None:
    """A `chat` stopped (SIGSTOP) mid-generation is alive but renews nothing: once its
    claim expired, a `run --watch` resumes the dialog and answers it. Continued (SIGCONT),
    the stalled chat finishes its generation, but its turn does not commit (it lost the
    claim): the dialog has one answer, and the chat reports that answer, exiting 0."""
    write_team(rtws, {"dev": {}})
    write_script(rtws, [{"default": True, "delay_ms": 1500, "response": SLOW_ANSWER}])
    procs = Procs(rtws, tmp_path / "logs", env={"MINDLOOP_CLAIM_TTL": "2"})
    try:
        chat = procs.start("chat", "hello")

        def running() -> bool:
            assert chat.alive(), tail(chat)
            return _status(rtws) == [DialogStatus.RUNNING]

        wait_until(running, TIMEOUT, "the chat's dialog to be running")
        chat.popen.send_signal(signal.SIGSTOP)
        stalled_owner = read_store(rtws, lambda s: s.list_dialogs()[0].claim_owner)
        watcher = procs.start("run", "--watch")

        def answered() -> list[str]:
            assert watcher.alive(), tail(watcher)
            return read_store(
                rtws,
                lambda s: [
                    m.data["text"]
                    for d in s.list_dialogs()
                    for m in s.load_history(d.id)
                    if m.kind == "assistant"
                ],
            )

        assert wait_until(answered, TIMEOUT, "the watcher to answer") == [SLOW_ANSWER]
        chat.popen.send_signal(signal.SIGCONT)
        assert procs.finish(chat, TIMEOUT) == 0, tail(chat)
        assert SLOW_ANSWER in chat.output(), tail(chat)
        procs.kill(watcher)
        state = inv.State.read(rtws)
        (root,) = state.dialogs
        problems = inv.settled_problems(state)
        assert not problems, "\n".join(problems)
        assert [m.data["text"] for m in state.messages[root.id] if m.kind == "assistant"] == [
            SLOW_ANSWER
        ]
        assert len(state.generations[root.id]) == 1
        assert stalled_owner and f"/{chat.pid}/" in stalled_owner
        assert SLOW_ANSWER in watcher.output(), tail(watcher)  # the watcher took over
    finally:
        if chat.alive():
            chat.popen.send_signal(signal.SIGCONT)
        procs.close()


def test_a_drive_keeps_its_claim_through_generations_and_tools_longer_than_its_ttl(
    rtws: Path, tmp_path: Path
) -> None:
    """The heartbeat: with a claim time to live of 1.5 s, a generation and a shell command
    of 3.5 s each, beside a `run --watch` that recovers expired claims every 0.75 s. The
    watcher never takes the dialog over: one generation per input, the command ran once."""
    write_team(rtws, {"dev": {"toolsets": ["shell"]}})
    command = "sleep 3.5; echo ran >> ran.txt"
    write_script(
        rtws,
        [
            {"role": "tool", "response": "it ran"},
            {
                "match": "go",
                "delay_ms": 3500,
                "response": "Running it.",
                "tool_calls": [{"name": "run_shell", "arguments": {"command": command}}],
            },
        ],
    )
    procs = Procs(rtws, tmp_path / "logs", env={"MINDLOOP_CLAIM_TTL": "1.5"})
    try:
        watcher = procs.start("run", "--watch")
        wait_until(lambda: has_state(rtws), TIMEOUT, "the watcher to open the state")
        chat = procs.start("chat", "go")
        assert procs.finish(chat, TIMEOUT) == 0, tail(chat)
        assert watcher.alive(), tail(watcher)
        procs.kill(watcher)
        assert "it ran" in chat.output(), tail(chat)
        assert "Running it." not in watcher.output(), tail(watcher)
        assert (rtws / "ran.txt").read_text("utf-8") == "ran\n"
        state = inv.State.read(rtws)
        problems = inv.settled_problems(state)
        assert not problems, "\n".join(problems)
        (root,) = state.dialogs
        assert [m.kind for m in state.messages[root.id]] == [
            "user",
            "assistant",
            "tool_call",
            "tool_result",
            "assistant",
        ]
        assert len(state.generations[root.id]) == 2
    finally:
        procs.close()


# ---------------------------------------------------------------- chat beside a watcher

ROUNDS = 3  # rounds of concurrent chats
PER_ROUND = 3


def test_chats_beside_a_watcher_are_each_answered_once(rtws: Path, tmp_path: Path) -> None:
    """`run --watch` in the background; rounds of concurrent `chat`s (new dialogs, and one
    dialog continued round after round). Every message gets exactly one generation,
    whichever process drove it, and every `chat` prints its answer and exits 0."""
    write_team(rtws, {"dev": {}})
    n = ROUNDS * PER_ROUND
    write_script(
        rtws,
        [
            {"contains": f"question {i:02d}", "delay_ms": 200, "response": f"answer {i:02d}"}
            for i in range(n)
        ],
    )
    procs = Procs(rtws, tmp_path / "logs", env={"MINDLOOP_CLAIM_TTL": "2"})
    by_other = 0
    try:
        watcher = procs.start("run", "--watch")
        wait_until(lambda: has_state(rtws), TIMEOUT, "the watcher to open the state")
        continued: str | None = None  # one dialog every round continues
        i = 0
        for _ in range(ROUNDS):
            chats = []
            for k in range(PER_ROUND):
                args = ["chat", f"question {i:02d}"]
                if k == 0 and continued is not None:
                    args += ["--dialog", continued]
                chats.append((i, procs.start(*args)))
                i += 1
            for j, chat in chats:
                code = procs.finish(chat, TIMEOUT)
                out = chat.output()
                assert code == 0, tail(chat)
                assert f"answer {j:02d}" in out, tail(chat)
                by_other += "answered by another mindloop process" in out
            if continued is None:
                continued = read_store(rtws, lambda s: s.list_dialogs()[0].id)
            assert watcher.alive(), tail(watcher)
        procs.kill(watcher)
        state = inv.State.read(rtws)
        problems = inv.settled_problems(state)
        assert not problems, "\n".join(problems)
        # Each question answered by one generation, and by its own answer.
        for did, msgs in state.messages.items():
            pairs = [
                (a.data["text"], b.data["text"])
                for a, b in itertools.pairwise(msgs)
                if a.kind == "user"
            ]
            assert all(q.replace("question", "answer") == a for q, a in pairs), pairs
            assert len(state.generations[did]) == len(pairs) == len(msgs) // 2
        assert sum(len(g) for g in state.generations.values()) == n
    finally:
        procs.close()
    print(f"{n} chats beside a watcher; {by_other} were answered by another process")


# ---------------------------------------------------------------- the stress run

STRESS_SEED = int(os.environ.get("MINDLOOP_STRESS_SEED", "0")) or random.randrange(1, 10**6)
STRESS_ROUNDS = int(os.environ.get("MINDLOOP_STRESS_ROUNDS", "4"))
STRESS_ROOTS = 3  # chats started together in a round
WATCHERS = 3
CLAIM_TTL = 2.0
FBR_ASK = "Think about the risks."
FBR_ANSWER = "risk: none worth stopping for"
# Generations long enough that a kill often lands in one.
_STRESS_SLOW = {"delay_ms": 120, "chunk_delay_ms": 4}


def _stress_script() -> list[dict[str, Any]]:
    """The crash scenario (a root fans out to alice, who writes a file and opens a
    session with carol, and bob, who asks the human), with an FBR sample of the root
    besides, and generations slow enough that kills land mid-generation."""
    script = []
    for entry in cs.SCRIPT:
        e = {k: v for k, v in entry.items() if k not in ("delay_ms", "chunk_delay_ms")}
        if e.get("match") == "go":
            e["response"] += f"\n!?@self {FBR_ASK}\n"
        script.append(e | _STRESS_SLOW)
    script.append({"member": "lead", "contains": FBR_ASK, "response": FBR_ANSWER} | _STRESS_SLOW)
    return script


def _tree_problems(state: inv.State, root_id: str) -> list[str]:
    """The scenario's end, for one root's tree: each side dialog once, the root's and
    every side dialog's final answer once, the question answered once."""
    tree = [d for d in state.dialogs if d.root_id == root_id]
    problems = []
    sides = Counter((d.member, d.kind, d.session_key is not None) for d in tree if d.id != root_id)
    expected = Counter(
        {("alice", "side", False): 1, ("bob", "side", False): 1, ("carol", "side", True): 1}
        | {("lead", "fbr", False): 1}
    )
    if sides != expected:
        problems.append(f"tree {root_id}: side dialogs {dict(sides)} != {dict(expected)}")
    finals = cs.FINALS | {"fbr": FBR_ANSWER}
    for d in tree:
        want = finals["fbr" if d.kind == "fbr" else d.member]
        n = sum(m.kind == "assistant" and m.data.get("text") == want for m in state.messages[d.id])
        if n != 1:
            problems.append(f"{state.who(d.id)} gave its final answer {n} times")
    qs = [(q.status, q.answer) for q in state.all_questions if q.root_id == root_id]
    if qs != [("answered", cs.HUMAN_ANSWER)]:
        problems.append(f"tree {root_id}: questions {qs}")
    return problems


@dataclass
class Stress:
    """One stress run's processes, randomness and figures."""

    procs: Procs
    rng: random.Random
    watchers: list[Proc] = field(default_factory=list)
    kills: Counter[str] = field(default_factory=Counter)
    answered: set[str] = field(default_factory=set)
    clients: list[Proc] = field(default_factory=list)  # chats and answers: must exit 0

    @property
    def rtws(self) -> Path:
        return self.procs.rtws

    def held_by(self, proc: Proc) -> int:
        """How many dialogs `proc` holds the claim of right now."""
        owner = f"/{proc.pid}/"
        return read_store(self.rtws, lambda s: sum(owner in (o or "") for _, o in s.held_claims()))

    def kill(self, proc: Proc, what: str) -> None:
        """SIGKILL `proc`; count where the kill landed; the store must be consistent."""
        held = self.held_by(proc)
        self.procs.kill(proc)
        self.kills[f"{what} {'mid-drive' if held else 'idle'}"] += 1
        problems = inv.consistent(inv.State.read(self.rtws))  # right after the kill
        assert not problems, f"seed={STRESS_SEED}: after a kill:\n" + "\n".join(problems)

    def kill_a_watcher(self) -> None:
        """A random watcher; more often than not one that is driving, if any is."""
        busy = [i for i, w in enumerate(self.watchers) if self.held_by(w)]
        if busy and self.rng.random() < 0.6:
            i = self.rng.choice(busy)
        else:
            i = self.rng.randrange(len(self.watchers))
        self.kill(self.watchers[i], "watcher")
        self.watchers[i] = self.procs.start("run", "--watch")

    def kill_a_chat(self) -> None:
        """Kill a running chat once its dialog is stored (its tree is then left to the
        watchers, which recover what it held); it does not count as a client any more."""
        started = [
            c for c in self.clients if c.args[0] == "chat" and c.alive() and "dialog " in c.output()
        ]
        if started:
            victim = self.rng.choice(started)
            self.clients.remove(victim)
            self.kill(victim, "chat")

    def answer_questions(self) -> None:
        for q in read_store(self.rtws, lambda s: s.open_questions()):
            if q.id not in self.answered:
                self.answered.add(q.id)
                # Most answers are only recorded: a watcher drives the tree on.
                drive = [] if self.rng.random() < 0.3 else ["--no-drive"]
                self.clients.append(self.procs.start("answer", *drive, q.id, cs.HUMAN_ANSWER))

    def check_clients(self) -> bool:
        """Whether every chat and answer ended; each must have exited 0 (done) or 4
        (waiting on the human: the scenario's question)."""
        for c in self.clients:
            code = c.popen.poll()
            assert code in (None, 0, 4), f"seed={STRESS_SEED}: exited {code}\n{tail(c)}"
        return all(c.popen.poll() is not None for c in self.clients)


def _roots_done(rtws: Path, roots: int) -> bool:
    def done(s: Store) -> bool:
        found = [d for d in s.list_dialogs() if d.kind == "root"]
        return len(found) == roots and all(
            (h := s.load_history(d.id)) and h[-1].data.get("text") == cs.FINAL_TEXT for d in found
        )

    return has_state(rtws) and read_store(rtws, done)


def test_stress_watchers_killed_at_random_beside_chats_and_answers(tmp_path: Path) -> None:
    """Three `run --watch` on one rtws, one of them SIGKILLed (and restarted) every few
    hundred milliseconds, while `chat`s start trees of the crash scenario (plus an FBR
    sample) and `answer`s answer their questions as they appear. About a third of the
    kills hit a `chat` instead (its tree is then the watchers' to finish), and most
    answers are recorded with `--no-drive`, so the watchers do much of the driving. Afterwards, once every
    claim expired and a last `mindloop run` ended, the store must show every generation
    exactly once (no two committed generations of a dialog answering the same input, none
    cut off), every reply delivered exactly once, every tool call answered once, nothing
    running, claimed, pending or open, and each tree's scenario complete.

    CI runs a short sample (4 rounds of 3 trees); `MINDLOOP_STRESS_ROUNDS=50` runs a
    long one, `MINDLOOP_STRESS_SEED=<n>` replays a seed (printed on failure)."""
    rtws = cs.build_template(tmp_path / "rtws")
    write_team(rtws, cs.TEAM | {"lead": {"toolsets": ["fs"], "fbr-effort": 1}})
    write_script(rtws, _stress_script())
    env = {"MINDLOOP_CLAIM_TTL": str(CLAIM_TTL)}
    run = Stress(Procs(rtws, tmp_path / "logs", env=env), random.Random(STRESS_SEED))
    t0 = time.monotonic()
    try:
        run.watchers = [run.procs.start("run", "--watch") for _ in range(WATCHERS)]
        roots = 0
        for _ in range(STRESS_ROUNDS):
            for _ in range(STRESS_ROOTS):
                run.clients.append(run.procs.start("chat", "-t", cs.TASK, "go"))
            roots += STRESS_ROOTS
            deadline = time.monotonic() + TIMEOUT
            next_kill = time.monotonic() + run.rng.uniform(0.1, 0.6)
            while not (run.check_clients() and _roots_done(rtws, roots)):
                assert time.monotonic() < deadline, f"seed={STRESS_SEED}: round not done"
                if has_state(rtws):
                    run.answer_questions()
                if time.monotonic() >= next_kill:
                    if run.rng.random() < 0.3:
                        run.kill_a_chat()
                    else:
                        run.kill_a_watcher()
                    next_kill = time.monotonic() + run.rng.uniform(0.1, 0.6)
                time.sleep(0.05)
        for w in run.watchers:  # the last kills: whatever they held stays claimed …
            run.procs.kill(w)
        expiry = read_store(rtws, lambda s: max((d.claim_expires or 0) for d in s.list_dialogs()))
        wait_until(lambda: time.time() > expiry, CLAIM_TTL + 5, "the last claim to expire")
        last = run.procs.start("run")  # … until it expired: then a plain run settles it
        assert run.procs.finish(last, TIMEOUT) == 0, tail(last)
        state = inv.State.read(rtws)
        problems = inv.settled_problems(state)
        problems += [f"a generation was cut off: {e['data']}" for e in state.cancelled]
        for root in (d for d in state.dialogs if d.kind == "root"):
            problems += _tree_problems(state, root.id)
        problems += [
            f"{rel}: {(rtws / rel).read_text('utf-8') if (rtws / rel).exists() else None!r}"
            for rel, content in cs.FILES.items()
            if not (rtws / rel).exists() or (rtws / rel).read_text("utf-8") != content
        ]
        assert not problems, f"seed={STRESS_SEED}:\n" + "\n".join(problems)
    finally:
        run.procs.close()
    gens = sum(len(g) for g in state.generations.values())
    print(
        f"stress seed={STRESS_SEED}: {roots} trees, {len(state.dialogs)} dialogs, {gens} "
        f"generations, {len(run.procs.started)} processes, kills {dict(run.kills)}, "
        f"{time.monotonic() - t0:.1f}s"
    )
