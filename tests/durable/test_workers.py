"""Scale-out workers on a real PostgreSQL server (`tests/pg.py`): real `mindloop worker`
processes on DBOS Transact, a model that counts its calls (`model_server.py`).

- A worker dies right after a model call answered, before its turn was committed (the
  crash point `generation.after`): another worker takes over its work, and the recovered
  workflow does not call the model again for that step — it finds the step DBOS recorded.
- Three workers drive 200 root dialogs with tellasks and questions; one is SIGKILLed
  mid-way: its work is taken over once, every dialog gets its answer exactly once, no
  model call completed twice (but the killed worker's last ones), nothing is lost.
- `mindloop workers` lists them; a worker on another rtws is refused.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import psycopg
import pytest
import yaml

from mindloop.store import Store
from mindloop.store.location import DATABASE_URL_ENV
from mindloop.store.workers import WorkerTable
from tests import pg
from tests.dialogs.procs import Procs, tail, wait_until
from tests.durable.fleet import (
    TIMEOUT,
    TTL,
    final_answer,
    procs_on,
    start_worker,
    workers_json,
)
from tests.durable.model_server import ModelServer
from tests.scenario_util import ml, write_team


@pytest.fixture
def database() -> str:
    return pg.server().database_url()


def _project(rtws: Path, server: ModelServer) -> None:
    write_team(rtws, {"dev": {}, "qa": {}}, provider="local", model="counting")
    (rtws / ".minds" / "llm.yaml").write_text(server.llm_yaml(), "utf-8")


def _store(database: str, monkeypatch: pytest.MonkeyPatch, rtws: Path) -> Store:
    monkeypatch.setenv(DATABASE_URL_ENV, database)
    return Store.for_rtws(rtws)


def test_a_recovered_drive_does_not_call_the_model_again_for_a_completed_step(
    rtws: Path, tmp_path: Path, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindloop.dialogs.runtime import DialogRuntime

    with ModelServer() as model:
        _project(rtws, model)
        procs = procs_on(rtws, tmp_path / "logs", database)
        store = _store(database, monkeypatch, rtws)
        try:
            # A dies right after its first model call answered: the turn is not committed.
            a = start_worker(procs, "A", env={"MINDLOOP_TEST_CRASH_AT": "generation.after:1"})
            root, _ = DialogRuntime(rtws, store=store).start_root_dialog(
                "tasks/example.tsk", "TASK 1"
            )
            assert procs.finish(a, TIMEOUT) == 86, tail(a)
            assert [c.last for c in model.snapshot() if c.completed] == ["TASK 1"]
            b = start_worker(procs, "B")
            wait_until(
                lambda: final_answer(store, root.id) == "done 1" and not store.tree_busy(root.id),
                TIMEOUT,
                "the root's final answer",
                interval=0.2,
            )
            b.popen.send_signal(signal.SIGTERM)  # a graceful stop
            assert procs.finish(b, TIMEOUT) == 0, tail(b)
        finally:
            procs.close()
            store.close()
        calls = model.snapshot()
    # dev asks qa, qa checks, dev answers: three steps, each called once — the first by A,
    # whose recorded answer B's recovered workflow used instead of calling again.
    assert model.repeated() == {}
    assert [c.worker for c in calls] == ["A", "B", "B"], [(c.worker, c.last) for c in calls]
    listed = {w["executor_id"]: w for w in workers_json(rtws, database)}
    store = _store(database, monkeypatch, rtws)
    try:
        rows = {w.pid: w for w in WorkerTable(store).all()}
        generations = store.generations(store.list_dialogs()[0].id)
    finally:
        store.close()
    a_row, b_row = rows[a.pid], rows[b.pid]
    assert a_row.recovered_by == b_row.executor_id  # taken over once, by B
    assert listed[a_row.executor_id]["state"] == f"taken over by {b_row.executor_id}"
    assert listed[b_row.executor_id]["state"] == "stopped"  # B stopped on SIGTERM
    assert [g.finish_reason for g in generations] == ["stop", "stop"]  # both dev turns kept
    # DBOS's records, in the same database, are JSON (no pickles): the workflows' inputs
    # and outputs, and one recorded step per model call, each under its key
    with psycopg.connect(database) as conn:
        formats = conn.execute("SELECT DISTINCT serialization FROM dbos.workflow_status")
        assert formats.fetchall() == [("portable_json",)]
        steps = conn.execute(
            "SELECT function_name, output FROM dbos.operation_outputs ORDER BY started_at_epoch_ms"
        ).fetchall()
    assert [name for name, _ in steps] == ["mindloop.generation"] * 3
    outputs = [json.loads(out) for _, out in steps]
    assert [o["value"]["text"].split()[0] for o in outputs] == ["!?@qa", "checked", "done"]
    assert len({o["key"] for o in outputs}) == 3


ROOTS = 200  # issue 15, part 4: 3 workers, 200 root dialogs with tellasks and questions
ASKS = range(0, ROOTS, 4)  # the roots that ask the human first
CALLS = 3 * ROOTS + len(ASKS)  # model calls when none is made twice


def test_three_workers_one_killed_every_dialog_answered_once(
    rtws: Path, tmp_path: Path, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindloop.dialogs.runtime import DialogRuntime

    # (a model's latency, short: the drives' own cost on two cores dominates anyway)
    with ModelServer(delay=0.05) as model:
        _project(rtws, model)
        procs = procs_on(rtws, tmp_path / "logs", database)
        store = _store(database, monkeypatch, rtws)
        try:
            # (a longer time to live: three workers beat on a loaded two-core machine)
            workers = [
                start_worker(procs, f"W{i}", "--concurrency", "10", ttl="6") for i in range(3)
            ]
            listed = workers_json(rtws, database)
            assert sorted(w["state"] for w in listed) == ["live"] * 3
            rt = DialogRuntime(rtws, store=store)
            roots = {}
            for n in range(ROOTS):
                text = f"TASK {n}" + (" ASK" if n in ASKS else "")
                rec, _ = rt.start_root_dialog("tasks/example.tsk", text)
                roots[n] = rec.id
            rt.wake.set()

            def completed(by: str | None = None) -> int:
                return sum(c.completed and by in (None, c.worker) for c in model.snapshot())

            # mid-way: a third of the work done, some of it by the worker to kill
            wait_until(
                lambda: completed() >= CALLS // 3 and completed("W1") >= 5,
                TIMEOUT,
                "a third of the model calls",
            )
            killed = workers[1]
            procs.kill(killed)

            def settled() -> bool:
                # the human answers (as `mindloop answer` does: recorded, the dialog marked)
                for q in store.open_questions():
                    rt.answer_question(q.id, f"answer {int(q.headline.split()[-1].rstrip('?'))}")
                if completed() < CALLS:  # (cheap: the store is read once the calls are in)
                    return False
                # (the killed worker may have had nothing pending: the others still take
                # it over once its heartbeat is older than its time to live)
                taken = next(w for w in WorkerTable(store).all() if w.pid == killed.pid)
                return (
                    taken.recovered_by is not None
                    and all(final_answer(store, roots[n]) == f"done {n}" for n in roots)
                    and not any(store.tree_busy(r) for r in roots.values())
                )

            wait_until(settled, TIMEOUT * 2, "every root's final answer", interval=0.5)
            live = [w for w in workers if w is not killed]
            for w in live:
                assert w.alive(), tail(w)
            rows = {w.pid: w for w in WorkerTable(store).all()}
            dialogs = store.list_dialogs()
            answers = {
                d.id: [
                    m.data.get("text") for m in store.load_history(d.id) if m.kind == "assistant"
                ]
                for d in dialogs
            }
            results = {
                d.id: [m for m in store.load_history(d.id) if m.kind == "tellask_result"]
                for d in dialogs
            }
        finally:
            procs.close()
            store.close()
        calls = model.snapshot()
    killed_row = rows[killed.pid]
    assert killed_row.recovered_by in {rows[w.pid].executor_id for w in live}
    # no dialog lost, none answered twice: each root one tellask result and one final answer
    for n, root in roots.items():
        assert answers[root].count(f"done {n}") == 1, answers[root]
        assert len(results[root]) == 1, results[root]
    qa = [d for d in dialogs if d.member == "qa"]
    assert len(qa) == ROOTS
    assert all(len(answers[d.id]) == 1 and answers[d.id][0].startswith("checked ") for d in qa)
    # every step called once, but the calls the killed worker made (it may have died
    # between an answer and its record)
    assert model.repeated(allowed_from={"W1"}) == {}
    assert {c.worker for c in calls if c.completed} >= {"W0", "W2"}


def test_a_worker_on_a_copy_of_the_rtws_is_refused(
    rtws: Path, tmp_path: Path, database: str
) -> None:
    with ModelServer() as model:
        _project(rtws, model)
        copy = tmp_path / "copy"
        shutil.copytree(rtws, copy)
        procs = procs_on(rtws, tmp_path / "logs", database)
        try:
            start_worker(procs, "A")
            other = Procs(copy, tmp_path / "logs2", env={DATABASE_URL_ENV: database})
            try:
                refused = other.start("worker", "--ttl", TTL, env={"LOCAL_MODEL_KEY": "X"})
                assert other.finish(refused, TIMEOUT) == 1
            finally:
                other.close()
            assert "not the same rtws" in refused.output(), tail(refused)
            # a changed configuration is told apart as well
            team = copy / ".minds" / "team.yaml"
            data = yaml.safe_load(team.read_text("utf-8"))
            data["members"]["ops"] = {}
            team.write_text(yaml.safe_dump(data), "utf-8")
            other = Procs(copy, tmp_path / "logs3", env={DATABASE_URL_ENV: database})
            try:
                refused = other.start("worker", "--ttl", TTL, env={"LOCAL_MODEL_KEY": "X"})
                assert other.finish(refused, TIMEOUT) == 1
            finally:
                other.close()
            assert "configuration differs" in refused.output(), tail(refused)
        finally:
            procs.close()


def test_worker_commands_need_a_database_url(rtws: Path) -> None:
    # (`run TASK` without a database URL runs the task's work loop in this process.)
    for args in (["worker"], ["workers"]):
        done = ml("-C", str(rtws), *args, env={DATABASE_URL_ENV: ""})
        assert done.returncode == 1
        assert "needs MINDLOOP_DATABASE_URL" in done.stdout + done.stderr
