"""The backend loop: drives every dialog that needs a drive, many concurrently.

One drive at a time per dialog (the runtime's per-dialog lock, and the scheduler never
starts a second task for a dialog it is driving); a dialog waiting on side dialogs or on
the human is not driven. Provider concurrency is limited by the provider pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection

from mindloop.dialogs.runtime import DialogRuntime, DriveResult


class Scheduler:
    def __init__(self, runtime: DialogRuntime, *, max_concurrent_drives: int = 1000) -> None:
        self.rt = runtime
        self.max_concurrent = max_concurrent_drives
        self.results: list[DriveResult] = []
        self.errors: list[BaseException] = []

    def drivable(self, exclude: Collection[str]) -> list[str]:
        """Dialogs to start driving now (the store parks those that wait on others)."""
        return [did for did in self.rt.store.drivable_dialogs() if did not in exclude]

    async def run(
        self,
        *,
        watch: bool = False,
        poll_interval: float = 0.5,
        stop: Callable[[], bool] | None = None,
    ) -> list[DriveResult]:
        """Drive until nothing is drivable and nothing runs (or forever with `watch`,
        polling the store for work written by other processes, e.g. `mindloop answer`)."""
        running: dict[str, asyncio.Task[DriveResult]] = {}
        broken: set[str] = set()  # dialogs whose drive raised (a bug, or a dead store)
        try:
            while True:
                self.rt.wake.clear()
                room = self.max_concurrent - len(running)
                for did in self.drivable(running.keys() | broken)[: max(0, room)]:
                    running[did] = asyncio.create_task(self.rt.drive(did), name=f"drive:{did}")
                if stop is not None and stop():
                    break
                if not running:
                    if not watch:
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.rt.wake.wait(), poll_interval)
                    continue
                waker = asyncio.ensure_future(self.rt.wake.wait())
                done, _ = await asyncio.wait(
                    [*running.values(), waker], return_when=asyncio.FIRST_COMPLETED
                )
                waker.cancel()
                for did, task in list(running.items()):
                    if task in done:
                        del running[did]
                        exc = task.exception()
                        if exc is not None:
                            self.errors.append(exc)
                            broken.add(did)  # not again in this run: it would fail alike
                        else:
                            self.results.append(task.result())
        finally:
            for task in running.values():
                task.cancel()
            if running:
                await asyncio.gather(*running.values(), return_exceptions=True)
        return self.results
