"""A SELF_IMPROVE pass reads the loop root's whole history (agent-loop §9.3): at the end
of a task it is entered again and again, each entry shown the next batch of at most
`loop.self_improve.batch_messages` messages from its cursor, until no batch is left of
the history as it stood when the pass began (its own entries are not reviewed by it);
then the task ends. The drive cap stops a pass between two batches: the task ends, and
the next pass goes on from the cursor."""

from __future__ import annotations

import re
from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop import self_improve as si
from mindloop.loop.driver import LoopOutcome
from mindloop.store import MessageRecord
from mindloop.testing import call
from tests.loop.loop_util import (
    WorkScript,
    complete,
    create,
    end,
    run_task,
    set_loop,
    turn,
    verdict,
)
from tests.scenario_util import write_team

BATCH = 10


def _work() -> list[object]:
    """PLAN, DO, CHECK of one node, with a few reads: some 30 messages of history."""
    reads = [call("list_dir", path=".") for _ in range(4)]
    return [
        turn(create("a"), *reads),
        turn(*reads, end("DO")),
        turn(complete("n1"), *reads),
        turn(end("CHECK")),
        turn(verdict("n1"), end("END")),
    ]


def _inputs(rt: DialogRuntime, root: str, phase: str) -> list[MessageRecord]:
    return [
        m
        for m in rt.store.load_history(root)
        if isinstance(m.data.get("loop"), dict) and m.data["loop"]["phase"] == phase
    ]


def _shown(m: MessageRecord) -> list[int]:
    """The message ids a SELF_IMPROVE input lists in its batch."""
    return [int(i) for i in re.findall(r"^- #(\d+) ", m.data["text"], re.MULTILINE)]


async def test_a_pass_reads_the_whole_history_in_batches_then_the_task_ends(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    set_loop(rtws, self_improve={"batch_messages": BATCH})
    model = WorkScript(_work())
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    root = report.root_id
    entries = _inputs(rt, root, "SELF_IMPROVE")
    first = entries[0].id
    before = [m.id for m in rt.store.load_history(root) if m.id < first]
    assert len(before) > 2 * BATCH  # the history needs three batches or more
    batches = [_shown(m) for m in entries]
    # every message before the pass, once, in order, in batches of at most BATCH; none of
    # the pass's own messages; as many entries as batches
    assert [i for b in batches for i in b] == before
    assert all(0 < len(b) <= BATCH for b in batches)
    assert len(entries) == -(-len(before) // BATCH) == model.self_improve
    cursor = si.load_cursor(rt.store, root)
    assert cursor.message_id == before[-1]
    await rt.aclose()


async def test_the_drive_cap_stops_a_pass_and_the_next_pass_goes_on_from_its_cursor(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    # PLAN 2, DO 2, CHECK 1 steps; then one SELF_IMPROVE entry: the 6th step is the cap
    set_loop(rtws, self_improve={"batch_messages": BATCH}, retries={"drive_steps": 6})
    model = WorkScript(_work())
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    root = report.root_id
    [entry] = _inputs(rt, root, "SELF_IMPROVE")
    shown = _shown(entry)
    assert len(shown) == BATCH
    assert si.load_cursor(rt.store, root).message_id == shown[-1]
    await rt.aclose()
    # more work: the task reopens; its pass starts where the last one stopped
    model = WorkScript(
        [
            turn(create("b"), end("DO")),
            turn(complete("n2"), end("CHECK")),
            turn(verdict("n2"), end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "also b")
    assert report.outcome is LoopOutcome.DONE, report.reason
    later = _inputs(rt, root, "SELF_IMPROVE")[1:]
    after = [m.id for m in rt.store.load_history(root) if m.id > shown[-1]]
    assert later and _shown(later[0])[:2] == after[:2]
    await rt.aclose()
