"""A watching `mindloop run --watch` runs a task's loop whenever its tree gets work while
it watches — a message posted by another process (the web UI without its own driver,
`ask`, a script through the service) — not only the loops that had work when it started;
and it never drives a loop root as a plain dialog."""

from __future__ import annotations

from pathlib import Path

from mindloop import service
from mindloop.store import Store
from tests.dialogs.procs import Procs, read_store, tail, wait_until
from tests.scenario_util import ml, write_script

TASK = "tasks/example.tsk"
TIMEOUT = 60


def _history(store: Store) -> tuple[str | None, list[str]]:
    task = store.task_by_path(TASK)
    if task is None:
        return None, []
    said = [
        str(m.data.get("loop", {}).get("phase") or m.data.get("text"))
        for m in store.load_history(task.root_id)
        if m.kind in ("user", "assistant")
    ]
    return task.status, said


async def test_a_watching_run_runs_the_loop_of_a_task_messaged_after_it_started(
    tmp_path: Path,
) -> None:
    rtws = tmp_path / "p"
    assert ml("init", str(rtws), cwd=tmp_path).returncode == 0
    write_script(
        rtws,
        [
            {"contains": "[work loop] Phase PLAN", "response": "Planned: nothing to split."},
            {"contains": "[work loop] Phase SELF_IMPROVE", "response": "Nothing to improve."},
            # a loop root driven as a plain dialog sees the raw message last
            {"contains": "check the readme", "response": "DRIVEN AS A PLAIN DIALOG"},
        ],
    )
    procs = Procs(rtws, tmp_path / "logs")
    try:
        watcher = procs.start("run", "--watch")
        wait_until(lambda: (rtws / ".mindloop").exists(), TIMEOUT, "the watcher's state")
        async with service.open_project(rtws) as project:  # another process's post
            service.message_task(project, TASK, "check the readme")

        def done() -> list[str] | None:
            assert watcher.alive(), tail(watcher)
            status, said = read_store(rtws, _history)
            return said if status == "DONE" else None

        said = wait_until(done, TIMEOUT, "the task's loop to end DONE", interval=0.2)
    finally:
        procs.close()
    assert said == [
        "check the readme",
        "PLAN",
        "Planned: nothing to split.",
        "SELF_IMPROVE",
        "Nothing to improve.",
    ], tail(watcher)
