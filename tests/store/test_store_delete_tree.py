"""`Store.delete_tree`: a root dialog and its whole tree go, with every row that names one
of its dialogs, in every table; other trees and the Taskdoc audit stay; a tree a live
process drives is left alone. On both statement paths."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from mindloop.store import (
    DialogRecord,
    GenerationRecord,
    MessageRecord,
    PendingTellask,
    QuestionRecord,
    ResponseRecord,
    Store,
    TaskdocChange,
    WaitRecord,
)
from mindloop.store import schema as t
from tests.store.stores import KINDS, open_store

# Columns that name a dialog: after a deletion none of them may name a deleted one.
DIALOG_COLUMNS = ("id", "dialog_id", "root_id", "parent_id", "caller_id", "side_id")


def _tree(store: Store, root: str) -> list[str]:
    """A root with a side dialog under it, and a row in every table for both."""
    side = f"{root}-side"
    store.create_dialog(DialogRecord(id=root, root_id=root, member="dev", task_path="t.tsk"))
    store.create_dialog(
        DialogRecord(
            id=side, root_id=root, parent_id=root, member="qa", task_path="t.tsk", kind="side"
        )
    )
    for did in (root, side):
        store.append_message(did, "user", {"text": f"hi {did}"})
        store.record_generation(
            GenerationRecord(dialog_id=did, provider="mock", model="m", started_at=time.time()),
            [MessageRecord(dialog_id=did, kind="assistant", data={"text": "ok"})],
        )
        store.record_event("note", did, {"text": "x"})
        store.set_reminders(did, ["remember"])
        store.add_wait(WaitRecord(id=f"w-{did}", dialog_id=did, kind="timer", key=did))
    store.add_pending(
        PendingTellask(caller_id=root, side_id=side, call_id="c1", call_type="fresh", headline="h")
    )
    store.add_response(ResponseRecord(caller_id=root, side_id=side, call_id="c1", data={}))
    store.add_question(
        QuestionRecord(
            id=f"q-{side}",
            dialog_id=side,
            root_id=root,
            headline="?",
            body="",
            call_id="c2",
            course=1,
        )
    )
    store.register_session(root, "qa!s", side)
    return [root, side]


def _naming(store: Store, ids: list[str]) -> dict[str, int]:
    """Rows per table that name one of `ids` in a dialog column."""
    found: dict[str, int] = {}
    with store.tx() as conn:
        for table in t.metadata.sorted_tables:
            # (a string column: `events.id` is a row number, not a dialog's)
            cols = [
                table.c[c]
                for c in DIALOG_COLUMNS
                if c in table.c and isinstance(table.c[c].type, sa.String)
            ]
            if table is t.taskdoc_changes or not cols:
                continue
            n = conn.execute(
                sa.select(sa.func.count()).where(sa.or_(*(c.in_(ids) for c in cols)))
            ).scalar_one()
            if n:
                found[table.name] = n
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_a_tree_goes_with_every_row_naming_it_and_nothing_else(tmp_path: Path, kind: str) -> None:
    store = open_store(tmp_path / "s.sqlite", kind)
    gone = _tree(store, "a")
    kept = _tree(store, "b")
    store.record_taskdoc_change(
        TaskdocChange(
            task_path="t.tsk",
            section="goals.md",
            actor_member="dev",
            actor_dialog="a",
            ts=time.time(),
            hash_after="h",
            content_after="g",
        )
    )
    before = _naming(store, kept)
    assert set(_naming(store, gone)) >= {
        "dialogs",
        "messages",
        "generations",
        "events",
        "pending_tellasks",
        "responses",
        "questions",
        "sessions",
        "reminders",
        "waits",
    }

    assert store.delete_tree("a") == gone
    assert _naming(store, gone) == {}
    assert _naming(store, kept) == before  # the other tree is whole
    assert [c.actor_dialog for c in store.taskdoc_history("t.tsk")] == ["a"]  # audit stays
    assert store.delete_tree("a") == []  # nothing left to delete
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_tree_a_live_process_drives_is_left_alone(tmp_path: Path, kind: str) -> None:
    store = open_store(tmp_path / "s.sqlite", kind)
    ids = _tree(store, "a")
    now = time.time()
    assert store.claim_dialog(ids[1], "other-process", ttl=60, now=now)
    assert store.delete_tree("a", now=now) is None
    assert set(_naming(store, ids)) >= {"dialogs", "messages"}
    # Once the claim expired (its owner died), the tree can go.
    assert store.delete_tree("a", now=now + 61) == ids
    store.close()
