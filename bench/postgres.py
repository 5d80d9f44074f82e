"""The scale-out benchmark (`bench/run.py --postgres`): the store on PostgreSQL and the
work spread over `mindloop worker` processes, on one PostgreSQL server the bench starts
(`mindloop.testing.postgres`, like the tests).

- **Per-step overhead, PostgreSQL beside SQLite**: scenario 1's drive (20 tool calls and
  an answer on a preloaded history, the zero-latency mock) in one process, on the default
  SQLite store and on a PostgreSQL database: µs per step and SQL statements per step.
- **Workers**: scenario 3 (many root dialogs, a fixed number of steps each) driven by 1, 2
  and 3 real worker processes (DBOS Transact on the same database), the model a loopback
  OpenAI-compatible server that answers each generation after a fixed latency
  (`model_server.py`), so the figures show how the work spreads rather than how fast this
  machine's cores are. Each worker takes at most `--concurrency` drives at once, so with a
  latency L the most it can do is `concurrency / L` steps per second: the table prints that
  bound beside what was measured, and the workers' CPU time per step (the runtime's own
  cost in distributed mode: the store on PostgreSQL, the DBOS queue and step records).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import TOOL_NAME, peak_rss_bytes
from bench.model_server import MODEL, ChainModel
from mindloop.store.location import DATABASE_URL_ENV

PG_URL_ENV = "MINDLOOP_BENCH_PG_URL"  # the bench's server (its `postgres` database)
READY_TIMEOUT = 120.0
ROUND_TIMEOUT = 900.0

TOOLS_PY = f'''"""The benchmark's one tool, as a Python tool of the rtws (the workers import it)."""

from mindloop.toolsets.python import tool


@tool
async def {TOOL_NAME}(n: int) -> str:
    """Does nothing and returns 'ok <n>' (benchmark tool).

    Args:
        n: The call's number.
    """
    return f"ok {{n}}"
