"""FBR at the wire: the real SDK adapters against loopback servers, driven by the runtime.

The FBR requests of a member carry no tool definitions, no tool_choice, the read-only
Taskdoc after the no-tools notice and the merged `fbr_model_params`; the same member's normal requests carry its tools and normal params.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mindloop.dialogs.fbr import FBR_SYSTEM_PROMPT, NO_TOOLS_NOTICE
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from tests.providers.wire_loopback import (
    LoopbackServer,
    Reply,
    anthropic_sse,
    anthropic_text_events,
    openai_text_stream,
)

ASK = "!?@self\n!?Use only this text. Why does Run freeze the UI for 10 s?\n"
# `parallel_tool_calls` is a function-calling switch: normal requests carry it, FBR ones
# (which inherit it through the merge) must not.
PARAMS = {
    "max_tokens": 300,
    "openai": {"temperature": 0.2, "top_p": 0.5, "parallel_tool_calls": True},
    "anthropic": {"temperature": 0.2, "top_k": 7},
}
TASKDOC_HEAD = "# The team's Taskdoc (read-only context)"
TOOL_SWITCHES = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")
FBR_PARAMS = {
    "general": {"max_tokens": 1200},
    "openai": {"temperature": 0.9},
    "anthropic": {"temperature": 0.9},
}


def _reply(kind: str, text: str) -> Reply:
    if kind == "openai":
        return Reply(chunks=openai_text_stream([text]))
    return Reply(chunks=anthropic_sse(anthropic_text_events([text])))


def _configure(rtws: Path, kind: str, url: str) -> None:
    prov: dict[str, Any] = {
        "kind": "openai-compatible" if kind == "openai" else "anthropic",
        "base_url": url + ("/v1" if kind == "openai" else ""),
        "max_retries": 1,
        "models": {"m1": {"context_length": 100000}},
    }
    (rtws / ".minds" / "llm.yaml").write_text(
        yaml.safe_dump({"providers": {"wire": prov}}), "utf-8"
    )
    team = {
        "member_defaults": {"provider": "wire", "model": "m1"},
        "default_responder": "dev",
        "members": {
            "dev": {
                "toolsets": ["fs"],
                "fbr-effort": 2,
                "model_params": PARAMS,
                "fbr_model_params": FBR_PARAMS,
            }
        },
    }
    (rtws / ".minds" / "team.yaml").write_text(yaml.safe_dump(team), "utf-8")


def _system_text(kind: str, body: dict[str, Any]) -> str:
    if kind == "openai":
        return str(body["messages"][0]["content"])
    system = body["system"]
    return system if isinstance(system, str) else "".join(b["text"] for b in system)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_fbr_requests_are_tool_less_and_carry_fbr_params(rtws: Path, kind: str) -> None:
    replies = [
        _reply(kind, ASK),
        _reply(kind, "sample A"),
        _reply(kind, "sample B"),
        _reply(kind, "merged"),
    ]
    with LoopbackServer(replies) as server:
        _configure(rtws, kind, server.url)
        rt = DialogRuntime(rtws)
        rec = rt.create_root_dialog("tasks/example.tsk", "dev")
        rt.post_user_message(rec.id, "investigate the freeze")
        await Scheduler(rt).run()
        final = rt.store.load_history(rec.id)[-1].data["text"]
        await rt.aclose()
        bodies = [r.body for r in server.requests]
    assert len(bodies) == 4
    normal_first, fbr_a, fbr_b, normal_last = bodies
    for normal in (normal_first, normal_last):
        assert normal["tools"] and {
            t.get("name") or t["function"]["name"] for t in normal["tools"]
        } >= {"read_file"}
        assert normal["temperature"] == 0.2 and normal["max_tokens"] == 300
        if kind == "openai":
            assert normal["parallel_tool_calls"] is True and normal["top_p"] == 0.5
        else:
            assert normal["top_k"] == 7
    for fbr in (fbr_a, fbr_b):
        assert [k for k in TOOL_SWITCHES if k in fbr] == []
        assert "tool_use" not in str(fbr) and "tool_calls" not in str(fbr)
        assert fbr["temperature"] == 0.9 and fbr["max_tokens"] == 1200
        # Deep merge: what fbr_model_params does not set comes from model_params.
        assert fbr["top_p" if kind == "openai" else "top_k"] == (0.5 if kind == "openai" else 7)
        assert _system_text(kind, fbr).strip() == FBR_SYSTEM_PROMPT.strip()
        assert str(fbr).count(NO_TOOLS_NOTICE) == 1
        assert "Why does Run freeze" in str(fbr["messages"])
        # The notice, then the read-only Taskdoc (no tool named), then the request body.
        wire = str(fbr["messages"])
        assert wire.count(TASKDOC_HEAD) == 1
        assert wire.index(NO_TOOLS_NOTICE) < wire.index(TASKDOC_HEAD) < wire.index("Why does")
        assert "change_mind" not in str(fbr) and "recall_taskdoc" not in str(fbr)
        assert "investigate the freeze" not in str(fbr["messages"])  # caller history is not there
    assert final == "merged"
