"""Building many long-lived objects at once without the cyclic garbage collector.

A drive's start loads a whole course of a dialog (2,000 messages: several thousand new
container objects, rows and then messages). Every 700 net allocations of such objects
trigger a young-generation collection, every tenth of those an older one, and now and
then a full collection of the whole heap, which then lands inside the load: measured in
the benchmark's process, 23–48 ms full collections inside a 6 ms load. What a load builds
is kept (it holds no garbage cycles), so collecting meanwhile finds nothing. Pausing the
collector while building and resuming it afterwards leaves one young collection in place
of about eight, which makes the older and full ones that many times rarer (Mercurial's
`util.nogc` does the same when it builds large structures).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (left as it was if already off)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
