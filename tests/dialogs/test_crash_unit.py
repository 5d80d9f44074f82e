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
from mindloop.store.location import env_dialect
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
        super().__init__(path, durable=False, dialect=env_dialect(durable=False))
        self.crash_at = crash_at

    def _rows(self, stmt: Any, params: Any = None) -> list[Any]:
        if self.dead:  # a dead process reads nothing either (else the scheduler spins)
            raise Crash
        return super()._rows(stmt, params)

    @contextmanager
    def tx(self, *, durable: bool = True) -> Iterator[sa.Connection]:
        if self.dead:
            raise Crash
        outer = self._depth == 0
        with super().tx(durable=durable) as conn:
            yield conn
            if outer and self.crash_at:
                self.commits += 1
                if self.commits == self.crash_at:
                    self.dead = True
                    raise Crash  # inside the transaction: it rolls back


def _process_died(rt: DialogRuntime) -> None:
    """These crashes are simulated in this process, so the dead runtime's claims cannot
    be told dead by their pid: end them as the death of a process would (its claims
    expire; `test_claims_processes.py` kills real processes)."""
    for did, owner in rt.store.held_claims():
        if owner:
            rt.store.expire_claim(did, owner)


async def _restart(rtws: Path) -> DialogRuntime:
    """A new process: recover, then drive until quiescent."""
    rt = DialogRuntime(rtws, durable=False)
    _process_died(rt)
    rt.recover()
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
    """What a restart after the crash finds and makes of it."""
    snap = cs.Snapshot.read(rtws)
    problems = cs.check_always(snap)
    rt = DialogRuntime(rtws, durable=False)
    try:
        root = snap.root()
        if root is None:  # died before the root was created: the user starts over
            root = rt.create_root_dialog(cs.TASK)
        if not any(m.kind == "user" for m in snap.messages.get(root.id, [])):
            rt.post_user_message(root.id, "go")
        _process_died(rt)
        rt.recover()
        await Scheduler(rt).run()
        snap = cs.Snapshot.read(rtws)
        if not any(q.status == "answered" for q in snap.questions):  # died before the answer
            problems += cs.check_waiting_for_human(snap)
        for q in rt.store.open_questions():
            rt.answer_question(q.id, cs.HUMAN_ANSWER)
        await Scheduler(rt).run()
    finally:
        await rt.aclose()
    return problems + cs.check_done(cs.Snapshot.read(rtws), rtws)


@pytest.mark.sqlite_only  # a fresh rtws per crash point: its state must live in it
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
        if not await _crash_at(rtws, n):  # ran to the end without crashing
            assert not cs.check_done(cs.Snapshot.read(rtws), rtws)
            break
        problems = await _recover_and_finish(rtws)
        assert not problems, f"crash at commit {n}:\n  " + "\n  ".join(problems)
    assert n > 20  # the scenario really went through many commits


# ------------------------------------------------------------------ focused interleavings


class CrashOnAppend(Store):
    """Dies when asked to append records that `when` selects (before they commit)."""

    def __init__(self, path: Path, when: Any) -> None:
        super().__init__(path, durable=False, dialect=env_dialect(durable=False))
        self.when = when

    def append_messages(self, msgs: Any) -> Any:
        if self.when(msgs):
            raise Crash
        return super().append_messages(msgs)


def _rtws(tmp_path: Path, script: list[dict[str, Any]]) -> Path:
    root = tmp_path / "proj"
    init_rtws(root, provider="mock")
    write_team(
        root,
        {
            "lead": {"toolsets": ["fs"]},
            "alice": {"toolsets": ["fs"]},
            "carol": {"toolsets": ["fs"]},
        },
    )
    write_script(root, script)
    return root


