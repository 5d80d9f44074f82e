"""When the workspace's files are written: after each commit, or coalesced.

A commit stages what it touched (`stage`, inside its transaction: `projection.Dirty`);
once it commits, the staged files are written at once, unless a `coalescing(store)` scope
is open on that store (a work loop's run: a node takes several commits in a few
milliseconds, and a file costs about 0.1 ms to replace atomically). Then a task's files
are written by a timer on the running event loop `INTERVAL` seconds after the first
commit that staged them (so they lag the store by at most that: every commit of the
interval is in one write), and always when the scope ends; whatever is still pending
when the process exits is written then. A crash loses at most the last interval's
writes, which `mindloop run` rewrites from the store at its start (the files are derived
views, see `projection.py`).

Staged but not committed (a transaction rolled back) stays staged and is written with the
task's next commit: more files rendered than needed, never fewer. A timer that fires
while a transaction is open on the store writes after it commits (`Store.after_commit`),
so no file ever shows uncommitted rows.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mindloop.store import Store
from mindloop.workspace.commands import Change
from mindloop.workspace.per_store import PerStore
from mindloop.workspace.projection import Dirty, write_changed

log = logging.getLogger(__name__)

INTERVAL = 1.0  # seconds a task's files may lag the store while coalescing


@dataclass
class _Task:
    """One task's files in one store: what is staged, what waits to be written."""

    rtws: Path
    task: str
    staged: Dirty = field(default_factory=Dirty)
    pending: Dirty = field(default_factory=Dirty)
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Store:
    depth: int = 0  # open `coalescing` scopes
    tasks: dict[tuple[str, str], _Task] = field(default_factory=dict)  # by (rtws, task)


_stores = PerStore(_Store)


def stage(store: Store, rtws: Path, change: Change) -> None:
    """Note what `change` touched (in its transaction); write it once that commits."""
    task = change.after.task
    entry = _stores.of(store)
    key = (str(rtws), task)  # a str: hashed at every commit, a Path's hash is dear
    slot = entry.tasks.get(key)
    if slot is None:
        slot = entry.tasks[key] = _Task(Path(rtws), task)
    slot.staged.add(change)
    store.after_commit(f"workspace:{task}", lambda: _committed(store, entry, slot))


def _committed(store: Store, entry: _Store, slot: _Task) -> None:
    slot.pending.merge(slot.staged)
    slot.staged = Dirty()
    if not entry.depth:
        _write(store, slot)
    elif slot.timer is None:
        with contextlib.suppress(RuntimeError):  # no running loop: the scope's end writes
            loop = asyncio.get_running_loop()
            slot.timer = loop.call_later(INTERVAL, _due, weakref.ref(store), slot)


def _due(ref: weakref.ref[Store], slot: _Task) -> None:
    slot.timer = None
    store = ref()
    if store is not None:
        store.after_commit(f"workspace-due:{slot.task}", lambda: _write(store, slot))


def _write(store: Store, slot: _Task) -> None:
    if slot.timer is not None:
        slot.timer.cancel()
        slot.timer = None
    dirty, slot.pending = slot.pending, Dirty()
    if dirty:
        try:
            write_changed(store, slot.rtws, slot.task, dirty)
        except Exception:
            log.exception("writing the workspace files of %s failed (the store has it)", slot.task)


def flush(store: Store | None = None) -> None:
    """Write what waits to be written now (of `store`, or of every store)."""
    for s, entry in _stores.items() if store is None else [(store, _stores.get(store))]:
        if entry is None:
            continue
        for slot in list(entry.tasks.values()):
            if slot.pending or slot.timer is not None:
                _write(s, slot)


@contextlib.contextmanager
def coalescing(store: Store) -> Iterator[None]:
    """Within the block, write the store's workspace files at most every `INTERVAL`
    seconds per task; at its end, write what is pending."""
    entry = _stores.of(store)
    entry.depth += 1
    try:
        yield
    finally:
        entry.depth -= 1
        flush(store)


atexit.register(flush)
