"""`mindloop run TASK` on a live worker reports as a local run does: its `--json` summary
carries the local summary's keys (and says where the state is: the database), and
`--max-steps N` reaches the drives of the task's tree on the workers (carried in the
`mindloop.loop` workflow's input), a drive stopped at it reported with exit 3 and the
step-limit line.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import sqlalchemy as sa

from mindloop.demo import DEMO_PROMPT, DEMO_TASK, prepare_demo_rtws
from mindloop.store.location import DATABASE_URL_ENV
from tests import pg
from tests.dialogs.procs import tail, wait_until
from tests.durable.fleet import TIMEOUT, procs_on, start_worker
from tests.durable.test_demo_on_workers import _settle_open
from tests.scenario_util import ml

# Long: the worker is paused (SIGSTOP) for a moment and must still count as live.
WORKER_TTL = "30"


@pytest.fixture
def database() -> str:
    return pg.server().database_url()


def _local_summary_keys(tmp_path: Path) -> set[str]:
    """The top-level keys of a local `run TASK -m … --json` (the calling process drives)."""
    local = prepare_demo_rtws(tmp_path / "local")
    done = ml("-C", str(local), "run", DEMO_TASK, "-m", DEMO_PROMPT, "--json")
    assert done.returncode == 4, done.stdout + done.stderr
    return set(json.loads(done.stdout))


def test_run_on_a_worker_reports_as_a_local_run_and_takes_max_steps(
    tmp_path: Path, database: str
) -> None:
    local_keys = _local_summary_keys(tmp_path)
    demo = prepare_demo_rtws(tmp_path / "demo")
    procs = procs_on(demo, tmp_path / "logs", database)
    env = {DATABASE_URL_ENV: database}
    try:
        worker = start_worker(procs, "W0", ttl=WORKER_TTL)
        first = ml("-C", str(demo), "run", DEMO_TASK, "-m", DEMO_PROMPT, "--json", env=env)
        assert first.returncode == 4, first.stdout + first.stderr  # the PLAN question
        doc = json.loads(first.stdout)  # one JSON document, nothing else on stdout
        assert local_keys <= set(doc), local_keys - set(doc)
        assert doc["outcome"] == "waiting" and doc["exit_code"] == 4
        assert doc["workflow_id"].startswith("loop-") and doc["report"]["questions"]
        assert doc["state_file"] == sa.make_url(database).render_as_string(hide_password=True)
        # The question answered while the worker is paused: the run below enqueues the
        # loop (with its limit) before the worker can enqueue one of its own.
        os.kill(worker.pid, signal.SIGSTOP)
        try:
            assert _settle_open(demo, database) == (1, 0)
            run = procs.start("run", DEMO_TASK, "--max-steps", "1")
            wait_until(
                lambda: "its loop is queued for the workers" in run.output(),
                TIMEOUT,
                "the loop enqueued by `run`",
                interval=0.1,
            )
        finally:
            os.kill(worker.pid, signal.SIGCONT)
        code = procs.finish(run, TIMEOUT)
        assert worker.alive(), tail(worker)
    finally:
        procs.close()
    out = run.output()
    assert code == 3, out  # a drive of the tree stopped at the step limit, as locally
    assert "already under way" not in out, out
    assert "stopped at the step limit (1); drive it on with" in out, out
    assert "state.sqlite" not in out


def _drives_of(database: str, dialog_id: str) -> list[str]:
    """The `mindloop.drive` workflows of one dialog, oldest first."""
    import psycopg

    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT workflow_uuid FROM dbos.workflow_status WHERE name = %s "
            "AND workflow_uuid LIKE %s ORDER BY created_at",
            ("mindloop.drive", f"drive-{dialog_id}-%"),
        ).fetchall()
    return [str(w) for (w,) in rows]


def test_drives_after_an_answer_keep_the_step_limit_of_the_tasks_run(
    tmp_path: Path, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run TASK --max-steps 1` stops at the PLAN question (its loop's workflow ends);
    the answer, given while a worker is live, lets the worker enqueue the loop again and
    the drives of its tree: they take the limit of the task's run, not the workers'
    default. The reviewer's node takes two model steps (write, reply): with the run's
    limit its drive stops at the step limit after one."""
    from mindloop.durable.client import FleetClient
    from mindloop.store import Store

    demo = prepare_demo_rtws(tmp_path / "demo")
    procs = procs_on(demo, tmp_path / "logs", database)
    env = {DATABASE_URL_ENV: database}
    monkeypatch.setenv(DATABASE_URL_ENV, database)
    store = Store.for_rtws(demo)
    client = FleetClient(database)
    try:
        start_worker(procs, "W0", ttl=WORKER_TTL)
        first = ml(
            "-C", str(demo), "run", DEMO_TASK, "-m", DEMO_PROMPT, "--max-steps", "1", env=env
        )
        assert first.returncode == 4, first.stdout + first.stderr  # the PLAN question
        assert _settle_open(demo, database) == (1, 0)  # the worker drives it on

        def reviewer_drive_ended() -> tuple[str, dict[str, object]] | None:
            for d in store.list_dialogs():
                if d.member != "reviewer":
                    continue
                for wid in _drives_of(database, d.id):
                    st = client.state(wid)
                    if st.ended and st.output is not None:
                        return wid, st.output
            return None

        wid, output = wait_until(
            reviewer_drive_ended, TIMEOUT, "the reviewer's first drive to end", interval=0.2
        )
        limit = client.max_steps(wid)
    finally:
        procs.close()
        client.close()
        store.close()
    assert limit == 1, output
    assert output["reason"] == "step_limit" and output["steps"] == 1, output