async def test_dangling_tool_call_behind_a_runtime_note_gets_an_interrupted_result(
    tmp_path: Path,
) -> None:
    """A generation that both calls a tool and writes a failing tellask stores its tool
    call, then the failure note. Dying before the tool result commits leaves a call
    without a result *behind* the note; the restart must still answer it explicitly."""
    rtws = _rtws(
        tmp_path,
        [
            {
                "member": "lead",
                "match": "go",
                "response": "!?@nobody hello\n",
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}
                ],
            },
            {  # the failed tellask's note follows the results (issue 10, item 1)
                "member": "lead",
                "role": "user",
                "contains": "ERR_UNKNOWN_TELLASK_TARGET",
                "context_contains": "interrupted by a runtime restart",
                "response": "redo later",
            },
        ],
    )
    store = CrashOnAppend(
        rtws / ".mindloop" / "state.sqlite", lambda ms: any(m.kind == "tool_result" for m in ms)
    )
    rt = DialogRuntime(rtws, store=store)
    root = rt.create_root_dialog(cs.TASK)
    rt.post_user_message(root.id, "go")
    with pytest.raises(Crash):
        await rt.drive(root.id)
    await rt.aclose()

    rt = await _restart(rtws)
    hist = rt.store.load_history(root.id)
    await rt.aclose()
    results = [m.data for m in hist if m.kind == "tool_result"]
    assert [(r["call_id"], r["content"], r["is_error"]) for r in results] == [
        ("call_1", INTERRUPTED_TOOL_RESULT, True)
    ]
    assert (hist[-1].kind, hist[-1].data["text"]) == ("assistant", "redo later")


@pytest.mark.parametrize(
    "cut_after", ["Let", "!?@carol check"], ids=["before-tellask", "mid-headline"]
)
async def test_interrupted_side_generation_is_rerun_after_restart(
    tmp_path: Path, cut_after: str
) -> None:
    """Ctrl-C while a side dialog streams: its partial text must neither be taken as its
    turn (the caller would wait forever) nor dispatch a half-written tellask; the next
    `mindloop run` re-runs the generation and the tree finishes once."""
    rtws = _rtws(
        tmp_path,
        [
            {"member": "lead", "match": "go", "response": "!?@alice do it\n"},
            {"member": "lead", "contains": "provided response", "response": "FINAL"},
            {"member": "alice", "contains": "provided response", "response": "alice done"},
            {
                "member": "alice",
                "contains": "do it",
                "chunk_delay_ms": 5,
                "response": "Let me ask.\n!?@carol check this please\n",
            },
            {"member": "carol", "response": "checked"},
        ],
    )
    rt = DialogRuntime(rtws, durable=False)
    root = rt.create_root_dialog(cs.TASK)
    rt.post_user_message(root.id, "go")
    streamed: dict[str, str] = {}
    cut = asyncio.Event()

    def watch(ev: Any) -> None:
        if ev.type == "text_chunk" and ev.dialog_id != root.id:
            streamed[ev.dialog_id] = streamed.get(ev.dialog_id, "") + ev.payload()["text"]
            if cut_after in streamed[ev.dialog_id]:
                cut.set()

    rt.bus.subscribe(watch)
    task = asyncio.create_task(Scheduler(rt).run())
    await asyncio.wait_for(cut.wait(), 10)
    task.cancel()  # what Ctrl-C does to the backend loop
    with pytest.raises(asyncio.CancelledError):
        await task
    await rt.aclose()

    rt = DialogRuntime(rtws, durable=False)
    rt.recover()  # Ctrl-C settled the drives: nothing is left claimed
    await Scheduler(rt).run()
    dialogs = rt.store.list_dialogs(root_id=root.id)
    root_hist = rt.store.load_history(root.id)
    carol = [d for d in dialogs if d.member == "carol"]
    await rt.aclose()
    assert len(carol) == 1 and carol[0].assignment is not None
    assert carol[0].assignment["headline"].strip() == "@carol check this please"
    assert [m.data["text"] for m in root_hist if m.kind == "assistant"][-1] == "FINAL"
    assert sum(m.kind == "tellask_result" for m in root_hist) == 1
    assert all(d.status != "running" and not d.needs_drive for d in dialogs)
