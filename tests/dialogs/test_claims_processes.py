"""One driver per dialog across processes, proved with real `mindloop` processes.

Issue 9's reproduction and its two neighbours:

- a `chat` SIGKILLed mid-generation, then two `mindloop run` started at once: exactly
  one resumes the dialog, which gets exactly one generation (before the claims, 7 of 8
  trials drove it twice);
- a `run --watch` in the background while `chat`s come in: each message is answered by
  exactly one generation, and each `chat` prints its answer and exits 0, also when the
  watcher drove it;
- the stress run: three `run --watch` SIGKILLed at random and restarted, while `chat`s
  and `answer`s come in on one rtws, over a multi-dialog scenario (see `stress_run`).

Every test waits on state it can observe (the store, a process's exit), never on a
fixed sleep, and kills and reaps every process it started in a `finally`. The claim's
time to live is shortened with `MINDLOOP_CLAIM_TTL` so that expiry happens within the
test; dead owners on this host are recognised at once anyway.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from mindloop.store import DialogStatus
from tests.dialogs import invariants as inv
from tests.dialogs.procs import Procs, has_state, read_store, tail, wait_until
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

            def running(chat=chat, procs=procs) -> bool:  # type: ignore[no-untyped-def]
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
