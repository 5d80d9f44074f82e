"""The scale-out workers' table: who runs, when each was last heard from, and who took over
the work of one that went silent.

A worker (`mindloop worker`, `durable/worker.py`) registers with its DBOS executor id and
beats every quarter of its time to live. A worker not heard from for its time to live (or
one that stopped) is taken over by exactly one live worker: a conditional update sets
`recovered_by` once, and only the worker whose update changed the row hands the silent
one's workflows to DBOS's recovery. A worker that finds its own row taken over stops: its
work belongs to another now (its claims have expired, so its commits would fail anyway).
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from mindloop.store import schema as t
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store

_w, _d = t.workers.c, t.dialogs.c

INSERT_WORKER = sa.insert(t.workers)
HEARTBEAT = (
    sa.update(t.workers)
    .where(_w.executor_id == sa.bindparam("_id"), _w.recovered_by.is_(None))
    .values(heartbeat_at=sa.bindparam("_now"))
)
STOP = (
    sa.update(t.workers)
    .where(_w.executor_id == sa.bindparam("_id"))
    .values(stopped_at=sa.bindparam("_now"))
)
ALL_WORKERS = sa.select(t.workers).order_by(_w.started_at, _w.executor_id)
# Silent (not heard from for its time to live) or stopped, and nobody took it over yet.
_gone = sa.or_(
    _w.stopped_at.is_not(None), _w.heartbeat_at + _w.ttl < sa.bindparam("_now", type_=sa.Float)
)
GONE = sa.select(t.workers).where(_gone, _w.recovered_by.is_(None)).order_by(_w.heartbeat_at)
TAKE_OVER = (
    sa.update(t.workers)
    .where(_w.executor_id == sa.bindparam("_id"), _w.recovered_by.is_(None), _gone)
    .values(recovered_by=sa.bindparam("_by"), recovered_at=sa.bindparam("_now"))
)
# A taken-over worker's claims end now: its dialogs are driven again at once.
EXPIRE_CLAIMS_OF = (
    sa.update(t.dialogs).where(_d.claim_owner == sa.bindparam("_owner")).values(claim_expires=0.0)
)
DRIVING = sa.select(_d.claim_owner, _d.id).where(
    _d.status == "running", _d.claim_owner.is_not(None)
)


class WorkerRecord(BaseModel):
    executor_id: str
    host: str
    pid: int
    rtws: str
    fingerprint: str
    concurrency: int
    claim_owner: str
    ttl: float
    started_at: float
    heartbeat_at: float
    stopped_at: float | None = None
    recovered_by: str | None = None
    recovered_at: float | None = None

    def alive(self, now: float) -> bool:
        """Heard from within its time to live, not stopped, not taken over."""
        return (
            self.stopped_at is None
            and self.recovered_by is None
            and self.heartbeat_at + self.ttl >= now
        )


class WorkerTable:
    """The workers' rows of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def register(self, rec: WorkerRecord) -> WorkerRecord:
        self.store._write(INSERT_WORKER, rec.model_dump())
        return rec

    def beat(self, executor_id: str, now: float | None = None) -> bool:
        """Record that the worker lives; False if another worker took it over."""
        params = {"_id": executor_id, "_now": time.time() if now is None else now}
        with self.store.tx(durable=False):
            return self.store._write(HEARTBEAT, params) == 1

    def stop(self, executor_id: str) -> None:
        self.store._write(STOP, {"_id": executor_id, "_now": time.time()})

    def all(self) -> list[WorkerRecord]:
        return self.store._records(WorkerRecord, ALL_WORKERS)

    def live(self, now: float | None = None) -> list[WorkerRecord]:
        """Workers heard from within their time to live, not stopped, not taken over."""
        at = time.time() if now is None else now
        return [w for w in self.all() if w.alive(at)]

    def gone(self, now: float | None = None) -> list[WorkerRecord]:
        """Workers silent past their time to live (or stopped) that nobody took over."""
        params = {"_now": time.time() if now is None else now}
        return self.store._records(WorkerRecord, GONE, params)

    def take_over(self, gone: WorkerRecord, by: str, now: float | None = None) -> bool:
        """Take over a gone worker's work, once across all workers: whether this call did.
        Its claims expire in the same transaction (its dialogs may be driven at once)."""
        params: dict[str, Any] = {
            "_id": gone.executor_id,
            "_by": by,
            "_now": time.time() if now is None else now,
        }
        with self.store.tx():
            if self.store._write(TAKE_OVER, params) != 1:
                return False
            self.store._write(EXPIRE_CLAIMS_OF, {"_owner": gone.claim_owner})
        return True

    def driving(self) -> dict[str, list[str]]:
        """Dialogs being driven now, by claim owner."""
        out: dict[str, list[str]] = {}
        for owner, did in self.store._rows(DRIVING):
            out.setdefault(owner, []).append(did)
        return out


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
