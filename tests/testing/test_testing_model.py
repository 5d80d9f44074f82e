"""`mindloop.testing`: scripted models drive real dialogs from pytest, with no mock script.

Each test runs the real engine (store, tools, tellasks, scheduler) on a fresh rtws; only
the model is scripted in Python, injected under a provider name of `.minds/llm.yaml`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindloop import service
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.providers.base import GenerationRequest, TextDelta, ToolResultMessage, UserMessage
from mindloop.providers.pool import ProviderSetupError
from mindloop.rtws import init_rtws
from mindloop.testing import Failure, FunctionModel, ScriptedModel, Turn, call
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    """A fresh rtws without any mock script: every answer must come from Python."""
    root = tmp_path / "proj"
    init_rtws(root, provider="mock")
    shutil.rmtree(root / ".minds" / "mock")
    return root


async def _chat(
    rtws: Path, model: ScriptedModel | FunctionModel, message: str, provider: str = "mock"
) -> tuple[service.DriveReport, service.Transcript]:
    async with service.open_project(rtws, providers={provider: model}) as project:
        posted = service.start_chat(project, message, task=TASK)
        report = await service.run(project, root_id=posted.dialog.id)
        return report, service.show_dialog(project, posted.dialog.id)


async def test_a_list_of_turns_drives_a_dialog_through_a_tool(rtws: Path) -> None:
    model = ScriptedModel(
        [
            Turn(
                thinking="Look first.",
                text="Listing.",
                tool_calls=[call("list_dir", path=".")],
                input_tokens=120,
                output_tokens=7,
            ),
            "There is a README.md.",
        ]
    )
    report, shown = await _chat(rtws, model, "what is here?")
    assert report.outcome is service.Outcome.DONE
    assert report.last is not None and report.last.final_text == "There is a README.md."
    assert model.remaining == 0 and len(model.requests) == 2
    first, second = model.requests
    assert (
        isinstance(first.messages[-1], UserMessage) and first.messages[-1].text == "what is here?"
    )
    result = second.messages[-1]
    assert isinstance(result, ToolResultMessage) and result.name == "list_dir"
    assert "README.md" in result.content and not result.is_error
    assert [m.kind for m in shown.messages] == [
        "user",
        "thinking",
        "assistant",
        "tool_call",
        "tool_result",
        "assistant",
    ]
    assert shown.messages[1].data["text"] == "Look first."
    assert (shown.generations[0].input_tokens, shown.generations[0].output_tokens) == (120, 7)


async def test_a_function_sees_every_request_sync_or_async(rtws: Path) -> None:
    seen_tools: list[list[str]] = []

    def shout(request: GenerationRequest) -> str:
        seen_tools.append([t.name for t in request.tools])
        last = request.messages[-1]
        assert isinstance(last, UserMessage)
        return last.text.upper()

    report, _ = await _chat(rtws, FunctionModel(shout), "hello there")
    assert report.last is not None and report.last.final_text == "HELLO THERE"
    assert "read_file" in seen_tools[0] and "change_mind" in seen_tools[0]

    async def later(request: GenerationRequest) -> Turn:
        return Turn(text=f"{request.member} answers", delay=0.01)

    report, _ = await _chat(rtws, FunctionModel(later), "hi")
    assert report.last is not None and report.last.final_text == "dev answers"


async def test_per_member_scripts_run_a_team_with_a_side_dialog(rtws: Path) -> None:
    write_team(rtws, {"lead": {"toolsets": ["fs"]}, "helper": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        {
            "lead": ["Asking.\n!?@helper Count to three.\n", "helper says: 1 2 3"],
            "helper": ["1 2 3"],
        }
    )
    report, shown = await _chat(rtws, model, "count")
    assert report.outcome is service.Outcome.DONE and model.remaining == 0
    assert [d.member for d in report.tree] == ["lead", "helper"]
    lead_requests = [r for r in model.requests if r.member == "lead"]
    assert "1 2 3" in str(lead_requests[-1].messages[-1])
    assert shown.messages[-1].data["text"] == "helper says: 1 2 3"


async def test_a_scripted_failure_stops_the_dialog_on_error(rtws: Path) -> None:
    model = ScriptedModel([Turn(text="half an", error=Failure(message="boom", status=400))])
    report, shown = await _chat(rtws, model, "go")
    assert report.outcome is service.Outcome.ERROR
    [failed] = report.failed
    assert failed.error is not None and "boom" in failed.error
    assert shown.dialog.status == "error"


async def test_a_retriable_failure_is_retried_like_a_real_one(rtws: Path) -> None:
    model = ScriptedModel([Turn(error=Failure(message="busy", status=503, retriable=True)), "ok"])
    report, _ = await _chat(rtws, model, "go")
    assert report.last is not None and report.last.final_text == "ok"
    assert len(model.requests) == 2


async def test_an_exhausted_script_fails_loudly_naming_the_member(rtws: Path) -> None:
    report, _ = await _chat(rtws, ScriptedModel([]), "go")
    [failed] = report.failed
    assert failed.error is not None
    assert "scripted model 'scripted': no turn left for @dev (request #1)" in failed.error


async def test_a_provider_with_a_key_can_be_replaced_without_the_key(
    rtws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    write_team(rtws, {"dev": {"toolsets": ["fs"]}}, provider="openai", model="gpt-4o-mini")
    model = ScriptedModel(["no key needed"])
    report, _ = await _chat(rtws, model, "hi", provider="openai")
    assert report.last is not None and report.last.final_text == "no key needed"
    assert model.requests[0].model == "gpt-4o-mini"


async def test_a_replacement_must_name_an_llm_yaml_provider_and_writes_nothing(
    rtws: Path,
) -> None:
    (rtws / ".minds" / "mock").mkdir()
    (rtws / ".minds" / "mock" / "mock-model.yaml").write_text("responses: []\n")
    project = service.open_project(rtws, providers={"mokc": ScriptedModel([])})
    with pytest.raises(ProviderSetupError, match=r"'mokc' not in \.minds/llm\.yaml"):
        service.start_chat(project, "hi", task=TASK)
    await project.aclose()
    assert not (rtws / ".mindloop").exists()


async def test_the_engine_takes_a_scripted_model_without_the_service(rtws: Path) -> None:
    model = ScriptedModel([Turn(tool_calls=[call("read_file", path="README.md")]), "read it"])
    async with DialogRuntime(rtws, providers={"mock": model}) as rt:
        root, _ = rt.start_root_dialog(TASK, "read the readme")
        [result] = [r for r in await Scheduler(rt).run() if r.dialog_id == root.id]
    assert result.reason == "done" and result.final_text == "read it"


@given(st.text())
async def test_streamed_text_is_the_turn_text_whole(text: str) -> None:
    model = ScriptedModel([text])
    request = GenerationRequest(model="m", system="", messages=[UserMessage(text="x")])
    chunks = [ev.text async for ev in model.stream(request) if isinstance(ev, TextDelta)]
    assert "".join(chunks) == text
