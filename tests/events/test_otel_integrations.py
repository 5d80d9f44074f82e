"""The spans of a chat whose member uses tools of two real MCP servers (`mcp-server-time`,
`mcp-server-git`, installed by the test extra and started by the runtime) and a user's
Python tool, exported by the SDK's in-memory exporter: one trace, one `execute_tool`
span per call under the drive that made it, each with its tool's name and call id."""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from mindloop import service
from mindloop.testing import ScriptedModel, Turn, call
from tests.toolsets.mcp_util import git_server, new_project, time_server

TASK = "tasks/example.tsk"

TOOLS = """\
from mindloop.toolsets.python import tool


@tool
def shout(text: str) -> str:
    '''Say `text` loudly.

    Args:
        text: What to say.
    '''
    return text.upper() + "!"
"""


def _project(tmp_path: Path) -> Path:
    module = f"spantools_{uuid.uuid4().hex[:8]}"  # imported in this process: a fresh name
    servers = {"time": time_server(), "git": git_server(prefix="repo_")}
    rtws = new_project(tmp_path, servers, ["fs", "mcp:time", "mcp:git", module])
    team = yaml.safe_load((rtws / ".minds" / "team.yaml").read_text())
    team["python_tools"] = [module]
    (rtws / ".minds" / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False))
    (rtws / f"{module}.py").write_text(TOOLS)
    return rtws


async def test_a_chat_with_mcp_and_python_tools_is_traced(tmp_path: Path) -> None:
    rtws = _project(tmp_path)
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(
        {
            "dev": [
                Turn(
                    tool_calls=[
                        call("get_current_time", timezone="Europe/Paris"),
                        call("repo_git_log", repo_path=".", max_count=1),
                        call("shout", text="done"),
                    ],
                    input_tokens=80,
                    output_tokens=12,
                ),
                Turn(text="Paris time noted; one commit; DONE!", input_tokens=200),
            ]
        }
    )
    async with service.open_project(
        rtws, providers={"mock": model}, tracer_provider=tracer
    ) as project:
        posted = service.start_chat(project, "time, log, shout", task=TASK)
        report = await service.run(project, root_id=posted.dialog.id)
    assert report.outcome is service.Outcome.DONE and model.remaining == 0

    spans = list(exporter.get_finished_spans())
    assert len({s.context.trace_id for s in spans}) == 1
    [drive] = [s for s in spans if s.name == "invoke_agent dev"]
    tools = {s.name: s for s in spans if s.name.startswith("execute_tool ")}
    assert set(tools) == {
        "execute_tool get_current_time",
        "execute_tool repo_git_log",
        "execute_tool shout",
    }
    for name, span in tools.items():
        attrs = dict(span.attributes or {})
        assert attrs["gen_ai.tool.name"] == name.removeprefix("execute_tool ")
        assert attrs["gen_ai.tool.call.id"]
        assert attrs["mindloop.dialog.id"] == posted.dialog.id
        assert span.parent is not None and span.parent.span_id == drive.context.span_id
        assert span.status.status_code is not StatusCode.ERROR, (name, span.status)
    chats = [s for s in spans if s.name == "chat mock-model"]
    assert [dict(c.attributes or {})["gen_ai.usage.input_tokens"] for c in chats] == [80, 200]

    # The tools really ran: their results are what the servers and the module answered.
    shown = service.show_dialog(rtws, posted.dialog.id)
    results = {m.data["name"]: m.data["content"] for m in shown.messages if m.kind == "tool_result"}
    assert "Europe/Paris" in results["get_current_time"]
    assert "first commit" in results["repo_git_log"]
    assert results["shout"] == "DONE!"
