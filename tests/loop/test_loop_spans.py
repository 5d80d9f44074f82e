"""Each loop phase is a span (`loop_phase {phase}`) carrying the task and the loop root's
dialog id like every other span, and the loop root's drives during the phase are its
children (issue 12, part 5; issue 13, part 3)."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mindloop import service
from mindloop.testing import ScriptedModel
from tests.loop.loop_util import TASK, complete, create, end, turn, verdict
from tests.scenario_util import write_team


async def test_phases_are_spans_with_their_drives_as_children(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(
        [
            turn(create("a"), end("DO")),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    async with service.open_project(
        rtws, providers={"mock": model}, tracer_provider=provider
    ) as project:
        report = await service.run_task(project, TASK, message="do a")
        assert report.outcome is service.Outcome.DONE
    spans = exporter.get_finished_spans()
    phases = [s for s in spans if s.name.startswith("loop_phase ")]
    assert [s.name for s in phases] == [
        "loop_phase PLAN",
        "loop_phase DO",
        "loop_phase CHECK",
        "loop_phase SELF_IMPROVE",
    ]
    do = phases[1]
    assert do.attributes is not None and do.attributes["mindloop.loop.node"] == "n1"
    assert do.attributes["mindloop.loop.ended_by"] == "phase_end"
    assert do.attributes["mindloop.loop.hint"] == "CHECK"
    drives = [s for s in spans if s.name == "invoke_agent dev"]
    assert len(drives) == 4
    for phase, drive in zip(phases, drives, strict=True):
        assert drive.parent is not None and phase.context is not None
        assert drive.parent.span_id == phase.context.span_id
    # the ids every span carries (issue 13): the task, and the loop root's dialog
    (root,) = {d.attributes["mindloop.dialog.id"] for d in drives if d.attributes is not None}
    assert root
    for entry, phase in enumerate(phases, 1):
        assert phase.attributes is not None
        assert phase.attributes["mindloop.task"] == TASK, phase.name
        assert phase.attributes["mindloop.dialog.id"] == root, phase.name
        assert phase.attributes["mindloop.loop.entry"] == entry, phase.name
