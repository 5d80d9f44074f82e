"""The SELF_IMPROVE cursor (agent-loop §9.3): batches of at most 40 messages across the
root dialog's courses; the cursor moves only with the commit that carries it, so a crash
re-reads the batch; four failed batches in a row stall the pass."""

from __future__ import annotations

from pathlib import Path

from mindloop.config.loop import SelfImproveConfig
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop.self_improve import (
    SelfImproveCursor,
    cursor_effect,
    failed_batch,
    load_cursor,
    next_batch,
    save_cursor,
)
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


def test_failed_batches_in_a_row_stall_the_pass_at_the_configured_count() -> None:
    """`loop.self_improve.max_consecutive_errors` (default 4) failed batches stall it."""
    for config in (CONFIG, SelfImproveConfig(max_consecutive_errors=2)):
        cursor = SelfImproveCursor(course=1, message_id=7)
        for _ in range(config.max_consecutive_errors - 1):
            cursor = failed_batch(cursor)
            assert not cursor.stalled(config) and cursor.message_id == 7
        assert failed_batch(cursor).stalled(config)
