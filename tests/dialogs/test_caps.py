"""Spending caps (`caps:` in team.yaml) stop a drive before its next generation: per
drive in tokens or dollars, per task across every dialog and drive, with a note that
names the cap, and a run that reports it (chat exits 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mindloop import service
from mindloop.dialogs.outcomes import DriveEnd
from mindloop.store import DialogStatus
from mindloop.testing import ScriptedModel, Turn, call
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


def _tool_turn() -> Turn:
    return Turn(tool_calls=[call("list_dir", path=".")], input_tokens=100, output_tokens=10)


def _team(rtws: Path, caps: dict[str, Any], members: tuple[str, ...] = ("lead",)) -> None:
    write_team(rtws, {m: {"toolsets": ["fs"]} for m in members})
    path = rtws / ".minds" / "team.yaml"
    team = yaml.safe_load(path.read_text("utf-8"))
    path.write_text(yaml.safe_dump({**team, "caps": caps}, sort_keys=False), "utf-8")


def _price(rtws: Path, input_per_mtok: float) -> None:
    path = rtws / ".minds" / "llm.yaml"
    llm = yaml.safe_load(path.read_text("utf-8"))
    llm["providers"]["mock"]["models"]["mock-model"]["price"] = {
        "input_per_mtok": input_per_mtok,
        "output_per_mtok": 0,
    }
    path.write_text(yaml.safe_dump(llm, sort_keys=False), "utf-8")


async def _chat(rtws: Path, model: ScriptedModel, message: str = "go") -> service.DriveReport:
    async with service.open_project(rtws, providers={"mock": model}) as project:
        posted = service.start_chat(project, message, task=TASK)
        return await service.run(project, root_id=posted.dialog.id)


async def test_a_drive_token_cap_stops_the_drive_before_its_next_generation(rtws: Path) -> None:
    _team(rtws, {"drive": {"max_tokens": 250}})
    model = ScriptedModel([_tool_turn() for _ in range(5)])
    report = await _chat(rtws, model)
    [drive] = report.drives
    assert drive.reason is DriveEnd.CAP_REACHED
    assert (drive.usage.generations, drive.usage.tokens, drive.steps) == (3, 330, 3)
    assert model.remaining == 2  # no generation after the cap was reached
    assert drive.cap is not None
    assert "this drive used 330 tokens, its cap is 250" in drive.cap
    assert "caps.drive.max_tokens in .minds/team.yaml" in drive.cap
    assert report.outcome is service.Outcome.CAP_REACHED and report.capped == [drive]
    shown = service.show_dialog(rtws, drive.dialog_id)
    assert shown.dialog.status is DialogStatus.STOPPED
    assert shown.messages[-1].kind == "note" and shown.messages[-1].data["text"] == drive.cap
    assert shown.usage.tokens == 330 == report.usage.tokens


async def test_a_drive_cost_cap_counts_the_price_set_in_llm_yaml(rtws: Path) -> None:
    _team(rtws, {"drive": {"max_cost": 0.25}})
    _price(rtws, 1000)  # $0.001 a token: $0.10 per 100-token generation
    model = ScriptedModel([_tool_turn() for _ in range(5)])
    report = await _chat(rtws, model)
    [drive] = report.drives
    assert drive.reason is DriveEnd.CAP_REACHED and drive.usage.generations == 3
    assert drive.cap is not None and "this drive spent $0.30, its cap is $0.25" in drive.cap
    assert "caps.drive.max_cost" in drive.cap
    assert report.tree_usage is not None
    assert round(report.tree_usage.cost_usd, 6) == 0.3 and report.tree_usage.unpriced == 0


async def test_a_task_cap_counts_every_dialog_and_drive_of_the_task(rtws: Path) -> None:
    _team(rtws, {"task": {"max_tokens": 300}}, members=("lead", "helper"))
    first = ScriptedModel(
        {
            "lead": [Turn(text="!?@helper Count the files.\n", input_tokens=100), "Three."],
            "helper": [Turn(text="three", input_tokens=250, output_tokens=10)],
        }
    )
    report = await _chat(rtws, first)
    assert report.outcome is service.Outcome.CAP_REACHED  # 100 + 260 side tokens >= 300
    lead = [r for r in report.drives if r.reason is DriveEnd.CAP_REACHED]
    assert len(lead) == 1 and lead[0].usage.generations == 0  # stopped on resuming
    assert lead[0].cap is not None and "task tasks/example.tsk used 360 tokens" in lead[0].cap
    assert "caps.task.max_tokens" in lead[0].cap
    assert first.remaining == 1

    # A new dialog on the same task starts no generation at all.
    second = ScriptedModel(["never said"])
    report = await _chat(rtws, second, "again")
    assert report.outcome is service.Outcome.CAP_REACHED and second.remaining == 1
    assert service.task_usage(rtws, "./tasks/example.tsk/").tokens == 360


async def test_no_caps_no_stop(rtws: Path) -> None:
    _team(rtws, {"drive": {}, "task": {}})
    model = ScriptedModel([_tool_turn(), _tool_turn(), "done"])
    report = await _chat(rtws, model)
    assert report.outcome is service.Outcome.DONE and report.capped == []
    assert report.usage.generations == 3 and report.usage.cost_usd == 0.0
