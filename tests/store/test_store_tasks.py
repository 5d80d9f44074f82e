"""The work loop's store tables: `tasks` (one loop root per package, the loop's state of
the task, versioned writes) and `router_decisions` (every Router run, with its input,
candidates, decision and usage)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.errors import NotFoundError
from mindloop.store import (
    DialogRecord,
    LoopPhase,
    RouterAttempt,
    RouterCandidate,
    RouterDecision,
    RouterRecord,
    Store,
    TaskRecord,
    TaskStatus,
)
from mindloop.store.tasks import TaskAlreadyBound
from tests.store.stores import KINDS, open_store


@pytest.fixture(params=KINDS)
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    s = open_store(tmp_path / ".mindloop" / "state.sqlite", request.param)
    yield s
    s.close()


def _task(store: Store, tid: str, path: str, root: str) -> TaskRecord:
    store.create_dialog(DialogRecord(id=root, root_id=root, member="dev", task_path=path))
    return store.insert_task(TaskRecord(id=tid, task_path=path, root_id=root, topic=f"{tid}!"))


def test_a_task_is_found_by_id_package_and_root(store: Store) -> None:
    rec = _task(store, "t1", "tasks/a.tsk", "r1")
    assert rec.created_at > 0 and rec.version == 1 and rec.status is TaskStatus.ACTIVE
    assert store.get_task("t1") == rec
    assert store.task_by_path("tasks/a.tsk") == rec
    assert store.task_by_root("r1") == rec
    assert store.task_by_path("tasks/b.tsk") is None and store.task_by_root("r2") is None
    with pytest.raises(NotFoundError):
        store.get_task("t9")


def test_a_package_or_a_root_is_bound_once(store: Store) -> None:
    _task(store, "t1", "tasks/a.tsk", "r1")
    with pytest.raises(TaskAlreadyBound):
        store.insert_task(TaskRecord(id="t2", task_path="tasks/a.tsk", root_id="r2", topic="x"))
    with pytest.raises(TaskAlreadyBound):
        store.insert_task(TaskRecord(id="t3", task_path="tasks/c.tsk", root_id="r1", topic="x"))
    assert [t.id for t in store.iter_tasks()] == ["t1"]  # the failed inserts left nothing


def test_loop_writes_bump_the_version_and_lose_to_a_newer_writer(store: Store) -> None:
    rec = _task(store, "t1", "tasks/a.tsk", "r1")
    moved = store.update_task("t1", expected_version=1, phase=LoopPhase.PLAN)
    assert moved is not None and (moved.phase, moved.version) == (LoopPhase.PLAN, 2)
    assert moved.updated_at >= rec.updated_at
    # a writer that read version 1 lost: nothing changes
    assert store.update_task("t1", expected_version=1, status=TaskStatus.FAILED) is None
    assert store.get_task("t1").status is TaskStatus.ACTIVE
    done = store.update_task("t1", status=TaskStatus.DONE, status_reason="all nodes DONE")
    assert done is not None and (done.status, done.version) == (TaskStatus.DONE, 3)
    with pytest.raises(ValueError, match="root_id"):
        store.update_task("t1", root_id="r9")
    with pytest.raises(NotFoundError):
        store.update_task("t9", topic="x")


def test_recent_tasks_are_the_most_recently_updated(store: Store) -> None:
    for i in range(3):
        _task(store, f"t{i}", f"tasks/{i}.tsk", f"r{i}")
    store.update_task("t0", topic="updated")
    assert [t.id for t in store.recent_tasks(2)] == ["t0", "t2"]
    store.touch_task("t1")  # a message came in: active now, but no loop write
    assert [t.id for t in store.recent_tasks(2)] == ["t1", "t0"]
    assert store.get_task("t1").version == 1


def test_deleting_a_loop_roots_tree_unbinds_its_task(store: Store) -> None:
    _task(store, "t1", "tasks/a.tsk", "r1")
    _task(store, "t2", "tasks/b.tsk", "r2")
    assert store.delete_tree("r1") == ["r1"]
    assert store.task_by_path("tasks/a.tsk") is None
    assert store.task_by_path("tasks/b.tsk") is not None


def test_router_runs_are_recorded_whole(store: Store) -> None:
    cands = [RouterCandidate(task="tasks/a.tsk", topic="Login", status=TaskStatus.ACTIVE)]
    ok = store.record_router_decision(
        RouterRecord(
            message="continue the login work",
            candidates=cands,
            status="accepted",
            decision=RouterDecision(target_task_id="tasks/a.tsk", quick_reply="On it."),
            attempts=[
                RouterAttempt(answer='{"target_task_id": "tasks/x.tsk"}', error="not listed"),
                RouterAttempt(answer='{"target_task_id": "tasks/a.tsk"}'),
            ],
            task_path="tasks/a.tsk",
            root_id="r1",
            member="dev",
            provider="mock",
            model="mock-model",
            input_tokens=120,
            output_tokens=30,
            cost_usd=0.0,
        )
    )
    failed = store.record_router_decision(
        RouterRecord(
            message="hm",
            candidates=[],
            status="failed",
            error="HTTP 500",
            member="dev",
            provider="mock",
            model="mock-model",
        )
    )
    assert ok.id and failed.id > ok.id and ok.created_at > 0
    assert store.router_decisions() == [ok, failed]
    assert store.router_decisions(limit=1) == [failed]
    [back] = store.router_decisions(limit=2)[:1]
    assert back.decision is not None and back.decision.target_task_id == "tasks/a.tsk"
    assert back.candidates[0].status is TaskStatus.ACTIVE


def test_a_decision_names_exactly_one_target() -> None:
    with pytest.raises(ValueError, match="not both"):
        RouterDecision(target_task_id="tasks/a.tsk", create_new_task=True)
    with pytest.raises(ValueError, match="no target"):
        RouterDecision()
    assert RouterDecision(create_new_task=True).target_task_id is None
