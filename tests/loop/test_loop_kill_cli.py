"""A real `mindloop` process killed during ADJUST and while the task waits, then `mindloop
run` again: the task ends exactly as an uninterrupted run ends it (issue 12's tests: "a
kill during each phase and during a wait, with `mindloop run` continuing correctly").

`tests/loop/test_loop_crash.py` kills an in-process loop at every commit of PLAN, DO,
CHECK and SELF_IMPROVE. Here the CLI itself dies, in the two places that test does not
reach, on the mock provider in a temporary rtws:

- **ADJUST after a CHECK failure.** The task plans one node, DO completes it, CHECK fails
  it, ADJUST records its cycle (`retry_propose`) and sends the node back to work, DO and
  CHECK pass it, SELF_IMPROVE ends. `mindloop run` dies inside ADJUST at a chosen point
  (`MINDLOOP_TEST_CRASH_AT`: just before or after a commit, a tool call or a model call;
  the process ends there with `os._exit`, as a SIGKILL would), then `mindloop run TASK`
  carries the task to DONE.
- **While the task waits.** DO asks the human (a question: a registered wait), and after
  the answer waits two seconds (`wait_for`: a timer). `mindloop run` dies around the
  question's registration, `mindloop answer` around the answer and the timer's
  registration and firing; and once, a real SIGKILL lands on `answer` while the timer
  wait is open (waited for in the store, never slept for). Then, as a user would: answer
  what is open, `mindloop run TASK` to DONE.

Each end state is compared with the uninterrupted run's: the phases entered, every node
transition in order, each node's status and version, the retry records, every wait row
and question (kind and status: none lost, none doubled), the outbox; and the dialog
invariants (each model input answered once, each tool call answered once, each question
asked once and answered once). CI kills at a sample of the points (about ten per
scenario); `MINDLOOP_CRASH_POINTS=all` kills at every point of the ADJUST phase and
around every wait.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from mindloop.store import Store, schema
from mindloop.store import loop_state as ls
from mindloop.store.crash_points import CRASH_ENV, CRASH_EXIT_CODE
from mindloop.workspace import repo
from tests.dialogs import invariants as inv
from tests.dialogs.procs import Procs, read_store, tail, wait_until
from tests.scenario_util import ml, write_script

pytestmark = pytest.mark.sqlite_only  # a copied rtws per trial: its state must live in it

TASK = "tasks/example.tsk"
MESSAGE = "greet the user"
ANSWER = "casual"
TIMEOUT = 120.0
EVERY = os.environ.get("MINDLOOP_CRASH_POINTS") == "all"


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _end(hint: str, progress: str = "ok") -> dict[str, Any]:
    return _call("phase_end", next_behavior=hint, summary={"progress": progress}, reason="r")


def _move(node: str, to: str, **extra: Any) -> dict[str, Any]:
    return _call("node_transition", node_id=node, to=to, reason="r", **extra)


CREATE = _call(
    "node_create",
    parent_id="root",
    kind="EXECUTION",
    title="greeting",
    requirement="greet the user",
    acceptance_criteria=[{"when": "done", "then": "greets", "verify": "true"}],
)
COMPLETE = _move(
    "n1",
    "COMPLETE",
    self_check=[{"criterion": "AC1", "passed": True}],
    no_artifacts_reason="a test node",
)
# Both scenarios: SELF_IMPROVE first (its input quotes earlier messages), PLAN one node.
COMMON: list[dict[str, Any]] = [
    {"contains": "Phase SELF_IMPROVE (entry", "tool_calls": [_end("END", "tidied")]},
    {"contains": "Phase PLAN (entry", "tool_calls": [CREATE]},
    {"role": "tool", "contains": "created n1", "tool_calls": [_end("DO", "planned")]},
    {"role": "tool", "contains": "IN_PROGRESS → COMPLETE", "tool_calls": [_end("CHECK")]},
]
# A call cut off by the kill is answered "interrupted … its effect is unknown" (its store
# effect commits with its result, so it had none); the agent calls it again — the mock
# tells which call it was by what its context holds (first match wins).
INTERRUPTED = "interrupted by a runtime restart"
RETRY = _call(
    "retry_propose",
    failure_class="CHECK_FAIL",
    evidence="check report: AC1 failed",
    reflection="WRONG_APPROACH: the check report shows the greeting is wrong",
    change_kind="STRATEGY",
    change_summary="greet by name",
    plan="greet the user by name",
)
BACK_TO_WORK = [_move("n1", "IN_PROGRESS"), _end("DO", "by name now")]
ADJUST_SCRIPT = [
    *COMMON,
    {
        "role": "tool",
        "contains": INTERRUPTED,
        "context_contains": "ACCEPTED: ADJUST cycle",
        "tool_calls": BACK_TO_WORK,
    },
    {"role": "tool", "contains": INTERRUPTED, "tool_calls": [RETRY]},
    {"contains": "Phase DO (entry", "tool_calls": [COMPLETE]},
    # entries: PLAN 1, DO 2, CHECK 3 (fails the node), ADJUST 4, DO 5, CHECK 6 (passes it)
    {
        "contains": "Phase CHECK (entry 3)",
        "tool_calls": [_move("n1", "CHECK_FAILED", evidence="AC1 failed"), _end("ADJUST")],
    },
    {"contains": "Phase CHECK (entry", "tool_calls": [_move("n1", "DONE", conclusion="greets")]},
    {"role": "tool", "contains": "COMPLETE → DONE", "tool_calls": [_end("END", "all done")]},
    {"contains": "Phase ADJUST (entry", "tool_calls": [RETRY]},
    {"role": "tool", "contains": "ACCEPTED: ADJUST cycle", "tool_calls": BACK_TO_WORK},
]
WAIT_FOR = _call("wait_for", seconds=2)
WAIT_SCRIPT = [
    *COMMON,
    {"role": "tool", "contains": INTERRUPTED, "tool_calls": [WAIT_FOR]},
    {"contains": ["timer wait", "fired"], "tool_calls": [COMPLETE]},
    {"contains": "answer from the human", "tool_calls": [WAIT_FOR]},
    {"contains": "Phase DO (entry", "response": "!?@human Formal or casual?\n"},
    {
        "contains": "Phase CHECK (entry",
        "tool_calls": [_move("n1", "DONE", conclusion="greets"), _end("END", "all done")],
    },
]


# ---------------------------------------------------------------------- the commands


def _cli(rtws: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = ml("-C", str(rtws), *args, cwd=rtws.parent, env=env)
    return done.returncode, done.stdout[-3000:] + done.stderr[-3000:]


def _open_questions(rtws: Path) -> list[str]:
    code, out = _cli(rtws, "questions", "--json")
    assert code == 0, out
    return [q["id"] for q in json.loads(out[out.index("[") :]) if q["kind"] == "question"]


def _posted(rtws: Path) -> bool:
    """Whether the user's message got into the task (a kill may come before)."""

    def read(store: Store) -> bool:
        state = ls.get(store, TASK)
        return state is not None and any(
            m.kind == "user" and "loop" not in m.data for m in store.load_history(state.root_id)
        )

    return Store.exists_for(rtws) and read_store(rtws, read)


