"""Crash safety without processes: the runtime dies at a chosen transaction, then restarts.

A `Crash` is a BaseException: no `except Exception` handler of the engine sees it, so
nothing after the crash point runs — exactly what a SIGKILL leaves behind. The store
that raises it rolls back the transaction in flight and refuses every later write (the
process is dead). A fresh runtime on the same rtws then recovers and finishes.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from mindloop.dialogs.formats import INTERRUPTED_TOOL_RESULT
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.rtws import init_rtws
from mindloop.store import Store
from tests.dialogs import crash_scenario as cs
from tests.scenario_util import write_script, write_team


class Crash(BaseException):
    """The process dies here."""


class CrashingStore(Store):
    """Dies at its `crash_at`-th commit (counting every outermost transaction): that
    transaction is rolled back and every later one fails too."""

    def __init__(self, path: Path, crash_at: int) -> None:
        self.commits = 0
        self.crash_at = 0  # the schema migration in __init__ does not count
        self.dead = False
        super().__init__(path, durable=False)
        self.crash_at = crash_at

    @contextmanager
    def tx(self) -> Iterator[sa.Connection]:
        if self.dead:
            raise Crash
        outer = self._depth == 0
        with super().tx() as conn:
            yield conn
            if outer and self.crash_at:
                self.commits += 1
                if self.commits == self.crash_at:
                    self.dead = True
                    raise Crash  # inside the transaction: it rolls back


async def _restart(rtws: Path) -> DialogRuntime:
    """A new process: recover, then drive until quiescent."""
    rt = DialogRuntime(rtws, durable=False)
    rt.tree.recover()
    await Scheduler(rt).run()
    return rt


# ------------------------------------------------------------------ every commit point


async def _scenario(rt: DialogRuntime) -> None:
    """The crash scenario's whole life in one process: chat, wait for the human, answer."""
    root = rt.create_root_dialog(cs.TASK)
    rt.post_user_message(root.id, "go")
    await Scheduler(rt).run()
    (question,) = rt.store.open_questions()
    rt.answer_question(question.id, cs.HUMAN_ANSWER)
    await Scheduler(rt).run()


async def _crash_at(rtws: Path, n: int) -> bool:
    """Run the scenario dying at commit `n`; False when it has fewer commits than that."""
    rt = DialogRuntime(rtws, store=CrashingStore(rtws / ".mindloop" / "state.sqlite", n))
    store = rt.store
    assert isinstance(store, CrashingStore)
    try:
        await _scenario(rt)
    except Crash:
        pass
    finally:
        await rt.aclose()
    return store.dead


async def _recover_and_finish(rtws: Path) -> list[str]:
    problems = cs.check_always(cs.Snapshot.read(rtws))
    snap = cs.Snapshot.read(rtws)
    rt = DialogRuntime(rtws, durable=False)
    try:
        root = snap.root()
        if root is None:  # died before the root was created: the user starts over
            root = rt.create_root_dialog(cs.TASK)
        if not any(m.kind == "user" for m in snap.messages.get(root.id, [])):
            rt.post_user_message(root.id, "go")
        rt.tree.recover()
        await Scheduler(rt).run()
        problems += cs.check_waiting_for_human(cs.Snapshot.read(rtws))
        for q in rt.store.open_questions():
            rt.answer_question(q.id, cs.HUMAN_ANSWER)
        await Scheduler(rt).run()
    finally:
        await rt.aclose()
    return problems + cs.check_done(cs.Snapshot.read(rtws), rtws)


async def test_a_crash_at_any_commit_recovers_to_the_same_end_state(tmp_path: Path) -> None:
    """Every durable state the scenario passes through is a possible crash state: die at
    each commit in turn (rolled back), restart, and the tree must end exactly as without
    the crash. Complements the SIGKILL test, which samples instants at random."""
    template = cs.build_template(tmp_path / "template", slow=False)
    n = 0
    while True:
        n += 1
        rtws = tmp_path / f"c{n}"
        shutil.copytree(template, rtws)
        if not await _crash_at(rtws, n):
            break
        problems = await _recover_and_finish(rtws)
        assert not problems, f"crash at commit {n}:\n  " + "\n  ".join(problems)
    assert n > 30  # the scenario really went through many commits
