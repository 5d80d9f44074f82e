"""The one private interface of DBOS that the workers use: a worker that takes over a
silent one returns that executor's pending workflows to their queues with
`DBOS._recover_pending_workflows([executor_id])` (`durable/worker.py::_take_over_gone`);
self-hosted DBOS documents that recovery only as the admin API's endpoint. `dbos` is
pinned below its next major version; a release that drops or reshapes the call fails
here, by name, rather than in a takeover on a live fleet."""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ALTERNATIVE = (
    "the documented alternative: POST the executor ids to the admin API's "
    "/dbos-workflow-recovery endpoint of a live worker (or let DBOS Conductor recover)"
)


def test_the_recovery_call_the_takeover_makes_is_in_dbos() -> None:
    from dbos import DBOS

    recover = getattr(DBOS, "_recover_pending_workflows", None)
    assert callable(recover), (
        "dbos has no DBOS._recover_pending_workflows any more, which "
        "durable/worker.py::_take_over_gone calls to recover a silent worker's workflows; "
        f"port the takeover to {ALTERNATIVE}"
    )
    params = list(inspect.signature(recover).parameters)
    assert params[:1] == ["executor_ids"], (
        f"DBOS._recover_pending_workflows now takes {params}, not (executor_ids): "
        f"adapt durable/worker.py::_take_over_gone, or port it to {ALTERNATIVE}"
    )


def test_dbos_is_pinned_below_its_next_major_version() -> None:
    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]
    [spec] = [
        Requirement(r).specifier
        for r in project["optional-dependencies"]["postgres"]
        if Requirement(r).name == "dbos"
    ]
    assert Version("3.4") in spec and Version("4.0") not in spec, (
        f"dbos{spec}: pin it below 4 (a private call of it is used, see this module)"
    )
