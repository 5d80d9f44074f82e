"""Processes racing each other on one state database (run by `multiprocessing` from the
store's tests; a module of its own so that spawned processes can import it)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from mindloop.store import DialogRecord, Store
from mindloop.store.postgres import PostgresDialect


def open_at(db: str) -> Store:
    """The store at `db`: a SQLite file, or a PostgreSQL URL."""
    if db.startswith("postgresql://"):
        return Store(Path("state"), dialect=PostgresDialect(db))
    return Store(db)


def race(db: str, owner: str, ids: list[str], seed: int, start: Any, results: Any) -> None:
    """Wait for the start, try to claim every dialog (in an order of its own), then try
    all again; report (owner, taken in the first pass, taken in the second)."""
    store = open_at(db)
    order = list(ids)
    random.Random(seed).shuffle(order)
    start.wait()
    first = [d for d in order if store.claim_dialog(d, owner, 300.0)]
    second = [d for d in order if store.claim_dialog(d, owner, 300.0)]
    store.close()
    results.put((owner, first, second))


def renew(db: str, owner: str, ids: list[str], results: Any) -> None:
    """Report which of `owner`'s claims it can still renew."""
    store = open_at(db)
    results.put([d for d in ids if store.renew_claim(d, owner, 300.0)])
    store.close()


def first_start(rtws: str, owner: str, start: Any, results: Any) -> None:
    """Open the store of an rtws that has none yet, together with other processes, and
    record a dialog; report the schema version seen."""
    start.wait()
    store = Store.for_rtws(Path(rtws))
    store.create_dialog(DialogRecord(id=owner, root_id=owner, member="m", task_path="t"))
    results.put(store.schema_version())
    store.close()


def first_start_at(db: str, owner: str, start: Any, results: Any) -> None:
    """`first_start` on a database URL: open a new database together with others."""
    start.wait()
    store = open_at(db)
    store.create_dialog(DialogRecord(id=owner, root_id=owner, member="m", task_path="t"))
    results.put(store.schema_version())
    store.close()
