"""The multi-dialog scenario of the crash test, and the invariants checked on its store.

Kept apart from the test so the scenario (team, mock script, expected end state) reads
as one piece. The tree it produces:

    lead (root) ──!?@alice──► alice ──write_file──► out/report.txt
         │                      └──!?@carol !tellaskSession review──► carol ──write_file──► out/review.txt
         └──!?@bob──► bob ──!?@human──► question, answered with `mindloop answer`

The two tellasks of the root run concurrently; the root answers once both replies are in.
Small `delay_ms` / `chunk_delay_ms` stretch every generation over a few milliseconds so
that a random SIGKILL lands mid-generation, mid-tool and mid-delivery.

Every check returns a list of problems (empty when the store is consistent), so one
assertion can print all of them together with the trial's seed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mindloop.rtws import init_rtws
from mindloop.store import Store
from tests.scenario_util import write_script, write_team

TASK = "tasks/example.tsk"
FINAL_TEXT = "FINAL: the report is written and reviewed, and we use SQLite."
HUMAN_ANSWER = "SQLite"
FILES = {"out/report.txt": "report v1\n", "out/review.txt": "approved\n"}
# (member, session key) of every side dialog the scenario must create, exactly once each.
EXPECTED_SIDES = Counter({("alice", None): 1, ("bob", None): 1, ("carol", "carol!review"): 1})
# Each member's final answer: given exactly once (a finished dialog is not re-generated).
FINALS = {
    "lead": FINAL_TEXT,
    "alice": "alice: report written and approved",
    "carol": "approved",
    "bob": "bob: we use SQLite",
}
# (caller member, side member) of every reply, delivered exactly once each.
EXPECTED_REPLIES = Counter({("lead", "alice"): 1, ("lead", "bob"): 1, ("alice", "carol"): 1})

TEAM = {
    "lead": {"toolsets": ["fs"]},
    "alice": {"toolsets": ["fs"]},
    "bob": {"toolsets": ["fs"]},
    "carol": {"toolsets": ["fs"]},
}

_SLOW = {"delay_ms": 3, "chunk_delay_ms": 1}
_INTERRUPTED = "interrupted by a runtime restart"


def _write(path: str) -> list[dict[str, Any]]:
    return [{"name": "write_file", "arguments": {"path": path, "content": FILES[path]}}]


# Order matters: the first matching entry answers, so the more specific entries come first.
SCRIPT: list[dict[str, Any]] = [
    # lead: fan out to alice and bob; once both replies are in, the final answer.
    {"member": "lead", "contains": "provided response", **_SLOW, "response": FINALS["lead"]},
    {
        "member": "lead",
        "match": "go",
        **_SLOW,
        "response": "Splitting the work.\n"
        "!?@alice Write the report file.\n!?Then have carol review it.\n\n"
        "!?@bob Pick a database.\n",
    },
    # alice: write the report (again, when a restart interrupted the call), then ask carol.
    {
        "member": "alice",
        "contains": "provided response",
        **_SLOW,
        "response": FINALS["alice"],
    },
    {
        "member": "alice",
        "role": "tool",
        "contains": _INTERRUPTED,
        **_SLOW,
        "tool_calls": _write("out/report.txt"),
    },
    {
        "member": "alice",
        "role": "tool",
        "contains": "out/report.txt",
        **_SLOW,
        "response": "Written.\n!?@carol !tellaskSession review\n!?Review out/report.txt please.\n",
    },
    {
        "member": "alice",
        "contains": "Write the report file",
        **_SLOW,
        "response": "On it.",
        "tool_calls": _write("out/report.txt"),
    },
    # carol: record the review, then answer.
    {
        "member": "carol",
        "role": "tool",
        "contains": _INTERRUPTED,
        **_SLOW,
        "tool_calls": _write("out/review.txt"),
    },
    {
        "member": "carol",
        "role": "tool",
        "contains": "out/review.txt",
        **_SLOW,
        "response": FINALS["carol"],
    },
    {
        "member": "carol",
        "contains": "Review out/report.txt",
        **_SLOW,
        "tool_calls": _write("out/review.txt"),
    },
    # bob: ask the human, answer once the human did.
    {
        "member": "bob",
        "contains": "answer from the human",
        **_SLOW,
        "response": FINALS["bob"],
    },
    {
        "member": "bob",
        "contains": "Pick a database",
        **_SLOW,
        "response": "I need a decision.\n!?@human Which database?\n!?Postgres or SQLite?\n",
    },
]


def build_template(root: Path, *, slow: bool = True) -> Path:
    """A ready rtws (team, script, task package) to copy for every trial. `slow=False`
    drops the delays (for in-process runs, where nothing needs to land mid-stream)."""
    init_rtws(root, provider="mock")
    write_team(root, TEAM)
    script = SCRIPT if slow else [{k: v for k, v in e.items() if k not in _SLOW} for e in SCRIPT]
    write_script(root, script)
    return root


@dataclass
class Snapshot:
    """Everything the invariants look at, read once from a closed-down store."""

    dialogs: list[Any]
    messages: dict[str, list[Any]]
    pending: list[Any]
    responses: list[Any]
    questions: list[Any]

    @classmethod
    def read(cls, rtws: Path) -> Snapshot:
        store = Store.for_rtws(rtws)
        try:
            dialogs = store.list_dialogs()
            # The store lists open questions only; answered ones are read by id.
            ids = {q.id for q in store.open_questions()} | {
                m.data["question_id"]
                for d in dialogs
                for m in store.load_history(d.id)
                if "question_id" in m.data
            }
            questions = [store.get_question(qid) for qid in sorted(ids)]
            return cls(
                dialogs=dialogs,
                messages={d.id: store.load_history(d.id) for d in dialogs},
                pending=store.all_pending(),
                responses=store.all_responses(),
                questions=questions,
            )
        finally:
            store.close()

    def by_id(self) -> dict[str, Any]:
        return {d.id: d for d in self.dialogs}

    def root(self) -> Any | None:
        roots = [d for d in self.dialogs if d.kind == "root"]
        return roots[0] if len(roots) == 1 else None


def check_always(snap: Snapshot) -> list[str]:
    """Invariants that hold at every instant, including right after a SIGKILL."""
    problems: list[str] = []
    ids = snap.by_id()
    roots = [d for d in snap.dialogs if d.kind == "root"]
    if len(roots) > 1:
        problems.append(f"{len(roots)} root dialogs")
    sides = Counter((d.member, d.session_key) for d in snap.dialogs if d.kind != "root")
    for key, n in sides.items():
        if key not in EXPECTED_SIDES:
            problems.append(f"unexpected side dialog {key}")
        elif n > EXPECTED_SIDES[key]:
            problems.append(f"side dialog {key} created {n} times")
    for d in snap.dialogs:
        if d.kind != "root" and d.parent_id not in ids:
            problems.append(
                f"orphan side dialog {d.id} (@{d.member}): parent {d.parent_id} missing"
            )
    for p in snap.pending:
        if p.caller_id not in ids or p.side_id not in ids:
            problems.append(
                f"pending record {p.id} points at a missing dialog ({p.caller_id} -> {p.side_id})"
            )
    pend = Counter((p.caller_id, p.side_id, p.call_id) for p in snap.pending)
    problems += [f"pending record {k} stored {n} times" for k, n in pend.items() if n > 1]
    resp = Counter((r.caller_id, r.side_id, r.call_id) for r in snap.responses)
    problems += [f"reply {k} stored {n} times in responses" for k, n in resp.items() if n > 1]
    for reply in resp:
        if reply in pend:
            problems.append(f"reply {reply} recorded while its pending record remains")
    for did, msgs in snap.messages.items():
        who = f"@{ids[did].member}" if did in ids else did
        results = Counter(
            (m.data.get("side_id"), m.data.get("call_id"))
            for m in msgs
            if m.kind == "tellask_result" and "response_id" in m.data  # a delivered reply
        )
        problems += [f"{who}: reply {k} injected {n} times" for k, n in results.items() if n > 1]
        delivered = {
            (r.side_id, r.call_id) for r in snap.responses if r.caller_id == did and r.delivered
        }
        problems += [
            f"{who}: reply {k} marked delivered but not injected" for k in delivered - set(results)
        ]
        problems += [
            f"{who}: reply {k} injected but not marked delivered" for k in set(results) - delivered
        ]
        calls = Counter(m.data["id"] for m in msgs if m.kind == "tool_call")
        problems += [f"{who}: tool call id {c} used {n} times" for c, n in calls.items() if n > 1]
        tool_results = Counter(m.data["call_id"] for m in msgs if m.kind == "tool_result")
        problems += [
            f"{who}: tool call {c} has {n} results" for c, n in tool_results.items() if n > 1
        ]
        problems += [
            f"{who}: tool result for unknown call {c}" for c in set(tool_results) - set(calls)
        ]
        answers = Counter(m.data["question_id"] for m in msgs if "question_id" in m.data)
        problems += [
            f"{who}: answer to {q} injected {n} times" for q, n in answers.items() if n > 1
        ]
    if len(snap.questions) > 1:
        problems.append(f"{len(snap.questions)} questions registered (expected at most 1)")
    for q in snap.questions:
        if q.dialog_id not in ids or ids[q.dialog_id].member != "bob":
            problems.append(f"question {q.id} asked by {q.dialog_id}, not by @bob")
        injected = sum(
            1 for m in snap.messages.get(q.dialog_id, []) if m.data.get("question_id") == q.id
        )
        if (q.status == "answered") != (injected == 1) or q.status not in ("open", "answered"):
            problems.append(
                f"question {q.id} is {q.status} but its answer was injected {injected} times"
            )
    for n, d in _final_counts(snap):
        if n > 1:
            problems.append(f"@{d.member}'s final answer appears {n} times")
    return problems


def _final_counts(snap: Snapshot) -> list[tuple[int, Any]]:
    """How often each dialog gave its member's final answer."""
    return [
        (
            sum(
                m.kind == "assistant" and m.data.get("text") == FINALS[d.member]
                for m in snap.messages[d.id]
            ),
            d,
        )
        for d in snap.dialogs
    ]


