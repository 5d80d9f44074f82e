"""`mindloop event TYPE --key K --payload JSON` (audit item 12): a system event from
outside resolves a task's `wait_for{event_type, filter}` wait and drives the task's loop
on, shown as `run TASK` shows it; an event that comes first is kept and matched when the
wait opens; a payload that is not a JSON object is refused before anything is written."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from mindloop.store import Store
from tests.cli.test_cli_loop import COMPLETE, TASK, _create, _end, _move
from tests.dialogs.procs import read_store, wait_until
from tests.scenario_util import ml, ml_started, write_script

WAIT = {
    "name": "wait_for",
    "arguments": {"event_type": "deploy", "filter": {"key": "v2"}, "reason": "the deploy"},
}
SCRIPT: list[dict[str, Any]] = [
    {"contains": "Phase SELF_IMPROVE (entry", "tool_calls": [_end("END")]},
    {"contains": "Phase PLAN (entry", "tool_calls": [_create("release")]},
    {"role": "tool", "contains": "created n1", "tool_calls": [_end("DO")]},
    # the node waits for the deploy; DO takes it up again with the event in its input
    {
        "contains": "system event 'deploy'",
        "tool_calls": [_move("n1", "COMPLETE", **COMPLETE), _end("CHECK")],
    },
    {"contains": "Phase DO (entry", "tool_calls": [WAIT]},
    {
        "contains": "Phase CHECK (entry",
        "tool_calls": [_move("n1", "DONE", conclusion="deployed"), _end("END")],
    },
]


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(proj, SCRIPT)
    return proj


def _event_waits(store: Store) -> list[str]:
    return [
        w.id for d in store.list_dialogs() for w in store.open_waits(d.id) if w.kind == "external"
    ]


def test_an_event_resolves_the_loops_wait_and_drives_the_task_on(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    # the task waits for the deploy (a run would wait up to 24 h): stop it there
    run = ml_started("run", TASK, "-m", "release it", *c, cwd=tmp_path)
    wait_until(lambda: read_store(proj, _event_waits), 60, "the wait for the deploy")
    run.send_signal(signal.SIGINT)
    run.communicate(timeout=60)
    assert run.returncode == 130
    other = ml("event", "deploy", "--key", "v1", *c, cwd=tmp_path)  # the filter wants v2
    assert other.returncode == 0, other.stdout + other.stderr
    assert "kept until one opens" in other.stdout
    assert read_store(proj, _event_waits)  # still open
    out = ml("event", "deploy", "--key", "v2", "--payload", '{"env": "prod"}', *c, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert "event deploy (key v2): resolved 1 wait(s)" in out.stdout
    for line in ("━━ DO (entry 3)", "━━ CHECK (entry 4)", "1/1 nodes", f"task {TASK}: done"):
        assert line in out.stdout, out.stdout[-3000:]
    assert not read_store(proj, _event_waits)
    st = json.loads(ml("status", TASK, "--json", *c, cwd=tmp_path).stdout)
    assert st["status"] == "DONE"


def test_an_event_that_comes_first_is_kept_and_matched_when_the_wait_opens(
    tmp_path: Path,
) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    early = ml("event", "deploy", "-k", "v2", "--json", *c, cwd=tmp_path)
    assert early.returncode == 0, early.stderr
    data = json.loads(early.stdout)
    assert data["driven"] is False and data["delivered"]["kept"] is not None
    out = ml("run", TASK, "-m", "release it", *c, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert f"task {TASK}: done" in out.stdout


def test_a_bad_payload_or_type_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    for args, said in (
        (["deploy", "--payload", "[1, 2]"], "--payload: a JSON object is needed, got list"),
        (["deploy", "--payload", "{nope"], "--payload: not JSON"),
        (["  "], "the event type is empty"),
    ):
        out = ml("event", *args, *c, cwd=tmp_path)
        assert out.returncode == 1 and said in out.stderr, (args, out.stderr)
    assert not (proj / ".mindloop" / "state.sqlite").exists()
    assert ml("event", *c, cwd=tmp_path).returncode == 2  # no type: a usage error
