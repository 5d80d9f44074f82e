"""A request never puts a note between a tool call and its results (issue 10, item 1).

Runtime notes (a failed tellask of the same message, an answer, a reply) can be stored
right after an assistant message with tool calls, before the tool results. Both wire
protocols reject `assistant(tool_calls) → user → tool`; the history keeps the order by
construction: user-side texts that arrive while calls are open are held and follow the
results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mindloop.dialogs.history import History
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    GenerationRequest,
    ToolResultMessage,
    UserMessage,
)
from tests.scenario_util import write_script, write_team


def assert_calls_answered_before_anything_else(msgs: list[ChatMessage]) -> None:
    open_calls: set[str] = set()
    for m in msgs:
        if isinstance(m, ToolResultMessage):
            open_calls.discard(m.call_id)
            continue
        assert not open_calls, f"{type(m).__name__} between a tool call and its results"
        if isinstance(m, AssistantMessage):
            open_calls = {c.id for c in m.tool_calls}


async def test_failed_tellask_beside_a_tool_call_gives_a_valid_next_request(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    write_script(
        rtws,
        [
            {
                "member": "dev",
                "match": "go",
                "response": "Listing.\n!?@ghost please help\n",
                "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
            },
            {"member": "dev", "default": True, "response": "done"},
        ],
    )
    rt = DialogRuntime(rtws)
    seen: list[GenerationRequest] = []
    stream = rt.providers.stream

    def recording(provider: str, req: GenerationRequest) -> Any:
        seen.append(req.model_copy(update={"messages": list(req.messages)}))
        return stream(provider, req)

    rt.providers.stream = recording  # type: ignore[method-assign]
    root = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(root.id, "go")
    await Scheduler(rt).run()
    kinds = [m.kind for m in rt.store.load_history(root.id)]
    assert kinds.index("tellask_result") < kinds.index("tool_result")  # stored in that order
    assert len(seen) == 2
    msgs = seen[1].messages
    assert_calls_answered_before_anything_else(msgs)
    assert isinstance(msgs[-1], UserMessage) and "ERR_UNKNOWN_TELLASK_TARGET" in msgs[-1].text
    await rt.aclose()


_KIND = st.sampled_from(["user", "note", "tellask_result", "assistant", "calls", "results"])


@given(st.lists(_KIND, max_size=30))
def test_no_user_text_ever_sits_between_calls_and_results(plan: list[str]) -> None:
    h = History()
    rid, gen, open_ids, n = 0, 0, [], 0
    for kind in plan:
        rid += 1
        if kind == "calls":
            if open_ids:  # the engine never generates with calls open
                continue
            gen += 1
            h.add_row(rid, "assistant", {"text": "t"}, gen)
            for _ in range(2):
                n += 1
                rid += 1
                open_ids.append(f"c{n}")
                h.add_row(rid, "tool_call", {"id": f"c{n}", "name": "x"}, gen)
        elif kind == "results":
            for cid in open_ids:
                rid += 1
                h.add_row(rid, "tool_result", {"call_id": cid, "content": "r"}, None)
            open_ids = []
        elif kind == "assistant":
            if open_ids:  # the engine never generates with calls open
                continue
            gen += 1
            h.add_row(rid, "assistant", {"text": "a"}, gen)
        else:
            h.add_row(rid, kind, {"text": kind}, None)
    if open_ids:  # what a drive start does after a crash: interrupted results
        for cid in open_ids:
            rid += 1
            h.add_row(rid, "tool_result", {"call_id": cid, "content": "interrupted"}, None)
    assert_calls_answered_before_anything_else(h.messages)
    texts = [m.text for m in h.messages if isinstance(m, UserMessage)]
    expected = sum(1 for k in plan if k in ("user", "note", "tellask_result"))
    assert sum(t.count("\n\n") + 1 for t in texts) == expected  # nothing is lost
