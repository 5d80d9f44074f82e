"""Usage as store queries: tokens and cost summed per dialog, per dialog tree, per task,
unpriced generations counted apart; and a v3 database gaining the cost column."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mindloop.store import DialogRecord, GenerationRecord, Store, UsageTotals
from mindloop.store import schema as t
from tests.store.stores import KINDS, downgrade, open_store


@pytest.fixture(params=KINDS)
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    s = open_store(tmp_path / ".mindloop" / "state.sqlite", request.param)
    yield s
    s.close()


def _dialog(s: Store, did: str, root: str, task: str = "tasks/a.tsk") -> None:
    kind = "root" if did == root else "side"
    s.create_dialog(
        DialogRecord(
            id=did,
            root_id=root,
            parent_id=None if did == root else root,
            member="m",
            task_path=task,
            kind=kind,
        )
    )


def _gen(s: Store, did: str, tin: int | None, tout: int | None, cost: float | None) -> None:
    s.record_generation(
        GenerationRecord(
            dialog_id=did,
            provider="p",
            model="x",
            started_at=1.0,
            input_tokens=tin,
            output_tokens=tout,
            cost_usd=cost,
        ),
        [],
    )


def test_usage_sums_a_dialog_its_tree_and_its_task(store: Store) -> None:
    # Two trees on task a (r1 with sides s1, s2; r2 alone), one tree on task b.
    for did, root, task in [
        ("r1", "r1", "tasks/a.tsk"),
        ("s1", "r1", "tasks/a.tsk"),
        ("s2", "r1", "tasks/a.tsk"),
        ("r2", "r2", "tasks/a.tsk"),
        ("r3", "r3", "tasks/b.tsk"),
    ]:
        _dialog(store, did, root, task)
    _gen(store, "r1", 100, 10, 0.5)
    _gen(store, "r1", 200, 20, 0.25)
    _gen(store, "s1", 50, 5, None)  # no known price
    _gen(store, "s2", None, None, 0.0)  # no usage reported, free
    _gen(store, "r2", 7, 3, 1.0)
    _gen(store, "r3", 1000, 1000, 9.0)

    assert store.usage(dialog_id="r1") == UsageTotals(
        generations=2, input_tokens=300, output_tokens=30, cost_usd=0.75, unpriced=0
    )
    tree = store.usage(root_id="r1")
    assert tree == UsageTotals(
        generations=4, input_tokens=350, output_tokens=35, cost_usd=0.75, unpriced=1
    )
    assert tree.tokens == 385
    task = store.usage(task_path="tasks/a.tsk")
    assert (task.generations, task.tokens, task.cost_usd, task.unpriced) == (5, 395, 1.75, 1)
    assert store.usage(task_path="tasks/none.tsk") == UsageTotals()
    assert store.usage(dialog_id="r-none") == UsageTotals()

    by_dialog = store.usage_by_dialog()
    assert set(by_dialog) == {"r1", "s1", "s2", "r2", "r3"}
    total = UsageTotals()
    for did in ("r1", "s1", "s2"):
        total.merge(by_dialog[did])
    assert total == tree  # the per-dialog rows add up to the tree
    with pytest.raises(ValueError, match="exactly one"):
        store.usage(dialog_id="r1", root_id="r1")


@pytest.mark.parametrize("kind", KINDS)
def test_a_v3_database_gains_the_cost_column_and_keeps_its_generations(
    tmp_path: Path, kind: str
) -> None:
    db = tmp_path / ".mindloop" / "state.sqlite"
    s = open_store(db, kind)
    _dialog(s, "old", "old")
    _gen(s, "old", 10, 1, 0.5)
    downgrade(  # back to v3, as the previous mindloop left it
        s,
        "ALTER TABLE generations DROP COLUMN cost_usd",
        "UPDATE schema_version SET version = 3",
    )
    s = open_store(db, kind)
    assert s.schema_version() == t.SCHEMA_VERSION
    [gen] = s.generations("old")
    assert (gen.input_tokens, gen.cost_usd) == (10, None)  # priced before costs were kept
    assert s.usage(dialog_id="old") == UsageTotals(
        generations=1, input_tokens=10, output_tokens=1, unpriced=1
    )
    s.close()
