"""A worker's heartbeat keeps its own cadence: a pass of the dispatch loop that takes
longer than the worker's time to live (many drives to enqueue on a loaded machine) does
not make a live worker look silent, so no other worker takes it over. (On the store's
worker table alone: no DBOS, no PostgreSQL.)"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mindloop.durable.worker import Worker
from mindloop.store import Store
from mindloop.store.workers import WorkerRecord, WorkerTable

TTL = 0.8


class SlowPass(Worker):
    """A worker whose dispatch pass takes three times its time to live."""

    async def _dispatch(self, stop: asyncio.Event, lost: asyncio.Event) -> str:
        ages = []
        end = time.monotonic() + 3 * TTL
        while time.monotonic() < end:  # one long pass: the heartbeat must go on meanwhile
            await asyncio.sleep(TTL / 8)
            [me] = [w for w in self.table.all() if w.executor_id == self.executor_id]
            ages.append(time.time() - me.heartbeat_at)
        self.ages = ages
        return "stopped"


def _register(table: WorkerTable, worker: Worker, rtws: Path) -> None:
    now = time.time()
    table.register(
        WorkerRecord(
            executor_id=worker.executor_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            rtws=str(rtws),
            fingerprint=worker.fingerprint,
            concurrency=1,
            claim_owner="test",
            ttl=TTL,
            started_at=now,
            heartbeat_at=now,
        )
    )


def test_a_dispatch_pass_longer_than_the_ttl_does_not_silence_the_worker(rtws: Path) -> None:
    store = Store.for_rtws(rtws)
    try:
        engine: Any = SimpleNamespace(wake=asyncio.Event())
        worker = SlowPass(rtws, engine, store, "sqlite://", concurrency=1, ttl=TTL)
        table = WorkerTable(store)
        _register(table, worker, rtws)

        async def main() -> str:
            return await worker._loop(asyncio.Event())

        assert asyncio.run(main()) == "stopped"
        # beaten every quarter of the ttl all along: never older than the ttl, so never
        # among the workers another one takes over
        assert max(worker.ages) < TTL, worker.ages
        assert worker.executor_id not in {w.executor_id for w in table.gone()}
    finally:
        store.close()
