"""`mindloop workers` as a user reads it: what it says when there are none (live, or at
all with `--all`), and what each live worker drives now — the dialog a slow model call
holds — in its text line and in its `--json` `driving` list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mindloop.demo import DEMO_PROMPT, DEMO_TASK, prepare_demo_rtws
from mindloop.store import Store
from mindloop.store import loop_state as ls
from mindloop.store.location import DATABASE_URL_ENV
from tests import pg
from tests.dialogs.procs import wait_until
from tests.durable.fleet import TIMEOUT, procs_on, start_worker
from tests.scenario_util import ml

DELAY_MS = 3000  # each model call: long enough to be seen in flight


def _workers(rtws: Path, database: str, *args: str) -> str:
    done = ml("-C", str(rtws), "workers", *args, env={DATABASE_URL_ENV: database})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_workers_says_none_and_shows_what_a_worker_drives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = pg.server().database_url()
    demo = prepare_demo_rtws(tmp_path / "demo")
    script = demo / ".minds" / "mock" / "mock-model.yaml"
    data = yaml.safe_load(script.read_text("utf-8"))
    for entry in data["responses"]:
        entry["delay_ms"] = DELAY_MS
    script.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), "utf-8")
    assert _workers(demo, database).strip() == "no live workers (--all shows stopped ones)"
    assert _workers(demo, database, "--all").strip() == "no workers"
    monkeypatch.setenv(DATABASE_URL_ENV, database)
    procs = procs_on(demo, tmp_path / "logs", database)
    store = Store.for_rtws(demo)
    try:
        start_worker(procs, "W0")
        procs.start("run", DEMO_TASK, "-m", DEMO_PROMPT)
        state = wait_until(lambda: ls.get(store, DEMO_TASK), TIMEOUT, "the task's loop root")
        root = state.root_id

        def driving_root() -> tuple[dict[str, object], str] | None:
            [row] = json.loads(_workers(demo, database, "--json"))
            text = _workers(demo, database)
            if row["driving"] == [root] and f"driving 1: {root}" in text:
                return row, text
            return None

        row, text = wait_until(driving_root, TIMEOUT, "the worker driving the loop root")
    finally:
        procs.close()
        store.close()
    assert row["state"] == "live"
    [line] = text.strip().splitlines()
    assert line.startswith(f"{row['executor_id']}  live  ") and "concurrency " in line