def kill_site(snap: Snapshot) -> set[str]:
    """What a kill interrupted, as read from the store it left (for the test's summary)."""
    root = snap.root()
    if root is None or not snap.messages[root.id]:
        return {"before the message was stored"}
    ids = snap.by_id()
    sites = {f"@{d.member} mid-drive" for d in snap.dialogs if d.status == "running"}
    for did, msgs in snap.messages.items():
        calls = {m.data["id"] for m in msgs if m.kind == "tool_call"}
        if calls - {m.data["call_id"] for m in msgs if m.kind == "tool_result"}:
            sites.add(f"@{ids[did].member} mid-tool")
    if any(not r.delivered for r in snap.responses):
        sites.add("reply queued for its caller")
    return sites or {"between drives"}


def check_waiting_for_human(snap: Snapshot) -> list[str]:
    """After a restart ran to quiescence: only the human's answer is missing."""
    problems = check_always(snap)
    problems += [
        f"@{d.member} left {d.status}"
        for d in snap.dialogs
        if d.status in ("running", "interrupted")
    ]
    # Acceptance 23: after a restart a dialog with an open question is blocked on it.
    problems += [
        f"@{d.member} is {d.status}, not waiting"
        for d in snap.dialogs
        if d.member in ("lead", "bob") and d.status != "waiting"
    ]
    open_qs = [q for q in snap.questions if q.status == "open"]
    if len(open_qs) != 1 or len(snap.questions) != 1:
        problems.append(
            f"expected one open question, got {[(q.id, q.status) for q in snap.questions]}"
        )
    sides = Counter((d.member, d.session_key) for d in snap.dialogs if d.kind != "root")
    if sides != EXPECTED_SIDES:
        problems.append(f"side dialogs {dict(sides)} != {dict(EXPECTED_SIDES)}")
    waits = sorted(
        (snap.by_id()[p.caller_id].member, snap.by_id()[p.side_id].member)
        for p in snap.pending
        if p.side_id in snap.by_id() and p.caller_id in snap.by_id()
    )
    if waits != [("lead", "bob")]:
        problems.append(f"pending while the question is open: {waits} (expected lead -> bob only)")
    root = snap.root()
    if root is not None and any(m.data.get("text") == FINAL_TEXT for m in snap.messages[root.id]):
        problems.append("the root answered before the human did")
    return problems


