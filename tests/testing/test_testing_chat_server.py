"""`mindloop.testing.ChatServer`: a model behind the real OpenAI wire protocol on
127.0.0.1, reached through mindloop's own provider (the real `openai` SDK): a text reply
and a tool call come back as the function said, with the usage it gave; `delivered` runs
once a reply reached its client."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from mindloop import service
from mindloop.testing import ChatServer, Reply
from tests.scenario_util import write_team


async def test_a_chat_is_answered_through_the_wire_with_text_and_tool_calls(
    rtws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    delivered: list[int] = []

    def answer(body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        last = body["messages"][-1]
        seen.append(headers.get("authorization", ""))
        if last["role"] == "tool":
            return Reply(
                text=f"listed: {last['content'][:20]}", delivered=lambda: delivered.append(2)
            )
        return Reply(tool_calls=[("list_dir", {"path": "."})], prompt_tokens=40)

    monkeypatch.setenv("LOCAL_MODEL_KEY", "k-test")
    with ChatServer(answer, model="wire", delay=0.01) as server:
        (rtws / ".minds" / "llm.yaml").write_text(server.llm_yaml(), "utf-8")
        write_team(rtws, {"dev": {"toolsets": ["fs"]}})
        team = yaml.safe_load((rtws / ".minds" / "team.yaml").read_text("utf-8"))
        team["member_defaults"] = {"provider": "local", "model": "wire"}
        (rtws / ".minds" / "team.yaml").write_text(yaml.safe_dump(team), "utf-8")
        project = service.open_project(rtws)
        try:
            posted = service.start_chat(project, "what is here?", drive_here=True)
            report = await service.run(project, root_id=posted.dialog.root_id)
        finally:
            await project.aclose()
        assert server.requests == 2
    assert report.last is not None and report.last.final_text.startswith("listed: ")
    assert report.usage.input_tokens == 45  # 40 + the default 5
    assert seen == ["Bearer k-test"] * 2 and delivered == [2]
