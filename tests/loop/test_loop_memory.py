"""Every loop generation's request is compiled within the memory budget B (issue 12, part
5, through `dialogs.budgeted`): a long DO entry does not grow the request with its
history, and the phase's rules stay in the system prompt."""

from __future__ import annotations

from pathlib import Path

import yaml

from mindloop.loop.driver import LoopOutcome
from mindloop.memory.tokens import CharCounter, messages_tokens
from mindloop.providers.base import GenerationRequest
from mindloop.testing import FunctionModel, Turn, call
from tests.loop.loop_util import complete, create, end, phase_of, run_task, verdict
from tests.scenario_util import write_team

READS = 40


def _model() -> FunctionModel:
    reads = 0

    def respond(req: GenerationRequest) -> Turn:
        nonlocal reads
        phase = phase_of(req)
        if phase == "PLAN":
            return Turn(tool_calls=[create("read"), end("DO")])
        if phase == "DO":
            reads += 1
            if reads <= READS:  # two files in turn: the same read 4 times in a row is STUCK
                return Turn(tool_calls=[call("read_file", path=f"big{reads % 2}.txt")])
            return Turn(tool_calls=[complete("n1"), end("CHECK")])
        if phase == "CHECK":
            return Turn(tool_calls=[verdict("n1"), end("END")])
        return Turn(tool_calls=[end("END")])

    return FunctionModel(respond)


async def test_a_long_do_entry_keeps_its_requests_within_b(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    team = rtws / ".minds" / "team.yaml"
    data = yaml.safe_load(team.read_text("utf-8"))
    # one long DO entry: its step cap and its node's step budget both allow it
    long = READS + 5
    data["loop"] = {"phases": {"do": long}, "nodes": {"step_budget": long, "max_step_budget": long}}
    team.write_text(yaml.safe_dump(data), "utf-8")
    for i in range(2):  # ~15k tokens a read
        (rtws / f"big{i}.txt").write_text(f"line of output {i}\n" * 4000, "utf-8")
    model = _model()
    report, rt = await run_task(rtws, model, "read it many times")
    assert report.outcome is LoopOutcome.DONE, report.reason
    counter = CharCounter()
    do = [r for r in model.requests if "# Work loop phase: DO" in r.system]
    sizes = [messages_tokens(r.messages, counter) for r in do]
    assert len(sizes) == READS + 1
    assert max(sizes) <= 32_000  # B for a 128k window
    assert sizes[READS] <= 1.2 * sizes[10]  # flat: the history does not grow the request
    assert all("## Process rules" in r.system for r in do)
    await rt.aclose()


async def test_a_taskdoc_over_its_budget_is_sent_whole_and_plan_and_self_improve_asked_to_distill(
    rtws: Path,
) -> None:
    """DESIGN §8.4: past its budget (loop.memory taskdoc, 2,000 tokens) the Taskdoc stays
    whole in the system prompt, and PLAN and SELF_IMPROVE are asked to distill
    progress.md through change_mind; the other phases are not."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    progress = "- did a thing that took many words to say, again and again\n" * 160
    (rtws / "tasks" / "example.tsk" / "progress.md").write_text(progress, "utf-8")
    asked: dict[str, bool] = {}

    def respond(req: GenerationRequest) -> Turn:
        phase = phase_of(req)
        asked[phase] = "Distill progress.md through change_mind" in req.system
        assert progress.splitlines()[-1] in req.system  # whole, never trimmed
        if phase == "PLAN":
            return Turn(tool_calls=[create("a"), end("DO")])
        if phase == "DO":
            return Turn(tool_calls=[complete("n1"), end("CHECK")])
        if phase == "CHECK":
            return Turn(tool_calls=[verdict("n1"), end("END")])
        return Turn(tool_calls=[end("END")])

    report, rt = await run_task(rtws, FunctionModel(respond), "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert asked == {"PLAN": True, "DO": False, "CHECK": False, "SELF_IMPROVE": True}
    await rt.aclose()
