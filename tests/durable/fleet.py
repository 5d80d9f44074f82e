"""Helpers of the scale-out tests: real `mindloop worker` processes on a test database."""

from __future__ import annotations

import json
from pathlib import Path

from mindloop.store import Store
from mindloop.store.location import DATABASE_URL_ENV
from tests.dialogs.procs import Proc, Procs, tail, wait_until
from tests.scenario_util import ml

TIMEOUT = 150.0  # generous: a loaded 2-core machine, several Python processes
TTL = "3"  # seconds: a silent worker is taken over after this long


def procs_on(rtws: Path, logs: Path, database: str) -> Procs:
    return Procs(rtws, logs, env={DATABASE_URL_ENV: database})


def start_worker(
    procs: Procs, name: str, *extra: str, env: dict[str, str] | None = None, ttl: str = TTL
) -> Proc:
    """A worker (its model API key is its name, for a model that tells workers apart),
    once it said it is ready."""
    env = {"LOCAL_MODEL_KEY": name, **(env or {})}
    proc = procs.start("worker", "--ttl", ttl, *extra, env=env)
    wait_until(lambda: _ready(proc), TIMEOUT, f"worker {name} to be ready")
    return proc


def _ready(proc: Proc) -> bool:
    assert proc.alive(), f"the worker ended before it was ready\n{tail(proc)}"
    return " ready: " in proc.output()


def workers_json(rtws: Path, database: str) -> list[dict[str, object]]:
    done = ml("-C", str(rtws), "workers", "--all", "--json", env={DATABASE_URL_ENV: database})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def final_answer(store: Store, dialog_id: str) -> str | None:
    msgs = [m for m in store.load_history(dialog_id) if m.kind == "assistant"]
    return str(msgs[-1].data.get("text", "")).strip() if msgs else None
