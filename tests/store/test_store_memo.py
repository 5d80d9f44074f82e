"""Rows the store keeps (`Store.memo_get`): the loop's task row and root dialog are read
once and handed out again while nothing can have changed them — checked by SQLite's
`data_version` (one statement without a table read), never assumed: another
connection's commit, this store's own write of the table and a rollback are all seen."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindloop.store import DialogRecord, Store
from mindloop.store.tasks import TaskRecord
from tests.store.stores import KINDS, open_store, statements_run

pytestmark = pytest.mark.sqlite_only  # PostgreSQL keeps nothing past a transaction

DB = "state.sqlite"


@pytest.fixture(params=[k for k in KINDS if k.startswith("sqlite")])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    s = open_store(tmp_path / DB, request.param)
    s.create_dialog(DialogRecord(id="d1", root_id="d1", member="dev", task_path="tasks/x.tsk"))
    s.insert_task(TaskRecord(id="t1", task_path="tasks/x.tsk", root_id="d1", topic="x"))
    yield s
    s.close()


def test_a_row_this_store_wrote_is_not_read_again(store: Store) -> None:
    store.update_task("t1", phase="DO")
    ran = statements_run(store, lambda: store.task_by_root("d1"))
    assert ran == ["PRAGMA data_version"]
    with store.tx():
        ran = statements_run(
            store, lambda: [store.task_by_root("d1"), store.task_by_path("tasks/x.tsk")]
        )
    assert ran == ["PRAGMA data_version"]  # once per transaction
    assert store.task_by_root("d1").phase == "DO"  # type: ignore[union-attr]


def test_another_connections_commit_is_read_again(tmp_path: Path, store: Store) -> None:
    store.task_by_root("d1")
    store.get_dialog("d1")
    con = sqlite3.connect(tmp_path / DB)
    con.execute("UPDATE tasks SET topic = 'theirs'")
    con.execute("UPDATE dialogs SET title = 'theirs'")
    con.commit()
    con.close()
    assert store.task_by_root("d1").topic == "theirs"  # type: ignore[union-attr]
    with store.tx():
        assert store.get_dialog("d1").title == "theirs"


def test_a_write_of_the_table_and_a_rollback_drop_what_was_kept(store: Store) -> None:
    assert store.task_by_root("d1").topic == "x"  # type: ignore[union-attr]
    store.touch_task("t1")  # a write of the table that puts nothing back
    ran = statements_run(store, lambda: store.task_by_root("d1"))
    assert any(s.startswith("SELECT tasks") for s in ran)
    with pytest.raises(RuntimeError), store.tx():
        store.update_task("t1", phase="CHECK")
        assert store.task_by_root("d1").phase == "CHECK"  # type: ignore[union-attr]
        raise RuntimeError("rolled back")
    assert store.task_by_root("d1").phase is None  # type: ignore[union-attr]


def test_no_caller_can_change_the_kept_record(store: Store) -> None:
    import pydantic

    first = store.task_by_root("d1")
    assert first is not None
    with pytest.raises(pydantic.ValidationError):  # a value: shared, not copied per caller
        first.topic = "changed by a caller"  # type: ignore[misc]
    assert store.task_by_root("d1").topic == "x"  # type: ignore[union-attr]


def test_open_waits_questions_and_the_wait_state_follow_every_write(
    tmp_path: Path, store: Store
) -> None:
    from mindloop.store import QuestionRecord, WaitRecord

    assert store.open_waits("d1") == [] and store.wait_state("d1") == (0, 0, 0, 0)
    assert store.open_questions(dialog_id="d1") == []
    ran = statements_run(store, lambda: (store.open_waits("d1"), store.wait_state("d1")))
    assert ran == ["PRAGMA data_version", "PRAGMA data_version"]
    store.add_wait(WaitRecord(id="w1", dialog_id="d1", kind="timer", key="k", blocks=True))
    assert [w.id for w in store.open_waits("d1")] == ["w1"]
    assert store.wait_state("d1") == (0, 0, 0, 1)
    store.add_question(
        QuestionRecord(
            id="q1", dialog_id="d1", root_id="d1", headline="h", body="b", call_id="c", course=1
        )
    )
    assert [x.id for x in store.open_questions(dialog_id="d1")] == ["q1"]
    assert store.wait_state("d1") == (0, 0, 1, 1)
    con = sqlite3.connect(tmp_path / DB)  # another process resolves both
    con.execute("UPDATE waits SET status = 'resolved'")
    con.execute("UPDATE questions SET status = 'answered'")
    con.commit()
    con.close()
    assert store.open_waits("d1") == [] and store.open_questions(dialog_id="d1") == []
    assert store.wait_state("d1") == (0, 0, 0, 0)


def test_the_latest_summary_follows_every_write(tmp_path: Path, store: Store) -> None:
    from mindloop.store.summaries import Summaries, SummaryRecord

    sums = Summaries(store)
    assert sums.latest("workspace", task_path="tasks/x.tsk") is None
    sums.add(SummaryRecord(task_path="tasks/x.tsk", kind="workspace", writer="w", text="one"))
    assert sums.latest("workspace", task_path="tasks/x.tsk").text == "one"  # type: ignore[union-attr]
    con = sqlite3.connect(tmp_path / DB)
    con.execute("UPDATE summaries SET text = 'theirs'")
    con.commit()
    con.close()
    assert sums.latest("workspace", task_path="tasks/x.tsk").text == "theirs"  # type: ignore[union-attr]


def test_the_memo_keeps_a_bounded_number_of_values(store: Store) -> None:
    """A process that drives many dialogs keeps the latest rows, not one of each: the
    value put longest ago goes first, and a value put again stays."""
    from mindloop.store.memo import KEPT, MISS

    store.memo_put(("dialogs", "hot"), "hot")
    for i in range(KEPT + 100):
        store.memo_put(("dialogs", f"d{i}"), i)
        if i % 100 == 0:
            store.memo_put(("dialogs", "hot"), "hot")  # in use all along
    assert store.memo_get(("dialogs", "d0")) is MISS
    assert store.memo_get(("dialogs", f"d{KEPT + 99}")) == KEPT + 99
    assert store.memo_get(("dialogs", "hot")) == "hot"
    assert len(store._memo._values) <= KEPT
    store.update_dialog("d1", title="t")  # a write of the table still drops its values
    assert store.memo_get(("dialogs", "hot")) is MISS


# ---------------------------------------------------------------- within an event-loop turn


def _theirs(path: Path, topic: str) -> None:
    """Another process commits a new topic for the task."""
    con = sqlite3.connect(path)
    con.execute("UPDATE tasks SET topic = ?", (topic,))
    con.commit()
    con.close()


async def _checked_in_this_turn(store: Store) -> None:
    """The task row and the dialog are kept, and were found current in this turn."""
    store.task_by_root("d1")
    store.get_dialog("d1")
    await asyncio.sleep(0)
    ran = statements_run(store, lambda: (store.task_by_root("d1"), store.get_dialog("d1")))
    assert ran == ["PRAGMA data_version"]


async def test_reads_in_one_turn_share_one_check(store: Store) -> None:
    """Until the task lets others run, only a read of the database could show this
    process another's commit: the kept rows are checked once for all the reads between."""
    await _checked_in_this_turn(store)
    assert statements_run(store, lambda: store.task_by_root("d1")) == []
    await asyncio.sleep(0)  # the loop turned: anything may have happened
    ran = statements_run(store, lambda: store.task_by_root("d1"))
    assert ran == ["PRAGMA data_version"]


