"""The backend loop: drives every dialog that needs a drive, many concurrently.

A run that follows one tree (`root_id`, what `chat` does) drives only that tree's
dialogs. One drive at a time per dialog: in this process the scheduler never starts a second task
for a dialog it is driving, and across processes a dialog another live process holds the
claim of is neither selected nor waited for. A dialog waiting on side dialogs, the human
or a wait record is not driven. Starting a run first recovers what a dead process left
running (and `watch` keeps recovering, as claims of dead processes expire). Provider
concurrency is limited by the provider pool.

Tickers are work a run does beside the drives, on the run's own clock (the outbox
dispatcher, `loop.kb.KbDispatcher`): the run asks each for its next due time only at the
poll interval (never per step) and once more before a run without `watch` ends, and
ticks it when that time has come. A run without tickers does nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from mindloop.dialogs.runtime import DialogRuntime, DriveEnd, DriveResult

# How many recent drive results a watching run keeps (its memory must not grow with the
# number of dialogs it ever drove).
KEEP_WATCHED = 1000
TICKER_RETRY = 5.0  # seconds before a ticker that raised is ticked again


class Ticker(Protocol):
    """Periodic work of a run (see the module doc)."""

    def next_due(self) -> float | None:
        """When it next has work (epoch seconds), None when it has none; may read the
        store (it is asked at the poll interval, not per step)."""
        ...

    def tick(self, now: float) -> bool:
        """Do the work due at `now`; True when a dialog may have become drivable."""
        ...


class Scheduler:
    def __init__(
        self,
        runtime: DialogRuntime,
        *,
        max_concurrent_drives: int = 1000,
        root_id: str | None = None,
        tickers: Sequence[Ticker] = (),
    ) -> None:
        self.rt = runtime
        self.tickers = list(tickers)
        self.max_concurrent = max_concurrent_drives
        # Drive only this tree's dialogs (a run that follows one tree and ends when it
        # settles would otherwise cut off the drives it started in other trees).
        self.root_id = root_id
        self.results: list[DriveResult] = []
        self.errors: list[BaseException] = []
        self.resumed: list[str] = []  # dialogs recovery marked to drive again
        self.drives = 0  # drives that ended (the results of a long watch are trimmed)

    def drivable(self, exclude: Collection[str]) -> list[str]:
        """Dialogs to start driving now (the store parks those that wait on others and
        leaves out those another live process holds)."""
        ids = self.rt.store.drivable_dialogs(self.rt.claims.owner)
        if self.root_id is not None:
            tree = {d.id for d in self.rt.store.list_dialogs(root_id=self.root_id)}
            ids = [did for did in ids if did in tree]
        return [did for did in ids if did not in exclude]

    async def run(
        self,
        *,
        watch: bool = False,
        poll_interval: float = 0.5,
        stop: Callable[[], bool] | None = None,
    ) -> list[DriveResult]:
        """Drive until nothing is drivable and nothing runs (or forever with `watch`,
        polling the store for work written by other processes, e.g. `mindloop answer`).

        Timer waits fire here: the run keeps the next due time and sleeps until it (or
        until woken), rereading it only when a wait was opened in this process or at the
        poll interval (waits other processes opened), never on every loop. Without
        `watch`, a run fires what is due but does not stay for later timers."""
        running: dict[str, asyncio.Task[DriveResult]] = {}
        broken: set[str] = set()  # dialogs whose drive raised (a bug, or a dead store)
        waits = self.rt.waits
        self.resumed += self.rt.recover()
        recovery_due = time.monotonic() + self.rt.claims.ttl / 2
        next_due = waits.next_due()
        ticks = self._ticker_dues()
        reread_due = time.monotonic() + poll_interval
        try:
            while True:
                self.rt.wake.clear()
                if watch and time.monotonic() >= recovery_due:  # owners may have died
                    self.resumed += self.rt.recover()
                    recovery_due = time.monotonic() + self.rt.claims.ttl / 2
                if waits.changed or time.monotonic() >= reread_due:
                    waits.changed = False
                    next_due = waits.next_due()
                    ticks = self._ticker_dues()
                    reread_due = time.monotonic() + poll_interval
                if next_due is not None and next_due <= time.time():
                    waits.fire_due()
                    next_due = waits.next_due()
                ticks = self._tick_due(ticks)
                room = self.max_concurrent - len(running)
                for did in self.drivable(running.keys() | broken)[: max(0, room)]:
                    running[did] = asyncio.create_task(self.rt.drive(did), name=f"drive:{did}")
                if stop is not None and stop():
                    break
                soonest = min((d for d in (next_due, *ticks) if d is not None), default=None)
                until_due = None if soonest is None else max(0.0, soonest - time.time())
                if not running:
                    if not watch:
                        # Before ending: what the tickers have due now (a request a last
                        # step queued) may give this run more to drive.
                        if self.tickers:
                            ticks = self._tick_due(self._ticker_dues())
                            if self.drivable(running.keys() | broken):
                                continue
                        break
                    timeout = poll_interval if until_due is None else min(poll_interval, until_due)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.rt.wake.wait(), timeout)
                    continue
                waker = asyncio.ensure_future(self.rt.wake.wait())
                await asyncio.wait(
                    [*running.values(), waker],
                    timeout=until_due,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waker.cancel()
                # not again in this run, a dialog whose drive raised: it would fail alike
                broken |= self._collect(running, watch=watch)
        except BaseException:  # cancelled (Ctrl-C, shutdown) or broken: cut them off
            await _cut_off(running)
            raise
        # Ended (nothing left, or `stop`): a drive still running ends at its step's end,
        # its tool calls answered, and the next run goes on with it; cutting a step off
        # would leave a call whose effect happened answered as interrupted.
        if running:
            self.rt.pause(running)
            try:
                await asyncio.wait(running.values())
            except BaseException:
                await _cut_off(running)
                raise
            self._collect(running, watch=watch)
        return self.results

    def _collect(self, running: dict[str, asyncio.Task[DriveResult]], *, watch: bool) -> set[str]:
        """Take the finished drives out of `running` into the results (or the errors);
        the dialogs whose drive raised (a bug, or a dead store)."""
        broken: set[str] = set()
        for did, task in list(running.items()):
            if not task.done():
                continue
            del running[did]
            exc = task.exception()
            if exc is not None:
                self.errors.append(exc)
                broken.add(did)
            elif task.result().reason is not DriveEnd.CLAIMED:
                self.drives += 1
                self.results.append(task.result())
                if watch and len(self.results) > 2 * KEEP_WATCHED:
                    del self.results[:-KEEP_WATCHED]  # a watch runs for ever
        return broken

    def _ticker_dues(self) -> list[float | None]:
        return [t.next_due() for t in self.tickers]

    def _tick_due(self, dues: list[float | None]) -> list[float | None]:
        """Tick the tickers whose time has come; their next due times."""
        if not self.tickers:
            return dues
        now = time.time()
        out = list(dues)
        for i, (ticker, due) in enumerate(zip(self.tickers, dues, strict=True)):
            if due is not None and due <= now:
                try:
                    if ticker.tick(now):
                        self.rt.wake.set()
                    out[i] = ticker.next_due()
                except Exception as exc:  # a ticker's failure must not end the drives
                    self.errors.append(exc)
                    out[i] = now + TICKER_RETRY
        return out


async def _cut_off(running: dict[str, asyncio.Task[DriveResult]]) -> None:
    """Cancel the drives in flight (each settles `cancelled`, marked to drive again) and
    wait until they have."""
    for task in running.values():
        task.cancel()
    if running:
        await asyncio.gather(*running.values(), return_exceptions=True)
