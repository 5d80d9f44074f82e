"""A recovered drive does not run again a tool call that completed: a worker dies just
after a Python tool returned (`MINDLOOP_TEST_CRASH_AT=tool.after:1`, its result not yet
committed to the store), another worker takes its drive over, and the call's recorded
DBOS step (`mindloop.tool`, under its call key) stands for it — the tool ran once."""

from __future__ import annotations

import signal
from pathlib import Path

import psycopg
import pytest
import yaml

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.store import Store
from mindloop.store.location import DATABASE_URL_ENV
from tests import pg
from tests.dialogs.procs import tail, wait_until
from tests.durable.fleet import TIMEOUT, final_answer, procs_on, start_worker
from tests.scenario_util import ml, write_script

TOOLS = '''
from mindloop.toolsets.python import tool


@tool
def bump(label: str) -> str:
    """Count one execution of this tool in a file.

    Args:
        label: What to write.
    """
    with open({count!r}, "a", encoding="utf-8") as fh:
        fh.write(label + "\\n")
    return "bumped " + label
'''


def _project(tmp_path: Path, count: Path) -> Path:
    rtws = tmp_path / "proj"
    assert ml("init", str(rtws)).returncode == 0
    team = {
        "member_defaults": {"provider": "mock", "model": "mock-model"},
        "default_responder": "dev",
        "python_tools": ["counttools"],
        "members": {"dev": {"toolsets": ["counttools"]}},
    }
    (rtws / ".minds" / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False), "utf-8")
    (rtws / "counttools.py").write_text(TOOLS.format(count=str(count)), "utf-8")
    write_script(
        rtws,
        [
            {"member": "dev", "role": "user", "match": "go", "tool_calls": [
                {"name": "bump", "arguments": {"label": "once"}}
            ]},
            {"member": "dev", "role": "tool", "response": "bumped it"},
        ],
    )  # fmt: skip
    return rtws


def test_a_recovered_drive_does_not_run_a_completed_tool_call_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = pg.server().database_url()
    count = tmp_path / "executions.txt"
    rtws = _project(tmp_path, count)
    monkeypatch.setenv(DATABASE_URL_ENV, database)
    procs = procs_on(rtws, tmp_path / "logs", database)
    store = Store.for_rtws(rtws)
    try:
        # A dies right after the tool returned: its result is not committed.
        a = start_worker(procs, "A", env={"MINDLOOP_TEST_CRASH_AT": "tool.after:1"})
        root, _ = DialogRuntime(rtws, store=store).start_root_dialog("tasks/example.tsk", "go")
        assert procs.finish(a, TIMEOUT) == 86, tail(a)
        assert count.read_text("utf-8").split() == ["once"]
        b = start_worker(procs, "B")
        wait_until(
            lambda: final_answer(store, root.id) == "bumped it" and not store.tree_busy(root.id),
            TIMEOUT,
            "the root's final answer",
            interval=0.2,
        )
        b.popen.send_signal(signal.SIGTERM)
        assert procs.finish(b, TIMEOUT) == 0, tail(b)
        results = [m for m in store.load_history(root.id) if m.kind == "tool_result"]
    finally:
        procs.close()
        store.close()
    assert count.read_text("utf-8").split() == ["once"]  # B did not run it again
    assert len(results) == 1 and "bumped once" in str(results[0].data), results
    with psycopg.connect(database) as conn:
        steps = conn.execute(
            "SELECT count(*) FROM dbos.operation_outputs WHERE function_name = %s",
            ("mindloop.tool",),
        ).fetchone()
    assert steps == (1,)
