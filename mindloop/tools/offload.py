"""Blocking work a tool does on the event loop's behalf: inline when it has been quick,
in a worker thread otherwise.

A worker thread keeps a long call (a walk of a big tree, a `git` process) from stalling
the other dialogs and the claims' heartbeats, but it costs a handoff: the call queued,
the worker woken, the GIL passed there and back, the loop woken. For a call that takes
less (the workspace ref of a small tree: a few `stat`s) that handoff is most of the cost,
on every transition to COMPLETE or DONE. So each kind of call, by key, remembers how long
its last run took: under `INLINE_S` the next run is inline; otherwise (and the first time,
when nothing is known) it runs in a thread, and a threaded run that was quick brings the
key back inline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")

# Longer than a thread's handoff, shorter than anything worth keeping off the loop.
INLINE_S = 0.002
_KEYS_KEPT = 1024

_last: dict[Hashable, float] = {}


def _timed(key: Hashable, fn: Callable[[], T]) -> T:
    t0 = time.perf_counter()
    try:
        return fn()
    finally:
        if len(_last) >= _KEYS_KEPT and key not in _last:
            _last.clear()
        _last[key] = time.perf_counter() - t0


async def run_blocking(key: Hashable, fn: Callable[[], T]) -> T:
    """`fn()`, inline if the last run under `key` took less than `INLINE_S`, else in a
    worker thread (`asyncio.to_thread`)."""
    last = _last.get(key)
    if last is not None and last < INLINE_S:
        return _timed(key, fn)
    return await asyncio.to_thread(_timed, key, fn)


def last_duration(key: Hashable) -> float | None:
    """How long the last run under `key` took (None: none yet)."""
    return _last.get(key)
