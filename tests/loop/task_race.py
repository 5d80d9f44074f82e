"""Processes asking for the same task's loop root at once (run by `multiprocessing` from
the loop's tests; a module of its own so that spawned processes can import it)."""

from __future__ import annotations

import asyncio
from typing import Any

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop.tasks import loop_root, post_to_task


def race(rtws: str, task: str, text: str | None, start: Any, results: Any) -> None:
    """Wait for the start, then get (or create) the task's loop root — and post `text` to
    it, if given; report the task row's id and root."""
    rt = DialogRuntime(rtws)
    try:
        start.wait()
        if text is None:
            got = loop_root(rt, task)
        else:
            got, _ = post_to_task(rt, task, text)
        results.put((got.id, got.root_id))
    finally:
        asyncio.run(rt.aclose())