def check_done(snap: Snapshot, rtws: Path) -> list[str]:
    """The scenario's end state: everything delivered exactly once, nothing left over."""
    problems = check_always(snap)
    ids = snap.by_id()
    problems += [
        f"@{d.member} left {d.status}"
        for d in snap.dialogs
        if d.status in ("running", "interrupted")
    ]
    problems += [
        f"@{d.member} gave its final answer {n} times" for n, d in _final_counts(snap) if n != 1
    ]
    problems += [f"@{d.member} still needs a drive" for d in snap.dialogs if d.needs_drive]
    sides = Counter((d.member, d.session_key) for d in snap.dialogs if d.kind != "root")
    if sides != EXPECTED_SIDES:
        problems.append(f"side dialogs {dict(sides)} != {dict(EXPECTED_SIDES)}")
    if snap.pending:
        problems.append(
            f"pending records remain: {[(p.caller_id, p.side_id) for p in snap.pending]}"
        )
    replies = Counter(
        (ids[r.caller_id].member, ids[r.side_id].member)
        for r in snap.responses
        if r.caller_id in ids and r.side_id in ids
    )
    if replies != EXPECTED_REPLIES:
        problems.append(f"replies {dict(replies)} != {dict(EXPECTED_REPLIES)}")
    problems += [
        f"reply {r.side_id} -> {r.caller_id} never injected"
        for r in snap.responses
        if not r.delivered
    ]
    if [(q.status, q.answer) for q in snap.questions] != [("answered", HUMAN_ANSWER)]:
        problems.append(f"questions: {[(q.id, q.status, q.answer) for q in snap.questions]}")
    root = snap.root()
    if root is None:
        problems.append("no root dialog")
    else:
        last = snap.messages[root.id][-1]
        if (last.kind, last.data.get("text")) != ("assistant", FINAL_TEXT):
            problems.append(f"the root's last message is {last.kind}: {last.data.get('text')!r}")
    for did, msgs in snap.messages.items():
        calls = {m.data["id"] for m in msgs if m.kind == "tool_call"}
        answered = {m.data["call_id"] for m in msgs if m.kind == "tool_result"}
        problems += [f"@{ids[did].member}: tool call {c} has no result" for c in calls - answered]
    for rel, content in FILES.items():
        path = rtws / rel
        got = path.read_text("utf-8") if path.exists() else None
        if got != content:
            problems.append(f"{rel}: {got!r} != {content!r}")
    return problems


