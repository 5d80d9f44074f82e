"""Driving in the web server's own process: what the browser starts is answered without
another command running.

A message posted, a chat started, a question answered or a stopped tree retried in the
browser makes its dialog tree drivable; the driver then follows that tree with the same
use case as `mindloop chat` (`service.run(project, root_id=…)`): it drives what is
drivable and waits while another process drives a dialog of it, until the tree settles.
Who drives a dialog is the claim's decision (`dialogs.claims`): a `mindloop run --watch`
beside the server takes some drives, this process the others, never both. Trees the
browser did not touch are left to `mindloop run`.

One follow per tree at a time; a kick while one runs asks it to look again when it ends
(the scheduler also sees new work while it runs: this only closes the gap at its end).
With `drive=False` the server drives nothing (another process does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from mindloop import service
from mindloop.service import DriveReport, Project

log = logging.getLogger(__name__)


class Driver:
    def __init__(self, project: Project, *, drive: bool = True) -> None:
        self.project = project
        self.enabled = drive
        self._follows: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self.reports: dict[str, DriveReport] = {}  # the last run of each tree followed

    def kick(self, root_id: str) -> None:
        """Drive `root_id`'s tree until it settles (a no-op without driving)."""
        if not self.enabled:
            return
        if root_id in self._follows:
            self._again.add(root_id)
            self.project.runtime.wake.set()
            return
        self._follows[root_id] = asyncio.create_task(self._follow(root_id), name=f"web:{root_id}")

    def following(self, root_id: str) -> bool:
        return root_id in self._follows

    async def _follow(self, root_id: str) -> None:
        try:
            while True:
                self._again.discard(root_id)
                report = await service.run(self.project, root_id=root_id)
                self.reports[root_id] = report
                log.info("web: tree %s settled: %s", root_id, report.outcome)
                if root_id not in self._again:
                    break
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("web: driving tree %s failed", root_id)
        finally:
            self._follows.pop(root_id, None)
            self._again.discard(root_id)

    async def aclose(self) -> None:
        """Stop following (the drives under way are cut off; `mindloop run` resumes them)."""
        tasks = list(self._follows.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