'''


def new_database() -> str:
    from mindloop.testing.postgres import new_database as create

    base = os.environ.get(PG_URL_ENV)
    if not base:
        raise SystemExit(f"{PG_URL_ENV} is not set: run the PostgreSQL cases from bench/run.py")
    return create(base)


# ---------------------------------------------------------------------- per-step overhead


def per_step(history: int, runs: int, *, on_postgres: bool) -> dict[str, Any]:
    """Scenario 1 on one history size, on SQLite or on a fresh PostgreSQL database."""
    from bench import scenarios
    from mindloop.dialogs.runtime import DialogRuntime

    if on_postgres:
        os.environ[DATABASE_URL_ENV] = new_database()
    else:
        os.environ.pop(DATABASE_URL_ENV, None)

    async def main(root: Path) -> list[dict[str, float]]:
        rt = DialogRuntime(scenarios.make_rtws(root / "proj"), tools=scenarios.bench_registry())
        counter = scenarios.CommitCounter(rt.store)
        try:
            await scenarios._s1_run(rt, counter, history)  # warm-up
            return [await scenarios._s1_run(rt, counter, history) for _ in range(runs)]
        finally:
            await rt.aclose()

    with scenarios.scratch_dir() as root:
        samples = asyncio.run(main(root))
    cols = scenarios._columns(samples)
    return {
        "history": history,
        "step_us": cols["step_us"],
        "statements_per_step": cols["statements_per_step"],
        "peak_rss": peak_rss_bytes(),
    }


# ---------------------------------------------------------------------- workers


def worker_rtws(root: Path, llm_yaml: str) -> Path:
    """An rtws whose one member calls the tool chain on the loopback model."""
    from mindloop.rtws import init_rtws

    init_rtws(root, provider="mock")
    team = {
        "member_defaults": {"provider": "local", "model": MODEL},
        "default_responder": "dev",
        "python_tools": ["benchtools"],
        "members": {"dev": {"name": "Dev", "toolsets": ["benchtools"]}},
    }
    (root / ".minds" / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False), "utf-8")
    (root / ".minds" / "llm.yaml").write_text(llm_yaml, "utf-8")
    (root / "benchtools.py").write_text(TOOLS_PY, "utf-8")
    return root


class Fleet:
    """`count` worker processes on one rtws and database (a context manager)."""

    def __init__(self, rtws: Path, database: str, count: int, concurrency: int) -> None:
        self.rtws = rtws
        self.env = {
            **os.environ,
            DATABASE_URL_ENV: database,
            "LOCAL_MODEL_KEY": "bench",
            "PYTHONUNBUFFERED": "1",
        }
        self.count = count
        self.concurrency = concurrency
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def __enter__(self) -> Fleet:
        for i in range(self.count):
            log = self.rtws.parent / f"worker{i}.log"
            with log.open("wb") as fh:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "mindloop.cli.app", "-C", str(self.rtws),
                         "worker", "--concurrency", str(self.concurrency), "--ttl", "60"],
                        stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                        env=self.env,
                    )
                )  # fmt: skip
            self.logs.append(log)
        deadline = time.monotonic() + READY_TIMEOUT
        for proc, log in zip(self.procs, self.logs, strict=True):
            while " ready: " not in log.read_text("utf-8", "replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"a worker did not start:\n{log.read_text()[-2000:]}")
                time.sleep(0.05)
        return self

    def cpu_s(self) -> float:
        """CPU seconds the workers used so far (user and system)."""
        import psutil

        total = 0.0
        for proc in self.procs:
            t = psutil.Process(proc.pid).cpu_times()
            total += t.user + t.system
        return total

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _counts(database: str) -> tuple[int, int]:
    """(generations recorded, dialogs not settled) in the store."""
    import psycopg

    with psycopg.connect(database) as conn:
        gens = conn.execute("SELECT count(*) FROM generations").fetchone()
        busy = conn.execute(
            "SELECT count(*) FROM dialogs WHERE status <> 'idle' OR needs_drive"
        ).fetchone()
    assert gens is not None and busy is not None
    return int(gens[0]), int(busy[0])


def _round(
    rtws: Path, database: str, fleet: Fleet, dialogs: int, steps: int, before: int
) -> dict[str, float]:
    """Start `dialogs` roots at once (one transaction) and time the workers until every
    one answered after `steps` generations."""
    from bench import scenarios
    from mindloop.dialogs.runtime import DialogRuntime
    from mindloop.store import Store

    store = Store.for_rtws(rtws)
    rt = DialogRuntime(rtws, store=store)
    try:
        start = scenarios.chain_start(steps)
        cpu0 = fleet.cpu_s()
        t0 = time.perf_counter()
        with store.tx():
            for _ in range(dialogs):
                rt.start_root_dialog(scenarios.TASK, start, "dev")
        want = before + dialogs * steps
        deadline = time.monotonic() + ROUND_TIMEOUT
        while True:
            gens, busy = _counts(database)
            if gens >= want and not busy:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers: {gens}/{want} generations, {busy} busy dialogs")
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        cpu = fleet.cpu_s() - cpu0
    finally:
        asyncio.run(rt.aclose())
    if gens != want:
        raise RuntimeError(f"workers: {gens} generations, {want} expected (a step made twice?)")
    total = dialogs * steps
    return {
        "wall_s": wall,
        "steps_per_s": total / wall,
        "worker_cpu_ms_per_step": cpu / total * 1e3,
    }


def on_workers(
    workers: int, dialogs: int, steps: int, concurrency: int, latency: float, runs: int
) -> dict[str, Any]:
    """Scenario 3 on `workers` worker processes: a warm-up round, then `runs` rounds."""
    from bench import scenarios

    database = new_database()
    os.environ[DATABASE_URL_ENV] = database  # this process's store (it starts the roots)
    with tempfile.TemporaryDirectory(prefix="mindloop-bench-pg-") as tmp, ChainModel(latency) as m:
        rtws = worker_rtws(Path(tmp) / "proj", m.llm_yaml())
        samples = []
        with Fleet(rtws, database, workers, concurrency) as fleet:
            done = 0
            for i in range(runs + 1):
                sample = _round(rtws, database, fleet, dialogs, steps, done)
                done += dialogs * steps
                if i:
                    samples.append(sample)
        served = m.requests
    if served != done:
        raise RuntimeError(f"the model served {served} generations for {done} steps")
    return {
        "workers": workers,
        "samples": scenarios._columns(samples),
        "bound_steps_per_s": workers * concurrency / latency,
    }
