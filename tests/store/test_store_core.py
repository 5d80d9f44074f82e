"""The store: schema versioning, transactions, dialogs, messages, generations, audit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mindloop.errors import NotFoundError
from mindloop.store import (
    DialogRecord,
    GenerationRecord,
    MessageRecord,
    PendingTellask,
    QuestionRecord,
    ResponseRecord,
    Store,
    StoreError,
    TaskdocChange,
)
from mindloop.store.schema import SCHEMA_VERSION
from mindloop.store.store import INSERT_BATCH
from tests.store.stores import KINDS, downgrade, open_store


def _dialog(did: str = "d1", **kw: object) -> DialogRecord:
    return DialogRecord(
        id=did, root_id=kw.pop("root_id", did), member="dev", task_path="tasks/x.tsk", **kw
    )  # type: ignore[arg-type]


@pytest.fixture(params=KINDS)
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    s = open_store(tmp_path / ".mindloop" / "state.sqlite", request.param)
    yield s
    s.close()


@pytest.mark.sqlite_only
def test_fresh_database_is_at_current_schema_and_uses_wal(tmp_path: Path) -> None:
    s = Store.for_rtws(tmp_path)
    assert s.schema_version() == SCHEMA_VERSION
    s.close()
    con = sqlite3.connect(tmp_path / ".mindloop" / "state.sqlite")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


@pytest.mark.parametrize("kind", KINDS)
def test_reopen_keeps_data_and_does_not_rerun_migrations(tmp_path: Path, kind: str) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    s = open_store(db, kind)
    s.create_dialog(_dialog())
    s.close()
    s2 = open_store(db, kind)
    assert s2.get_dialog("d1").member == "dev"
    assert s2.stats.durable_commits == 0  # no migration ran again
    s2.close()


@pytest.mark.parametrize("kind", KINDS)
def test_newer_schema_is_refused_with_the_path(tmp_path: Path, kind: str) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    s = open_store(db, kind)
    where = s.dialect.location
    downgrade(s, "UPDATE schema_version SET version = 999")
    with pytest.raises(StoreError, match="newer than this mindloop") as err:
        open_store(db, kind)
    assert where in str(err.value)


def test_transaction_rolls_back_everything_on_error(store: Store) -> None:
    store.create_dialog(_dialog())
    with pytest.raises(RuntimeError), store.tx():
        store.append_message("d1", "user", {"text": "a"})
        store.update_dialog("d1", status="running")
        raise RuntimeError("boom")
    assert store.load_history("d1") == []
    assert store.get_dialog("d1").status == "idle"


def test_nested_tx_joins_the_outer_one(store: Store) -> None:
    store.create_dialog(_dialog())
    with pytest.raises(RuntimeError), store.tx():
        with store.tx():
            store.append_message("d1", "user", {"text": "inner"})
        raise RuntimeError("outer fails")
    assert store.load_history("d1") == []


def test_messages_keep_order_and_courses(store: Store) -> None:
    store.create_dialog(_dialog())
    for i in range(5):
        store.append_message("d1", "user", {"text": str(i)}, course=1 + i // 3)
    assert [m.data["text"] for m in store.load_history("d1")] == ["0", "1", "2", "3", "4"]
    assert [m.data["text"] for m in store.load_history("d1", course=2)] == ["3", "4"]
    assert store.count_messages("d1") == 5


def test_messages_appended_together_get_their_ids_in_order_in_one_statement(
    store: Store,
) -> None:
    """A step's messages go in as one multi-row insert (batched past `INSERT_BATCH`):
    each record gets the id of its own row, in order, after rows others appended."""
    store.create_dialog(_dialog())
    store.create_dialog(_dialog("d2"))
    store.append_message("d2", "user", {"text": "other"})
    texts = [str(i) for i in range(INSERT_BATCH + 3)]
    before = store.stats.statements
    stored = store.append_messages(
        [MessageRecord(dialog_id="d1", kind="user", data={"text": t}) for t in texts]
    )
    assert store.stats.statements - before == 2  # two batches
    loaded = store.load_history("d1")
    assert [(m.id, m.data["text"]) for m in stored] == [(m.id, m.data["text"]) for m in loaded]
    assert [m.data["text"] for m in loaded] == texts
    assert sorted(m.id for m in stored) == [m.id for m in stored]


def test_a_write_transaction_reads_a_dialog_once_until_it_writes_one(store: Store) -> None:
    """It holds the write lock: what it read stands till its own write of the table."""
    store.create_dialog(_dialog())
    with store.tx():
        before = store.stats.statements
        first = store.get_dialog("d1")
        again = store.get_dialog("d1")
        assert store.stats.statements - before == 1
        assert again == first and again is not first  # each caller's own record
        again.title = "changed by a caller"
        assert store.get_dialog("d1").title is None
        store.update_dialog("d1", title="written")
        assert store.get_dialog("d1").title == "written"  # read again after the write
    other = open_store(store.path, "sqlite") if store.dialect.name == "sqlite" else None
    if other is not None:  # another connection's commit is seen by the next transaction
        other.update_dialog("d1", title="theirs")
        other.close()
        with store.tx():
            assert store.get_dialog("d1").title == "theirs"


def test_generation_and_its_messages_commit_together(store: Store) -> None:
    store.create_dialog(_dialog())
    gen = GenerationRecord(dialog_id="d1", provider="p", model="m", started_at=1.0, input_tokens=3)
    g, msgs = store.record_generation(
        gen, [MessageRecord(dialog_id="d1", kind="assistant", data={"text": "hi"})]
    )
    assert g.id > 0 and msgs[0].generation_id == g.id
    assert store.generations("d1")[0].input_tokens == 3


def test_resolve_dialog_id_by_prefix(store: Store) -> None:
    store.create_dialog(_dialog("dabc1"))
    store.create_dialog(_dialog("dabc2"))
    store.create_dialog(_dialog("dxyz"))
    assert store.resolve_dialog_id("dx") == "dxyz"
    assert store.resolve_dialog_id("dabc1") == "dabc1"
    with pytest.raises(NotFoundError, match="ambiguous"):
        store.resolve_dialog_id("dabc")
    with pytest.raises(NotFoundError, match="no dialog"):
        store.resolve_dialog_id("zz")
    with pytest.raises(NotFoundError):
        store.get_dialog("nope")


def test_taskdoc_audit_history(store: Store) -> None:
    for i in range(3):
        store.record_taskdoc_change(
            TaskdocChange(
                task_path="tasks/x.tsk",
                section="progress.md",
                actor_member="dev",
                ts=float(i),
                hash_after=f"h{i}",
                content_after=f"v{i}",
                content_before=f"v{i - 1}" if i else None,
            )
        )
    hist = store.taskdoc_history("tasks/x.tsk", "progress.md")
    assert [h.content_after for h in hist] == ["v0", "v1", "v2"]
    assert store.taskdoc_history("tasks/x.tsk", "goals.md") == []


def test_tree_records_round_trip(store: Store) -> None:
    store.create_dialog(_dialog("r"))
    store.create_dialog(_dialog("s", root_id="r", kind="side", parent_id="r"))
    p = store.add_pending(
        PendingTellask(
            caller_id="r", side_id="s", call_id="c1", call_type="fresh", headline="@x hi"
        )
    )
    assert [x.side_id for x in store.pending_for("r")] == ["s"]
    assert store.remove_pending(p.id) and not store.remove_pending(p.id)
    resp = store.add_response(
        ResponseRecord(caller_id="r", side_id="s", call_id="c1", data={"text": "2"})
    )
    assert [x.id for x in store.undelivered_responses("r")] == [resp.id]
    store.mark_delivered([resp.id])
    assert store.undelivered_responses("r") == []
    q = store.add_question(
        QuestionRecord(
            id="q4h-1", dialog_id="r", root_id="r", headline="h", body="b", call_id="c", course=1
        )
    )
    assert [x.id for x in store.open_questions()] == [q.id]
    store.close_question("q4h-1", answer="A", status="answered")
    assert store.open_questions() == [] and store.get_question("q4h-1").answer == "A"
    with pytest.raises(NotFoundError):
        store.close_question("q4h-1", answer="again", status="answered")
    store.register_session("r", "dev!s1", "s")
    assert store.lookup_session("r", "dev!s1") == "s" and store.lookup_session("r", "x") is None
    store.set_reminders("r", ["one", "two"])
    assert [x.content for x in store.reminders("r")] == ["one", "two"]


def test_a_course_loads_as_it_was_written_and_leaves_the_collector_as_it_was(
    store: Store,
) -> None:
    """`history_view` parses a whole column of JSON at once and pauses the cyclic garbage
    collector meanwhile: the data comes back exactly, and the collector's state is the
    caller's afterwards (also when the caller had it off)."""
    import gc

    store.create_dialog(_dialog())
    datas = [
        {"text": "plain"},
        {"text": 'quotes " and \\ backslashes, ünïcödé, 中文, \u2028 and \n newlines'},
        {"id": "c1", "name": "noop", "arguments": '{"n": [1, 2.5, null, true]}'},
        {"call_id": "c1", "content": "", "is_error": False, "nested": {"a": [{}, []]}},
        {},
    ]
    for data in datas:
        store.append_message("d1", "tool_result", data)
    assert gc.isenabled()
    assert [row[2] for row in store.history_view("d1", 1)] == datas
    assert gc.isenabled()
    gc.disable()
    try:
        assert len(store.history_view("d1", 1)) == len(datas)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_json_values_sqlite_stored_as_numbers_still_parse() -> None:
    """JSON columns have NUMERIC affinity in SQLite: a JSON number comes back as a number,
    which the column-at-once parser takes as it is."""
    from mindloop.store.sqlite_direct import _json_column

    assert _json_column(['{"a": 1}', None, "[1, 2]", '"s"']) == [{"a": 1}, None, [1, 2], "s"]
    assert _json_column(['{"a": 1}', 5, None, 2.5]) == [{"a": 1}, 5, None, 2.5]
