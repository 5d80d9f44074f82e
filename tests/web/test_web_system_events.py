"""`POST /system-events` on the web server (audit item 12), over plain HTTP: a system event
resolves a task's `wait_for{event_type, filter}` wait and the server drives the task's
loop on to DONE; a payload that is not a JSON object is refused (400) with nothing
written."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindloop.store import Store
from mindloop.store import loop_state as ls
from tests.cli.test_cli_event import SCRIPT, _event_waits
from tests.cli.test_cli_loop import TASK
from tests.dialogs.procs import Procs, read_store, wait_until
from tests.scenario_util import write_script
from tests.web.webproc import start_web, stop_web


@pytest.fixture
def procs(rtws: Path, tmp_path: Path) -> Iterator[Procs]:
    write_script(rtws, SCRIPT)
    procs = Procs(rtws, tmp_path / "logs")
    try:
        yield procs
    finally:
        procs.close()


def _status(store: Store) -> str | None:
    state = ls.get(store, TASK)
    return state.status.value if state is not None else None


def test_an_event_posted_resolves_the_wait_and_the_server_drives_the_loop(
    procs: Procs, rtws: Path
) -> None:
    run = procs.start("run", TASK, "-m", "release it")
    [wait_id] = wait_until(lambda: read_store(rtws, _event_waits), 60, "the deploy wait")
    run.popen.send_signal(signal.SIGINT)
    assert procs.finish(run, 60) == 130
    web = start_web(procs)
    status, _, body = web.request(
        "POST", "/system-events", {"event_type": "deploy", "payload": [1]}
    )
    assert status == 400 and "a JSON object is needed" in json.loads(body)["error"]
    assert read_store(rtws, _event_waits) == [wait_id]
    got = web.call(
        "POST", "/system-events", {"event_type": "deploy", "key": "v2", "payload": {"env": "prod"}}
    )
    assert got["ok"] and got["delivered"]["resolved"] == [wait_id]
    assert got["delivered"]["kept"] is None and len(got["delivered"]["root_ids"]) == 1
    wait_until(lambda: read_store(rtws, _status) == "DONE", 60, "the task to end DONE")
    assert stop_web(procs, web) == 130  # Ctrl-C, as a user stops it