# --------------------------------------------------------------------------- launching
#
# A trial starts three to five `mindloop` processes. Exec'ing the console script costs
# ~0.6 s of imports each, which would put 50+ trials far beyond the test's time budget,
# so most processes come from a fork server: a Python process that has imported
# `mindloop.cli.app` once and forks a child per command; the child runs the same
# `mindloop.cli.app.main` the console script runs, on its own pid, and is SIGKILLed like
# any other process. Some trials exec `python -m mindloop.cli.app` instead, so the real
# entry point is exercised too.


class Proc:
    """A started `mindloop` process: its pid, a way to wait for it, its log."""

    def __init__(self, pid: int, log: Path, waiter: Any) -> None:
        self.pid = pid
        self.log = log
        self._waiter = waiter
        self.returncode: int | None = None

    def wait(self, timeout: float) -> int:
        """Exit code, or -signal when killed. Raises TimeoutError (after a SIGKILL)."""
        if self.returncode is None:
            self.returncode = self._waiter(self.pid, timeout)
        return self.returncode

    def kill(self) -> None:
        import os
        import signal

        if self.returncode is None:  # not reaped yet: the pid cannot have been reused
            os.kill(self.pid, signal.SIGKILL)

    def has_exited(self) -> bool:
        """True once the process is gone or a zombie (Linux: /proc/<pid>/stat)."""
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True

    def has_store_open(self, rtws: Path) -> bool:
        """True once the process holds the rtws database open (it is past its imports and
        about to work), or once it is gone. Linux: reads /proc/<pid>/fd."""
        import os

        fd_dir = f"/proc/{self.pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except FileNotFoundError:
            return True
        db = os.path.realpath(rtws / ".mindloop" / "state.sqlite")
        for name in names:
            try:
                if os.readlink(f"{fd_dir}/{name}") == db:
                    return True
            except OSError:
                continue
        return self.has_exited()