async def test_a_commit_by_another_process_is_seen_once_the_loop_turned(
    tmp_path: Path, store: Store
) -> None:
    await _checked_in_this_turn(store)
    await asyncio.to_thread(_theirs, tmp_path / DB, "theirs")  # learnt through the loop
    assert store.task_by_root("d1").topic == "theirs"  # type: ignore[union-attr]


async def test_a_read_that_saw_a_commit_is_not_followed_by_a_row_from_before_it(
    tmp_path: Path, store: Store
) -> None:
    """In one turn: the rows were checked, another process commits, a read of the
    table sees it; a kept row older than that read is then never handed out."""
    await _checked_in_this_turn(store)
    _theirs(tmp_path / DB, "theirs")
    assert [t.topic for t in store.recent_tasks(5)] == ["theirs"]
    assert store.task_by_root("d1").topic == "theirs"  # type: ignore[union-attr]


async def test_another_store_of_the_process_commits_within_the_turn(
    tmp_path: Path, store: Store
) -> None:
    """Two stores on one file (two connections, as the web UI and a worker in one
    process): what one commits, the other's next read returns, in the same turn."""
    other = Store(tmp_path / DB)
    try:
        other.task_by_root("d1")
        await _checked_in_this_turn(store)
        other.update_task("t1", phase="DO")
        assert store.task_by_root("d1").phase == "DO"  # type: ignore[union-attr]
        assert store.get_dialog("d1").title is None  # type: ignore[union-attr]
        with other.tx():  # begun before the read below, committed after it
            other.update_dialog("d1", title="other's")
            assert store.get_dialog("d1").title is None  # type: ignore[union-attr]
        assert store.get_dialog("d1").title == "other's"  # type: ignore[union-attr]
        store.update_task("t1", phase="CHECK")
        assert other.task_by_root("d1").phase == "CHECK"  # type: ignore[union-attr]
    finally:
        other.close()


def test_a_check_made_in_an_event_loop_that_ended_does_not_stand(
    tmp_path: Path, store: Store
) -> None:
    """A check made in an event loop that closed before its turn's end ran stands
    nowhere else (here: after the loop, where every read checks)."""
    loop = asyncio.new_event_loop()

    async def check_and_stop() -> None:
        await _checked_in_this_turn(store)
        loop.stop()  # stops at this turn's end, before the next one's callbacks run

    task = loop.create_task(check_and_stop())
    loop.run_forever()
    assert task.done()
    loop.close()  # drops the turn's end, still queued
    _theirs(tmp_path / DB, "theirs")
    assert store.task_by_root("d1").topic == "theirs"  # type: ignore[union-attr]
