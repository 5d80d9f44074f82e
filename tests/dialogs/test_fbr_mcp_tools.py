"""FBR dialogs never see MCP tools: a member whose toolsets include a real MCP server is
offered its tools in its own dialog, and nothing in its Fresh Boots Reasoning samples."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.providers.base import GenerationRequest
from mindloop.toolsets.mcp_host import shutdown_mcp
from tests.scenario_util import write_script, write_team

BODY = "!?@self\n!?Think without tools.\n!?Goal: what time zone to use.\n"


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    shutdown_mcp()


async def test_fbr_requests_offer_no_mcp_tools(rtws: Path) -> None:
    server = {
        "command": sys.executable,
        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    }
    (rtws / ".minds" / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"time": server}}))
    write_team(rtws, {"dev": {"toolsets": ["fs", "mcp:time"], "fbr-effort": 1}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"contains": "Goal: what time zone", "response": "UTC"},
            {"member": "dev", "contains": "FBR @self sideline response", "response": "done"},
        ],
    )
    seen: list[GenerationRequest] = []
    rt = DialogRuntime(rtws)
    real_stream = rt.providers.stream

    def spy(name: str, req: GenerationRequest):  # type: ignore[no-untyped-def]
        seen.append(req)
        return real_stream(name, req)

    rt.providers.stream = spy  # type: ignore[method-assign,assignment]
    rec = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(rec.id, "go")
    await Scheduler(rt).run()
    normal, fbr_sample = seen[0], seen[1]
    assert "get_current_time" in [t.name for t in normal.tools]
    assert fbr_sample.tools == []
    await rt.aclose()