def _first_run(rtws: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    return _cli(rtws, "run", TASK, "-m", MESSAGE, env=env)


def _answer(rtws: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    [question] = _open_questions(rtws)
    return _cli(rtws, "answer", question, ANSWER, env=env)


def _to_done(rtws: Path) -> None:
    """What a user does after a crash: the message again if it never got in, an answer
    to what is open, `mindloop run TASK` until the task is DONE."""
    args = ("run", TASK) if _posted(rtws) else ("run", TASK, "-m", MESSAGE)
    for _ in range(4):
        for question in _open_questions(rtws):
            code, out = _cli(rtws, "answer", question, ANSWER, "--no-drive")
            assert code == 0, out
        code, out = _cli(rtws, *args)
        args = ("run", TASK)
        if code == 0:
            return
        assert code == 4, f"`run` exited {code}\n{out}"  # a question came up: answer it
    raise AssertionError("the task did not reach DONE in four runs")


# ---------------------------------------------------------------------- the end state


def end_state(rtws: Path) -> dict[str, Any]:
    """What must come out as without a kill (nothing lost, nothing doubled)."""
    store = Store.for_rtws(rtws)
    try:
        state = ls.get(store, TASK)
        assert state is not None
        history = store.load_history(state.root_id)
        log = repo.log(store, TASK)
        ws = repo.load(store, TASK)
        with store.tx(durable=False) as conn:
            waits = sorted(
                (r.kind, r.status, r.node or "-") for r in conn.execute(sa.select(schema.waits))
            )
            questions = sorted(r.status for r in conn.execute(sa.select(schema.questions)))
            retries = [
                (r.todo_id, r.level, r.attempt, r.change_summary)
                for r in conn.execute(
                    sa.select(schema.retry_records).order_by(schema.retry_records.c.id)
                )
            ]
            outbox = sorted((r.kind, r.status) for r in conn.execute(sa.select(schema.outbox)))
        running = [d.id for d in store.list_dialogs() if d.status.value == "running"]
    finally:
        store.close()
    return {
        "status": state.status.value,
        "phases": [m.data["loop"]["phase"] for m in history if "loop" in m.data],
        "transitions": [
            (e.node_id, e.data.get("from"), e.data.get("to"), e.data.get("by"))
            for e in log
            if e.kind == "transition"
        ],
        "log": Counter(e.kind for e in log),
        "nodes": {
            n.id: (n.status.value, n.version, n.attempt, n.adjust_count) for n in ws.nodes.values()
        },
        "waits": waits,
        "questions": questions,
        "retries": retries,
        "outbox": outbox,
        "running": running,
    }


def _problems(rtws: Path) -> list[str]:
    """The dialog invariants once everything settled."""
    state = inv.State.read(rtws)
    return (
        inv.generation_problems(state)
        + inv.tool_problems(state)
        + inv.question_problems(state)
        + inv.reply_problems(state)
    )


def _same_end(rtws: Path, expected: dict[str, Any], what: str) -> None:
    got = end_state(rtws)
    diff = {k: (got[k], expected[k]) for k in expected if got[k] != expected[k]}
    assert not diff, f"after a kill {what}, differs from the uninterrupted run: {diff}"
    problems = _problems(rtws)
    assert not problems, f"after a kill {what}:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------------- crash points


@dataclass(frozen=True)
class Point:
    point: str  # commit.before, commit.after, tool.before, tool.after, generation.after
    n: int  # its n-th occurrence in the command
    where: str  # the function that committed, or the tool

    @property
    def env(self) -> dict[str, str]:
        return {CRASH_ENV: f"{self.point}:{self.n}"}

    def __str__(self) -> str:
        return f"{self.point}:{self.n} ({self.where})"


def _counted(rtws: Path, command: Callable[..., tuple[int, str]], log: Path) -> list[Point]:
    code, out = command(rtws, env={CRASH_ENV: f"count:{log}"})
    assert code in (0, 4), out
    points = []
    for line in log.read_text("utf-8").splitlines():
        point, n, where = line.split(" ", 2)
        points.append(Point(point, int(n), where))
    return points


Pick = Callable[[list[Point]], Point]

# Points are told apart by their kind and the tool they surround (a scenario's tools are
# its own), not by the engine function that commits (the engine's to reshape).


def _nth(point: str, where: str, k: int = 0) -> Pick:
    """The k-th point of a kind around the tool `where` (-1: the last)."""

    def pick(points: list[Point]) -> Point:
        return [p for p in points if p.point == point and p.where == where][k]

    return pick


def _index(points: list[Point], point: str, where: str | None = None, start: int = 0) -> int:
    """The index of the first `point` (around the tool `where`) from `start` on."""
    return next(
        i
        for i, p in enumerate(points)
        if i >= start and p.point == point and (where is None or p.where == where)
    )


def _after(tool: str, point: str = "commit.after") -> Pick:
    """The first `point` after the tool `tool` returned (its result's commit)."""

    def pick(points: list[Point]) -> Point:
        return points[_index(points, point, start=_index(points, "tool.after", tool))]

    return pick


def _turn(point: str) -> Pick:
    """The commit of the last model call's turn (`point`: before or after it)."""

    def pick(points: list[Point]) -> Point:
        last = max(i for i, p in enumerate(points) if p.point == "generation.after")
        return points[_index(points, point, start=last)]

    return pick


def _adjust(points: list[Point]) -> list[Point]:
    """The points of the ADJUST phase: from the commit entering it (the commit of CHECK's
    last step, after the result of its `phase_end`: CHECK closed and ADJUST entered with
    it), before and after it, to the one leaving it (the commit of the step of its own
    `phase_end`, which follows its `retry_propose`: DO entered with it)."""
    proposed = _index(points, "tool.before", "retry_propose")
    check_end = max(
        i
        for i, p in enumerate(points[:proposed])
        if p.point == "tool.after" and p.where == "phase_end"
    )
    start = _index(points, "commit.before", start=check_end)
    own_end = _index(points, "tool.after", "phase_end", start=proposed)
    stop = _index(points, "commit.after", start=own_end)
    return points[start : stop + 1]


ADJUST_PICKS: dict[str, Pick] = {  # of the ADJUST phase's points
    "entering ADJUST, before its commit": lambda points: points[0],
    "entering ADJUST, after its commit": lambda points: points[1],
    "its first model call returned": lambda points: points[_index(points, "generation.after")],
    "retry_propose ran, its result not committed": _nth("tool.after", "retry_propose"),
    "the ADJUST cycle recorded": _after("retry_propose"),
    "node_transition ran, its result not committed": _nth("tool.after", "node_transition"),
    "before phase_end": _nth("tool.before", "phase_end"),
    "the phase_end step, before its commit (DO entered with it)": _after(
        "phase_end", "commit.before"
    ),
    "leaving ADJUST (for DO), after its commit": lambda points: points[-1],
}
RUN_PICKS: dict[str, Pick] = {  # `run TASK -m …` until the question
    "the question generated, not committed": lambda points: [
        p for p in points if p.point == "generation.after"
    ][-1],
    "the question's turn, before its commit": _turn("commit.before"),
    "the question registered": _turn("commit.after"),
    "the loop saved waiting": lambda points: points[-1],
}
TIMER_FIRED = "dialogs.waits.resolve"
ANSWER_PICKS: dict[str, Pick] = {  # `answer` through the timer to DONE
    "the answer, before its commit": lambda points: points[0],
    "the answer recorded": lambda points: points[1],
    "wait_for ran, its result not committed": _nth("tool.after", "wait_for"),
    "the timer wait registered": _after("wait_for"),
    "the timer fired": _nth("commit.after", TIMER_FIRED),
}


@dataclass
class Scenario:
    template: Path
    expected: dict[str, Any]
    run_points: list[Point]
    answer_points: list[Point]


def _fresh(tmp: Path, template: Path, name: str) -> Path:
    dst = tmp / name / "p"
    shutil.copytree(template, dst)
    return dst


def _scenario(tmp: Path, script: list[dict[str, Any]], *, asks: bool) -> Scenario:
    template = tmp / "template" / "p"
    template.parent.mkdir(parents=True)
    code = ml("init", str(template), cwd=template.parent).returncode
    assert code == 0
    write_script(template, script)
    base = _fresh(tmp, template, "base")
    run_points = _counted(base, _first_run, tmp / "run.count")
    answer_points = _counted(base, _answer, tmp / "answer.count") if asks else []
    expected = end_state(base)
    assert expected["status"] == "DONE", expected
    assert not expected["running"] and not _problems(base)
    return Scenario(template, expected, run_points, answer_points)


@pytest.fixture(scope="module")
def adjusting(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    scenario = _scenario(tmp_path_factory.mktemp("adjust"), ADJUST_SCRIPT, asks=False)
    exp = scenario.expected
    work = ["PLAN", "DO", "CHECK", "ADJUST", "DO", "CHECK"]
    passes = exp["phases"][len(work) :]  # SELF_IMPROVE: an entry per batch of the history
    assert exp["phases"][: len(work)] == work and passes and set(passes) == {"SELF_IMPROVE"}
    assert ("n1", "CHECK_FAILED", "ADJUSTING", "RT") in exp["transitions"]
    assert [r[:2] for r in exp["retries"]] == [("n1", "L3")]
    return scenario


@pytest.fixture(scope="module")
def waiting(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    scenario = _scenario(tmp_path_factory.mktemp("wait"), WAIT_SCRIPT, asks=True)
    exp = scenario.expected
    assert exp["questions"] == ["answered"]
    assert sorted(k for k, _, _ in exp["waits"]) == ["timer", "user_input"], exp["waits"]
    assert {s for _, s, _ in exp["waits"]} == {"resolved"}
    return scenario


def _kill_at(rtws: Path, command: Callable[..., tuple[int, str]], p: Point) -> None:
    code, out = command(rtws, env=p.env)
    assert code == CRASH_EXIT_CODE, f"{p} was not reached (exit {code})\n{out}"


def _points(picks: dict[str, Pick], points: list[Point]) -> list[tuple[str, Point]]:
    if EVERY:
        return [(str(p), p) for p in points]
    return [(name, pick(points)) for name, pick in picks.items()]


def test_a_kill_during_adjust_then_run_ends_as_if_uninterrupted(
    tmp_path: Path, adjusting: Scenario
) -> None:
    chosen = _points(ADJUST_PICKS, _adjust(adjusting.run_points))
    assert len(chosen) >= len(ADJUST_PICKS) and len({p for _, p in chosen}) == len(chosen)
    for i, (name, p) in enumerate(chosen):
        rtws = _fresh(tmp_path, adjusting.template, f"t{i}")
        _kill_at(rtws, _first_run, p)
        # the process died inside ADJUST: the task stands in it, or at its edges
        state = read_store(rtws, lambda s: ls.get(s, TASK))
        around = (ls.Phase.CHECK, ls.Phase.ADJUST, ls.Phase.DO)
        assert state is not None and state.phase in around and state.entry in (3, 4, 5), name
        _to_done(rtws)
        _same_end(rtws, adjusting.expected, f"{name} [{p}]")


def test_a_kill_around_a_question_then_answer_and_run_end_as_if_uninterrupted(
    tmp_path: Path, waiting: Scenario
) -> None:
    """`run` dies around the question's registration: afterwards the question is there
    once (or not yet: `run` asks it again, once), is answered once, and the task ends
    as without the kill."""
    points = waiting.run_points
    if EVERY:  # every point after PLAN's end: entering DO, asking
        plan_end = _index(points, "tool.after", "phase_end")
        points = points[_index(points, "commit.after", start=plan_end) + 1 :]
    for i, (name, p) in enumerate(_points(RUN_PICKS, points)):
        rtws = _fresh(tmp_path, waiting.template, f"t{i}")
        _kill_at(rtws, _first_run, p)
        assert len(_open_questions(rtws)) <= 1, name
        _to_done(rtws)
        _same_end(rtws, waiting.expected, f"{name} [{p}]")


def test_a_kill_of_answer_around_its_timer_then_run_ends_as_if_uninterrupted(
    tmp_path: Path, waiting: Scenario
) -> None:
    """`answer` dies before or after its answer is recorded, around the registration of
    the timer its drive asks for, and once the timer fired; `run TASK` goes on."""
    points = waiting.answer_points
    if EVERY:  # up to the drive after the timer
        points = points[: _index(points, "commit.after", TIMER_FIRED) + 1]
    for i, (name, p) in enumerate(_points(ANSWER_PICKS, points)):
        rtws = _fresh(tmp_path, waiting.template, f"t{i}")
        code, out = _first_run(rtws)
        assert code == 4, out
        _kill_at(rtws, _answer, p)
        _to_done(rtws)
        _same_end(rtws, waiting.expected, f"{name} [{p}]")


def test_answer_sigkilled_while_the_timer_wait_is_open_then_run_ends_as_if_uninterrupted(
    tmp_path: Path, waiting: Scenario
) -> None:
    """A real SIGKILL: `answer` drives the task into its timer wait and stays to see it
    fire; it is killed while the wait is open (seen in the store). The wait is neither
    lost nor doubled: the next `run TASK` waits for the same timer and goes on."""
    rtws = _fresh(tmp_path, waiting.template, "sigkill")
    code, out = _first_run(rtws)
    assert code == 4, out
    [question] = _open_questions(rtws)
    procs = Procs(rtws, tmp_path / "logs")
    try:
        answer = procs.start("answer", question, ANSWER)

        def open_timer(store: Store) -> list[str]:
            with store.tx(durable=False) as conn:
                rows = conn.execute(
                    sa.select(schema.waits.c.id).where(
                        schema.waits.c.kind == "timer", schema.waits.c.status == "open"
                    )
                ).all()
            return [str(r.id) for r in rows]

        def timer_open() -> list[str]:
            assert answer.alive(), f"`answer` ended before its timer was seen\n{tail(answer)}"
            return read_store(rtws, open_timer) if Store.exists_for(rtws) else []

        [timer] = wait_until(timer_open, TIMEOUT, "the open timer wait")
        assert procs.kill(answer) < 0, tail(answer)  # killed, not ended by itself
    finally:
        procs.close()
    assert read_store(rtws, open_timer) == [timer]  # killed while it waited
    code, out = _cli(rtws, "run", TASK)
    assert code == 0, out
    _same_end(rtws, waiting.expected, "while the timer wait was open")
    assert read_store(rtws, open_timer) == []
