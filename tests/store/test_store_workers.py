"""The scale-out workers' table, on every dialect: a worker is alive while it beats,
silent or stopped workers are taken over by exactly one other, whose takeover ends their
claims; a taken-over worker can no longer beat."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.store import DialogRecord, Store
from mindloop.store.workers import WorkerRecord, WorkerTable
from tests.store.stores import KINDS, open_store

T0 = 1_000_000.0
TTL = 10.0


@pytest.fixture(params=KINDS)
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    s = open_store(tmp_path / ".mindloop" / "state.sqlite", request.param)
    yield s
    s.close()


def _worker(table: WorkerTable, eid: str, at: float = T0) -> WorkerRecord:
    return table.register(
        WorkerRecord(
            executor_id=eid,
            host="h",
            pid=1,
            rtws="/shared/p",
            fingerprint="f",
            concurrency=4,
            claim_owner=f"owner-{eid}",
            ttl=TTL,
            started_at=at,
            heartbeat_at=at,
        )
    )


def test_a_silent_worker_is_taken_over_once_and_its_claims_end(store: Store) -> None:
    table = WorkerTable(store)
    a, b, _ = (_worker(table, e) for e in ("a", "b", "c"))
    store.create_dialog(DialogRecord(id="d", root_id="d", member="m", task_path="t"))
    assert store.claim_dialog("d", a.claim_owner, 600, now=T0)
    assert table.driving() == {a.claim_owner: ["d"]}
    assert table.beat("b", now=T0 + 8) and table.beat("c", now=T0 + 8)
    assert table.gone(now=T0 + 9) == []  # everyone heard from within the time to live
    gone = table.gone(now=T0 + TTL + 1)
    assert [w.executor_id for w in gone] == ["a"]
    alive = [w.executor_id for w in table.all() if w.alive(T0 + TTL + 1)]
    assert alive == ["b", "c"]
    # b and c both see a gone: exactly one takes it over
    assert table.take_over(gone[0], "b", now=T0 + TTL + 1)
    assert not table.take_over(gone[0], "c", now=T0 + TTL + 1)
    assert table.gone(now=T0 + TTL + 1) == []
    assert store.get_dialog("d").claim_expires == 0.0  # its dialog may be driven at once
    assert store.claim_dialog("d", b.claim_owner, 600, now=T0 + TTL + 1)
    assert not table.beat("a", now=T0 + TTL + 2)  # a came back: it was taken over
    [row] = [w for w in table.all() if w.executor_id == "a"]
    assert (row.recovered_by, row.alive(T0 + TTL + 2)) == ("b", False)


def test_a_stopped_worker_is_gone_at_once(store: Store) -> None:
    table = WorkerTable(store)
    _worker(table, "a")
    table.stop("a")
    assert [w.executor_id for w in table.gone(now=T0 + 1)] == ["a"]
    [row] = table.all()
    assert not row.alive(T0 + 1)