class ExecLauncher:
    """`python -m mindloop.cli.app …`: a fresh interpreter, exactly as a user runs it."""

    name = "exec"

    def __init__(self) -> None:
        self._procs: dict[int, Any] = {}

    def start(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> Proc:
        import subprocess
        import sys

        with log.open("ab") as fh:
            p = subprocess.Popen(
                [sys.executable, "-m", "mindloop.cli.app", *args],
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=_child_env() | (env or {}),
            )
        self._procs[p.pid] = p
        return Proc(p.pid, log, self._wait)

    def _wait(self, pid: int, timeout: float) -> int:
        import subprocess

        p = self._procs.pop(pid)
        try:
            return int(p.wait(timeout))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise TimeoutError(f"mindloop pid {pid} still running after {timeout}s") from None

    def close(self) -> None:
        for p in self._procs.values():
            p.kill()
            p.wait()
        self._procs.clear()


class ForkLauncher:
    """Talks to `python -m tests.dialogs.crash_scenario serve` (see `serve`)."""

    name = "fork"

    def __init__(self) -> None:
        import subprocess
        import sys

        self._server = subprocess.Popen(
            [sys.executable, "-m", "tests.dialogs.crash_scenario", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
            env=_child_env(),
        )
        self._ask({"op": "ping"})

    def _ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        import json

        assert self._server.stdin is not None and self._server.stdout is not None
        self._server.stdin.write((json.dumps(msg) + "\n").encode())
        self._server.stdin.flush()
        line = self._server.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server died (exit {self._server.poll()})")
        return dict(json.loads(line))

    def start(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> Proc:
        msg = {"op": "start", "args": args, "log": str(log), "env": env or {}}
        pid = int(self._ask(msg)["pid"])
        return Proc(pid, log, self._wait)

    def _wait(self, pid: int, timeout: float) -> int:
        status = self._ask({"op": "wait", "pid": pid, "timeout": timeout})["status"]
        if status is None:
            raise TimeoutError(f"mindloop pid {pid} still running after {timeout}s")
        return int(status)

    def close(self) -> None:
        if self._server.stdin is not None:
            self._server.stdin.close()
        self._server.wait(30)


REPO = Path(__file__).resolve().parents[2]


def _child_env() -> dict[str, str]:
    """The test's environment, minus anything that could make a child talk to a terminal
    or a real provider, plus the repo on the path (for the fork server's import)."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "120"
    return env


def serve() -> None:
    """The fork server: one JSON request per stdin line, one JSON answer per line.

    `start {args, log, env}` forks a child that runs `mindloop <args>` with stdout/stderr
    in `log` and `env` added to its environment (crash points are read again) and answers
    its pid; `wait {pid, timeout}` reaps it and answers its exit status
    (`-signal` when killed, null on timeout, after which the child is SIGKILLed and
    reaped). Children are reaped only on `wait`, so a pid stays valid for `kill` until
    then. EOF on stdin ends the server.
    """
    import json
    import os
    import select
    import signal
    import sys

    import mindloop.cli.app as cli  # the whole point: import once, fork many
    from mindloop.store import crash_points

    def reply(obj: dict[str, Any]) -> None:
        os.write(1, (json.dumps(obj) + "\n").encode())

    def reap(pid: int) -> int:
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    for line in sys.stdin.buffer:
        msg = json.loads(line)
        if msg["op"] == "ping":
            reply({"ok": True})
        elif msg["op"] == "start":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child: become `mindloop <args>`
                code = 70
                try:
                    fd = os.open(msg["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    os.dup2(fd, 1)
                    os.dup2(fd, 2)
                    null = os.open(os.devnull, os.O_RDONLY)
                    os.dup2(null, 0)
                    os.environ.update(msg.get("env") or {})
                    crash_points.CRASH = crash_points.CrashPoints.from_env(
                        os.environ.get(crash_points.CRASH_ENV)
                    )
                    sys.argv = ["mindloop", *msg["args"]]
                    cli.main()
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                except BaseException:
                    import traceback

                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            reply({"pid": pid})
        elif msg["op"] == "wait":
            pid = int(msg["pid"])
            pidfd = os.pidfd_open(pid)
            try:
                ready, _, _ = select.select([pidfd], [], [], float(msg["timeout"]))
            finally:
                os.close(pidfd)
            if ready:
                reply({"status": reap(pid)})
            else:
                os.kill(pid, signal.SIGKILL)
                reap(pid)
                reply({"status": None})


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["serve"]:
        serve()
