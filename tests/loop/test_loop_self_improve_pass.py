"""A SELF_IMPROVE pass reads the loop root's whole history (agent-loop §9.3): at the end
of a task it is entered again and again, each entry shown the next batch of at most
`loop.self_improve.batch_messages` messages from its cursor, until no batch is left of
the history as it stood when the pass began (its own entries are not reviewed by it);
then the task ends. The drive cap stops a pass between two batches: the task ends, and
the next pass goes on from the cursor."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop import self_improve as si
from mindloop.loop.driver import LoopOutcome
from mindloop.providers.base import AssistantMessage, GenerationRequest, UserMessage
from mindloop.store import MessageRecord
from mindloop.testing import Call, FunctionModel, Turn, call
from mindloop.toolsets import self_md as sm
from mindloop.toolsets import self_md_doc as doc
from tests.loop.loop_util import (
    WorkScript,
    complete,
    create,
    end,
    phase_of,
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


def _counted(rt: DialogRuntime, root: str, ids: list[int]) -> int:
    """How many messages rows `ids` are: a tool call is part of its assistant message."""
    kinds = {m.id: m.kind for m in rt.store.load_history(root)}
    return sum(kinds[i] != "tool_call" for i in ids)


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
    assert all(0 < _counted(rt, root, b) <= BATCH for b in batches)
    messages = _counted(rt, root, before)
    assert len(entries) == -(-messages // BATCH) == model.self_improve
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
    assert _counted(rt, root, shown) == BATCH
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


def _self_md(rtws: Path) -> Path:
    path = sm.self_md_path(rtws, "dev")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("## Habits\nRead before writing.\n", encoding="utf-8")
    return path


def _reviewer(rtws: Path, on_input: Callable[[int], list[Call]]) -> FunctionModel:
    """The work of `_work`, then a SELF_IMPROVE that makes `on_input(i)`'s calls on the
    i-th step of an entry (from 0; none left: the entry ends)."""
    work = deque(_work())

    def respond(req: GenerationRequest) -> Turn:
        if phase_of(req) != "SELF_IMPROVE":
            return work.popleft()
        since = 0
        for m in reversed(req.messages):
            if isinstance(m, UserMessage):
                break
            since += isinstance(m, AssistantMessage)
        calls = on_input(since)
        return turn(*calls) if calls else turn(end("END", "reviewed"))

    return FunctionModel(respond)


def _habit(rtws: Path, n: int) -> Call:
    """Append habit `n` to self.md as it is now."""
    text = sm.read_text(sm.self_md_path(rtws, "dev"))
    return call(
        "self_md_patch",
        section="Habits",
        op="append",
        content=f"Habit {n}.",
        base_sha256=doc.sha256_hex(text),
        rationale="seen in the history",
    )


async def test_an_entry_stopped_by_errors_in_a_row_stops_the_pass(rtws: Path) -> None:
    """§9.3: after `max_consecutive_errors` failing calls the run stops until the next
    trigger; the batch is not processed (the cursor stays), so no further batch is read."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    set_loop(rtws, self_improve={"batch_messages": BATCH})
    _self_md(rtws)

    def failing(i: int) -> list[Call]:
        bad = doc.sha256_hex("not the file")
        args = {"section": "Habits", "op": "append", "rationale": "r", "base_sha256": bad}
        return [call("self_md_patch", content=f"Rule {i}.", **args)]

    report, rt = await run_task(rtws, _reviewer(rtws, failing), "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    root = report.root_id
    assert len(_inputs(rt, root, "SELF_IMPROVE")) == 1
    cursor = si.load_cursor(rt.store, root)
    assert (cursor.message_id, cursor.errors) == (0, 1)
    await rt.aclose()


async def test_a_pass_is_one_self_md_run_whatever_its_entries(rtws: Path) -> None:
    """`loop.self_md.max_calls_per_run` (3) counts the changes of the whole pass, not of
    each batch's entry: a long history does not multiply them."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    set_loop(rtws, self_improve={"batch_messages": BATCH})
    path = _self_md(rtws)
    made = iter(range(1, 100))

    def two_habits(i: int) -> list[Call]:
        return [_habit(rtws, next(made))] if i < 2 else []

    report, rt = await run_task(rtws, _reviewer(rtws, two_habits), "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert len(_inputs(rt, report.root_id, "SELF_IMPROVE")) >= 3  # 6 calls or more
    results = [
        m.data["content"] for m in rt.store.load_history(report.root_id) if m.kind == "tool_result"
    ]
    outcomes = [r for r in results if '"result"' in r]
    assert sum('"APPLIED"' in r for r in outcomes) == 3
    assert all('"LIMIT"' in r for r in outcomes[3:]) and len(outcomes) >= 6
    assert sm.read_text(path).count("Habit ") == 3
    assert len({e.run for e in sm.SelfMdFile(rtws, "dev").history()}) == 1
    await rt.aclose()
