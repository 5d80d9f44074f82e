"""The SELF_IMPROVE cursor (agent-loop §9.3): batches of at most 40 messages across the
root dialog's courses; the cursor moves only with the commit that carries it, so a crash
re-reads the batch; four failed calls in a row stop the run, its batch kept for the next."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.config.loop import SelfImproveConfig
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop.self_improve import (
    SelfImproveCursor,
    cursor_effect,
    errors_in_a_row,
    failed_batch,
    load_cursor,
    next_batch,
    save_cursor,
)
from mindloop.providers.base import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from mindloop.store import DialogRecord, MessageRecord, Store
from mindloop.testing import ScriptedModel
from tests.scenario_util import write_team

CONFIG = SelfImproveConfig()  # the defaults of `loop.self_improve`: 40 messages, 4 errors


def _runtime(rtws: Path) -> DialogRuntime:
    write_team(rtws, {"dev": {}})
    return DialogRuntime(rtws, providers={"mock": ScriptedModel([])})


async def test_batches_cover_every_message_once_across_courses(rtws: Path) -> None:
    rt = _runtime(rtws)
    root = rt.create_root_dialog("tasks/example.tsk", "dev")
    for i in range(50):
        rt.store.append_message(root.id, "user", {"text": f"c1 #{i}"}, course=1)
    rt.store.update_dialog(root.id, course=2)
    for i in range(3):
        rt.store.append_message(root.id, "user", {"text": f"c2 #{i}"}, course=2)
    cursor = load_cursor(rt.store, root.id)
    assert cursor == SelfImproveCursor()
    seen: list[str] = []
    sizes = []
    while True:
        batch, after = next_batch(rt.store, root.id, cursor, CONFIG.batch_messages)
        if not batch:
            break
        sizes.append(len(batch))
        seen += [m.data["text"] for m in batch]
        save_cursor(rt.store, root.id, after)
        cursor = load_cursor(rt.store, root.id)
    assert sizes == [40, 10, 3]
    assert seen == [f"c1 #{i}" for i in range(50)] + [f"c2 #{i}" for i in range(3)]
    assert cursor.course == 2
    await rt.aclose()


async def test_a_batch_counts_a_tool_call_as_part_of_its_assistant_message(rtws: Path) -> None:
    # §9.3's "batches of ≤ 40 messages" are the dialog's messages: an assistant message
    # and the calls it made are one (the store keeps each call as a row of its own), and a
    # batch never ends between an assistant message and its calls.
    rt = _runtime(rtws)
    root = rt.create_root_dialog("tasks/example.tsk", "dev")
    for turn in range(4):  # per turn: assistant + 3 calls (1 message), 3 results (3)
        rt.store.append_message(root.id, "assistant", {"text": f"turn {turn}"}, course=1)
        for i in range(3):
            call = {"id": f"c{turn}.{i}", "name": "shell", "arguments": "{}"}
            rt.store.append_message(root.id, "tool_call", call, course=1)
        for i in range(3):
            result = {"call_id": f"c{turn}.{i}", "name": "shell", "content": "ok"}
            rt.store.append_message(root.id, "tool_result", result, course=1)
    cursor = load_cursor(rt.store, root.id)
    batches: list[list[str]] = []
    while True:
        batch, cursor = next_batch(rt.store, root.id, cursor, 5)
        if not batch:
            break
        batches.append([m.kind for m in batch])
    whole = ["assistant", *["tool_call"] * 3, *["tool_result"] * 3]
    # 16 messages in batches of 5: the 5th message of the first batch is turn 1's
    # assistant message, read with its three calls
    assert [sum(k != "tool_call" for k in b) for b in batches] == [5, 5, 5, 1]
    assert batches[0] == [*whole, "assistant", *["tool_call"] * 3]
    assert [k for b in batches for k in b] == whole * 4
    await rt.aclose()


async def test_the_cursor_moves_only_with_its_commit(rtws: Path) -> None:
    rt = _runtime(rtws)
    root = rt.create_root_dialog("tasks/example.tsk", "dev")
    for i in range(3):
        rt.store.append_message(root.id, "user", {"text": str(i)}, course=1)
    batch, after = next_batch(rt.store, root.id, load_cursor(rt.store, root.id), 40)
    effect = cursor_effect(root.id, after)
    try:
        with rt.store.tx():
            effect.apply(rt.store)
            raise RuntimeError("killed before the commit")
    except RuntimeError:
        pass
    again, _ = next_batch(rt.store, root.id, load_cursor(rt.store, root.id), 40)
    assert [m.id for m in again] == [m.id for m in batch]  # re-processed, not skipped
    with rt.store.tx():
        effect.apply(rt.store)
    assert next_batch(rt.store, root.id, load_cursor(rt.store, root.id), 40)[0] == []
    await rt.aclose()


def _step(n: int, *results: bool | str) -> list[Any]:
    """One assistant turn and its results: True ok, False an error, a string its text
    (an error)."""
    calls = [ToolCall(id=f"c{n}.{i}", name="self_md_patch") for i in range(len(results))]
    out: list[Any] = [AssistantMessage(tool_calls=calls)]
    for call, r in zip(calls, results, strict=True):
        text = r if isinstance(r, str) else ("ok" if r else "REJECTED")
        out.append(
            ToolResultMessage(call_id=call.id, name=call.name, content=text, is_error=r is not True)
        )
    return out


def test_errors_in_a_row_count_failed_calls_since_the_input() -> None:
    """`loop.self_improve.max_consecutive_errors` (default 4) failed calls in a row stop
    the run: calls, not steps; a success breaks the row, so does a new input; a call a
    restart interrupted is neither."""
    limit = CONFIG.max_consecutive_errors
    start: list[Any] = [UserMessage(text="[work loop] Phase SELF_IMPROVE")]
    three = [*start, *_step(1, False, False), *_step(2, False)]
    assert errors_in_a_row(three, limit) is None
    stop = errors_in_a_row([*three, *_step(3, False)], limit)
    assert stop is not None and stop.count == 4 and "4 tool calls in a row failed" in stop.reason()
    assert errors_in_a_row([*three, *_step(3, True, False)], limit) is None  # in call order
    assert errors_in_a_row([*three, *_step(3, False, True)], limit) is None
    interrupted = _step(3, "[mindloop] this call was interrupted by a runtime restart")
    assert errors_in_a_row([*three, *interrupted], limit) is None
    assert errors_in_a_row([*three, *interrupted, *_step(4, False)], limit) is not None
    note = [UserMessage(text="[mindloop] a note")]
    assert errors_in_a_row([*three, *note, *_step(4, False)], limit) is None
    assert errors_in_a_row([*start, *_step(1, False, False)], 2) is not None  # configurable


def test_a_failed_batch_keeps_the_cursor_and_counts_the_failure() -> None:
    cursor = SelfImproveCursor(course=1, message_id=7)
    failed = failed_batch(failed_batch(cursor))
    assert (failed.course, failed.message_id, failed.errors) == (1, 7, 2)


def _rows(batch: list[MessageRecord]) -> list[tuple[int, str, dict[str, Any]]]:
    return [(m.id, m.kind, m.data) for m in batch]


_KINDS = st.sampled_from(["user", "assistant", "tool_call", "tool_call", "tool_result", "note"])


def _append(store: Store, dialog: str, kind: str, course: int) -> int:
    data: dict[str, Any] = {"text": kind}
    if kind == "tool_call":
        data = {"id": "c", "name": "shell", "arguments": "{}"}
    elif kind == "tool_result":
        data = {"call_id": "c", "name": "shell", "content": "ok"}
    return store.append_message(dialog, kind, data, course=course).id  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    history=st.lists(st.tuples(_KINDS, st.booleans()), min_size=1, max_size=70),
    switch=st.integers(min_value=0, max_value=70),
    limit=st.integers(min_value=1, max_value=6),
    growth=st.lists(st.lists(_KINDS, max_size=4), max_size=12),
    probe=st.booleans(),
)
def test_a_pass_reads_the_batches_a_fresh_read_gives(
    history: list[tuple[str, bool]],
    switch: int,
    limit: int,
    growth: list[list[str]],
    probe: bool,
) -> None:
    # What a pass keeps of the rows it read (for its next entry, and the route's look for
    # one more) gives the batches, and the cursors, that reading afresh gives: across
    # courses, with other dialogs' rows between, and the pass's own entries appending.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.db"
        store = Store(path)
        for did in ("root", "other"):
            task = f"tasks/{did}.tsk"
            store.create_dialog(DialogRecord(id=did, root_id=did, member="dev", task_path=task))
        course = 1
        for i, (kind, other) in enumerate(history):
            if i == switch:
                course = 2
                store.update_dialog("root", course=course)
            if other:
                _append(store, "other", kind, 1)
            _append(store, "root", kind, course)
        first = _append(store, "root", "user", course)  # the pass's first input: its end
        until = SelfImproveCursor(course=course, message_id=first)
        cursor, end = SelfImproveCursor(), None  # the first entry reads up to now
        for step in range(len(growth) + 40):
            fresh = Store(path)
            try:
                if probe and end is not None:
                    kept_probe = next_batch(store, "root", cursor, 1, until=end)
                    fresh_probe = next_batch(fresh, "root", cursor, 1, until=end)
                    assert _rows(kept_probe[0]) == _rows(fresh_probe[0])
                    assert kept_probe[1] == fresh_probe[1]
                batch, after = next_batch(store, "root", cursor, limit, until=end)
                again, after_again = next_batch(fresh, "root", cursor, limit, until=end)
            finally:
                fresh.close()
            assert _rows(batch) == _rows(again) and after == after_again
            if not batch:
                break
            for kind in growth[step] if step < len(growth) else []:  # the entry's own
                _append(store, "root", kind, course)
                _append(store, "other", kind, 1)
            cursor, end = after, until
        else:
            raise AssertionError("the pass did not end")
        store.close()


def test_rows_read_in_a_transaction_that_rolled_back_are_not_kept(tmp_path: Path) -> None:
    # The first entry of a pass reads the history up to now, inside the transaction that
    # enters it: a row that transaction wrote is gone if it rolls back, and its id is
    # given to the next row; the next entry reads that row, not the one rolled back.
    store = Store(tmp_path / "state.db")
    store.create_dialog(DialogRecord(id="root", root_id="root", member="dev", task_path="t.tsk"))
    for _ in range(3):
        _append(store, "root", "user", 1)
    cursor = SelfImproveCursor()
    try:
        with store.tx():
            gone = _append(store, "root", "note", 1)
            batch, after = next_batch(store, "root", cursor, 2)
            assert [m.kind for m in batch] == ["user", "user"]
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    assert _append(store, "root", "assistant", 1) == gone  # the id is given again
    end = SelfImproveCursor(course=1, message_id=_append(store, "root", "user", 1))
    rest, _ = next_batch(store, "root", after, 5, until=end)
    assert [m.kind for m in rest] == ["user", "assistant"]
    store.close()
