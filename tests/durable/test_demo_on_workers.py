"""The README's scale-out section, followed: the demo task (`mindloop.demo`) on three real
`mindloop worker` processes and a real PostgreSQL server (`tests/pg.py`).

`mindloop run TASK` with the database URL enqueues the task's work loop for the workers
and follows it; the human's answer and approval are given with the CLI (`answer`,
`approve`, the URL set), the workers carry the loop on, and a `run` after each follows it
to its next stop, until the task is DONE with every node DONE.

The kill variant SIGKILLs the worker that drives the loop root in its DO phase: another
worker takes over its work, the loop's workflow is recovered there (once) and resumes
where the store says it stands, and no model step that completed is made again — every
model call a worker recorded (a DBOS step, under its key) is recorded once.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from mindloop.demo import DEMO_PROMPT, DEMO_TASK, HUMAN_ANSWER, prepare_demo_rtws
from mindloop.demo.script import KB_FILE
from mindloop.store import DialogStatus, Store
from mindloop.store import loop_state as ls
from mindloop.store.location import DATABASE_URL_ENV
from mindloop.store.workers import WorkerTable
from tests import pg
from tests.dialogs.procs import Proc, Procs, tail, wait_until
from tests.durable.fleet import TIMEOUT, procs_on, start_worker, workers_json
from tests.scenario_util import ml

WORKER_TTL = "6"  # three workers beat on a loaded two-core machine
MAX_RUNS = 6  # `run` ends at each wait on the human (two), and once more at DONE


@pytest.fixture
def database() -> str:
    return pg.server().database_url()


def _cli(rtws: Path, database: str, *args: str) -> Any:
    done = ml("-C", str(rtws), *args, env={DATABASE_URL_ENV: database})
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _settle_open(rtws: Path, database: str) -> tuple[int, int]:
    """Answer the open questions and approve the open approvals with the CLI, as the
    human would; how many of each."""
    items = json.loads(_cli(rtws, database, "questions", "--json").stdout)
    answered = approved = 0
    for item in items:
        if item["kind"] == "question":
            done = _cli(rtws, database, "answer", item["id"], HUMAN_ANSWER)
            answered += 1
        else:
            done = _cli(rtws, database, "approve", item["id"])
            approved += 1
        assert "the workers drive it on" in done.stdout, done.stdout
    return answered, approved


def _run_to_done(
    procs: Procs, rtws: Path, database: str, first: Proc
) -> tuple[list[Proc], int, int]:
    """Follow `first` (a `run TASK`), then settle what the human must and `run` again,
    until a run ends DONE (exit 0); the runs, and how many answers and approvals."""
    runs = [first]
    answered = approved = 0
    while True:
        code = procs.finish(runs[-1], TIMEOUT)
        if code == 0:
            return runs, answered, approved
        assert code == 4, tail(runs[-1])  # waiting on the human
        assert len(runs) < MAX_RUNS, "\n".join(tail(r) for r in runs)
        a, b = _settle_open(rtws, database)
        answered, approved = answered + a, approved + b
        runs.append(procs.start("run", DEMO_TASK))


def _finished(rtws: Path, database: str) -> dict[str, Any]:
    st = json.loads(_cli(rtws, database, "status", DEMO_TASK, "--json").stdout)
    assert st["status"] == "DONE", st
    assert [n["status"] for n in st["nodes"]] == ["DONE"] * len(st["nodes"]), st["nodes"]
    assert st["total"] == 4 and st["done"] == 4
    return st  # type: ignore[no-any-return]


def _generation_keys(database: str) -> Counter[str]:
    """Every model call a worker recorded (a DBOS step's JSON output), by key."""
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT output FROM dbos.operation_outputs WHERE function_name = %s",
            ("mindloop.generation",),
        ).fetchall()
    return Counter(json.loads(out)["key"] for (out,) in rows)


def _workflows(database: str, *, pending: bool = False) -> list[tuple[str, str, str | None]]:
    """(workflow id, status, executor) of DBOS's workflows, or of those running now."""
    where = "WHERE status = 'PENDING'" if pending else ""
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            f"SELECT workflow_uuid, status, executor_id FROM dbos.workflow_status {where} "
            "ORDER BY created_at"
        ).fetchall()
    return [(str(w), str(s), e) for w, s, e in rows]


def _running(database: str) -> list[str]:
    """Workflows queued or running now."""
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT workflow_uuid FROM dbos.workflow_status WHERE status IN ('PENDING', 'ENQUEUED')"
        ).fetchall()
    return [str(w) for (w,) in rows]


def _names(database: str) -> set[str]:
    with psycopg.connect(database) as conn:
        return {str(n) for (n,) in conn.execute("SELECT DISTINCT name FROM dbos.workflow_status")}


def _generations(store: Store) -> int:
    return sum(len(store.generations(d.id)) for d in store.list_dialogs())


