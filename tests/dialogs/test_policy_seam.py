"""The turn policy seam through the public API (issue 9, part 5).

A program plugs its own policy in with `DialogRuntime(policies=...)`: it decides, per
request, which tools are offered and whether a requested call may run (a refusal has its
own code, distinct from an unknown tool), which tellasks may run, and whether the drive
goes on. FBR side dialogs run `fbr.FbrPolicy`, chosen the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mindloop import DefaultPolicy, DialogRuntime, DriveEnd, Scheduler
from mindloop.dialogs.fbr import FbrPolicy
from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.outcomes import StepOutcome
from mindloop.dialogs.request import RequestBuilder
from mindloop.dialogs.routing import Route, RouteKind, refuse_route
from mindloop.store import DialogRecord
from mindloop.testing import ScriptedModel, Turn, call
from mindloop.tools.base import Tool
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


class OneToolPerStep(DefaultPolicy):
    """Offers `list_dir` on the first request, `read_file` on every later one; refuses
    any `@human` question; stops the drive after three steps."""

    def __init__(self) -> None:
        self.steps = 0

    def offered_tools(self, live: LiveDialog, parts: RequestBuilder) -> Sequence[Tool]:
        wanted = "list_dir" if self.steps == 0 else "read_file"
        self.steps += 1
        return [t for t in super().offered_tools(live, parts) if t.name == wanted]

    def check_routes(
        self, live: LiveDialog, parts: RequestBuilder, routes: list[Route]
    ) -> list[Route]:
        return [
            refuse_route(r, "HUMAN_NOT_NOW", "no questions in this phase")
            if r.kind is RouteKind.HUMAN
            else r
            for r in routes
        ]

    def goes_on(self, live: LiveDialog, parts: RequestBuilder, step: StepOutcome) -> bool:
        return self.steps < 3


async def test_a_custom_policy_restricts_tools_per_request_and_refuses_calls(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    (rtws / "notes.txt").write_text("hello", "utf-8")
    model = ScriptedModel(
        [
            Turn(tool_calls=[call("list_dir", path="."), call("read_file", path="notes.txt")]),
            Turn(text="!?@human may I?\n", tool_calls=[call("read_file", path="notes.txt")]),
            Turn(tool_calls=[call("read_file", path="notes.txt")]),
            Turn(text="never reached"),
        ]
    )
    policy = OneToolPerStep()

    def policies(rec: DialogRecord) -> DefaultPolicy | None:
        return policy if rec.kind == "root" else None

    rt = DialogRuntime(rtws, providers={"mock": model}, policies=policies)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    [result] = await Scheduler(rt).run()
    assert result.reason is DriveEnd.STOPPED and result.steps == 3
    offered = [[t.name for t in req.tools] for req in model.requests]
    assert offered == [["list_dir"], ["read_file"], ["read_file"]]
    results = [m.data for m in rt.store.load_history(root.id) if m.kind == "tool_result"]
    listed, refused = results[0], results[1]
    assert not listed["is_error"] and "notes.txt" in listed["content"]
    assert refused["is_error"] and refused["content"].startswith("Error [TOOL_NOT_ALLOWED]:")
    assert "unknown tool" not in refused["content"]
    assert not results[2]["is_error"] and results[2]["content"].strip().endswith("hello")
    notes = [m.data for m in rt.store.load_history(root.id) if m.kind == "tellask_result"]
    assert notes and "HUMAN_NOT_NOW" in notes[0]["text"]
    assert rt.store.open_questions() == []  # the refused question was never asked
    await rt.aclose()


async def test_fbr_dialogs_run_the_fbr_policy_and_others_the_default(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    rt = DialogRuntime(rtws)
    root = rt.create_root_dialog(TASK, "dev")
    fbr = root.model_copy(update={"id": "f1", "kind": "fbr", "parent_id": root.id})
    assert isinstance(rt.policy_for(fbr), FbrPolicy)
    assert type(rt.policy_for(root)) is DefaultPolicy
    await rt.aclose()
