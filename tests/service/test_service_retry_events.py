"""A project's listeners hear every retry of a model call as a `ProviderRetried` event of
the dialog whose generation is retried — a side dialog's retries are its own, while its
caller waits — and the retries go to the rotating log's logger too."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mindloop import service
from mindloop.events.types import Event, GenerationStarted, ProviderRetried
from mindloop.rtws import init_rtws
from mindloop.testing import Failure, ScriptedModel, Turn
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"
BUSY = Failure(message="overloaded, try again", status=529, retriable=True)


async def test_retries_are_events_of_the_dialog_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    init_rtws(tmp_path, provider="mock")
    write_team(tmp_path, {"lead": {}, "helper": {}})
    model = ScriptedModel(
        {
            "lead": ["!?@helper Count the files.\n", "done"],
            "helper": [Turn(error=BUSY), Turn(error=BUSY), "three"],
        }
    )
    events: list[Event] = []
    with caplog.at_level(logging.WARNING, logger="mindloop"):
        async with service.open_project(tmp_path, providers={"mock": model}) as project:
            project.subscribe(events.append)
            posted = service.start_chat(project, "go", task=TASK)
            report = await service.run(project, root_id=posted.dialog.id)
    assert report.outcome is service.Outcome.DONE
    side = next(d for d in report.tree if d.kind == "side")
    retries = [e for e in events if isinstance(e, ProviderRetried)]
    assert [(e.dialog_id, e.member, e.attempt, e.max_attempts, e.status) for e in retries] == [
        (side.id, "helper", 2, 5, 529),
        (side.id, "helper", 3, 5, 529),
    ]
    assert all(e.provider == "mock" and e.model == "mock-model" for e in retries)
    assert all("overloaded, try again" in e.error and e.delay >= 0 for e in retries)
    # Each retry comes after its dialog's generation started, and before it produced anything.
    started = [i for i, e in enumerate(events) if isinstance(e, GenerationStarted)]
    assert all(any(s < events.index(r) for s in started) for r in retries)
    logged = [r for r in caplog.records if r.name == "mindloop.providers.pool"]
    assert [r.retry["attempt"] for r in logged] == [2, 3]  # type: ignore[attr-defined]