def test_the_demo_task_runs_on_three_workers(tmp_path: Path, database: str) -> None:
    demo = prepare_demo_rtws(tmp_path / "demo")
    procs = procs_on(demo, tmp_path / "logs", database)
    try:
        workers = [start_worker(procs, f"W{i}", ttl=WORKER_TTL) for i in range(3)]
        assert sorted(w["state"] for w in workers_json(demo, database)) == ["live"] * 3
        first = procs.start("run", DEMO_TASK, "-m", DEMO_PROMPT)
        runs, answered, approved = _run_to_done(procs, demo, database, first)
        # SELF_IMPROVE's KB request is delivered by a worker, and the KB teammate's dialog
        # driven on one: the note is written without any `mindloop run` here
        wait_until(lambda: (demo / KB_FILE).is_file(), TIMEOUT, "the KB note", interval=0.1)
        wait_until(lambda: not _running(database), TIMEOUT, "the workflows' ends", interval=0.1)
        for w in workers:
            assert w.alive(), tail(w)
    finally:
        procs.close()
    assert (answered, approved) == (1, 1)
    out = runs[0].output()
    assert "its loop is queued for the workers" in out
    assert "▶ PLAN (entry 1)" in out and "question q4h-" in out
    assert "task tasks/example.tsk: done" in runs[-1].output()
    _finished(demo, database)
    assert (demo / "RELEASE_NOTES.md").is_file() and (demo / "CONTRIBUTING.md").is_file()
    # the loop ran as workflows of the loops' queue, its tree's other dialogs as drives
    assert _names(database) == {"mindloop.loop", "mindloop.drive"}
    flows = _workflows(database)
    assert all(s == "SUCCESS" for _, s, _ in flows), flows
    keys = _generation_keys(database)
    assert keys and max(keys.values()) == 1  # each model call recorded once


def test_a_worker_killed_while_it_drives_a_phase_is_taken_over_once(
    tmp_path: Path, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = prepare_demo_rtws(tmp_path / "demo")
    # every model call takes a while: a worker can be caught in the middle of a phase
    script = demo / ".minds" / "mock" / "mock-model.yaml"
    data = yaml.safe_load(script.read_text("utf-8"))
    for entry in data["responses"]:
        entry["delay_ms"] = 300
    script.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), "utf-8")
    monkeypatch.setenv(DATABASE_URL_ENV, database)
    procs = procs_on(demo, tmp_path / "logs", database)
    store = Store.for_rtws(demo)
    try:
        workers = [start_worker(procs, f"W{i}", ttl=WORKER_TTL) for i in range(3)]
        first = procs.start("run", DEMO_TASK, "-m", DEMO_PROMPT)
        assert procs.finish(first, TIMEOUT) == 4, tail(first)  # the PLAN question
        assert _settle_open(demo, database) == (1, 0)
        follow = procs.start("run", DEMO_TASK)
        table = WorkerTable(store)
        owners = {w.claim_owner: w.pid for w in table.all()}

        def driving_do() -> int | None:
            """The pid of the worker driving the loop root in DO, caught in a model call
            (a step of the entry is done, its tool calls all answered: the next model
            call is under way; a tool call cut off would have an unknown effect, which
            the model is told about — the scripted one has no answer for that)."""
            state = ls.get(store, DEMO_TASK)
            if state is None or state.phase is not ls.Phase.DO or not state.in_phase:
                return None
            root = store.get_dialog(state.root_id)
            if root.status is not DialogStatus.RUNNING:
                return None
            done = [
                m.kind for m in store.messages_after(root.id, root.course, state.entry_message_id)
            ]
            calls, results = done.count("tool_call"), done.count("tool_result")
            if not (calls and calls == results and done[-1] == "tool_result"):
                return None
            return owners.get(root.claim_owner or "")

        pid = wait_until(driving_do, TIMEOUT, "a worker driving the DO phase", interval=0.02)
        killed = next(w for w in workers if w.pid == pid)
        procs.kill(killed)
        gone_id = next(w.executor_id for w in table.all() if w.pid == pid)
        # what it was running when it died (the loop among them)
        pending = {wid for wid, _, e in _workflows(database, pending=True) if e == gone_id}
        assert any(wid.startswith("loop-") for wid in pending), pending
        _, answered, approved = _run_to_done(procs, demo, database, follow)
        # the KB request is delivered and its drive enqueued after the task is DONE: only
        # once the KB note is written is there nothing more to enqueue
        wait_until(lambda: (demo / KB_FILE).is_file(), TIMEOUT, "the KB note", interval=0.1)
        wait_until(lambda: not _running(database), TIMEOUT, "the workflows' ends", interval=0.1)
        live = [w for w in workers if w is not killed]
        for w in live:
            assert w.alive(), tail(w)
        rows = {w.pid: w for w in table.all()}
        generations = _generations(store)
    finally:
        procs.close()
        store.close()
    assert (answered, approved) == (0, 1)  # the question was answered before the kill
    _finished(demo, database)
    gone = rows[killed.pid]
    assert gone.recovered_by in {rows[w.pid].executor_id for w in live}  # taken over once
    flows = {wid: (s, e) for wid, s, e in _workflows(database)}
    assert all(s == "SUCCESS" for s, _ in flows.values()), [
        (w, s) for w, (s, _) in flows.items() if s != "SUCCESS"
    ]
    # what the killed worker was running (its loop) was finished by live ones: recovered
    for wid in pending:
        assert flows[wid][1] in {rows[w.pid].executor_id for w in live}, (wid, flows[wid])
    # no model step that completed was made again: each recorded once, and the store
    # kept one generation per recorded step (but a step in flight on the killed worker)
    keys = _generation_keys(database)
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]
    assert generations <= sum(keys.values()) + 1
