"""`memory_remember`: how SELF_IMPROVE writes the member's memory (agent-loop §7.3), a
loop-owned tool of that phase only.

Member memory holds cross-task preferences of the user and stable facts of the project,
in `.minds/team/<member>/memory.jsonl` (`memory.member`); every loop request of the
member shows it as its P1 section. SELF_IMPROVE is its only writer: the phase's tool
matrix offers the tool nowhere else, and the write itself is checked against the phase
the call runs in (`writeback.may_write`), so a call from elsewhere changes nothing. An
item below `loop.memory.min_confidence` (0.55), or holding an e-mail address, a phone
number or a secret, is refused with the reason; the same fact again updates its
confidence.

The tool is registered when the loop binds to a runtime (`LoopPolicies.bind`), like
`retry_propose`: it lives in the loop layer because the toolsets may not import the
memory package (they are siblings).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mindloop.memory.member import MemberMemory, WriteStatus
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs

MEMORY_TOOL = "memory_remember"
MEMORY_TOOLSET = "loop_memory"
ITEM_CHARS = 600  # one item: a fact, not a document

DESCRIPTION = (
    "Remember one fact in your long-term memory, shown to you in every later task: a "
    "preference the user stated or showed across tasks, or a stable fact of the project. "
    "Not for this task's details (the workspace and the summaries keep them), never private "
    "data or secrets. Below confidence {min} it is not kept; the same fact again updates "
    "its confidence."
)


class RememberArgs(ToolArgs):
    text: str = Field(
        max_length=ITEM_CHARS, description="The fact, one self-contained sentence or two."
    )
    confidence: float = Field(ge=0, le=1, description="How sure you are that it holds (0–1).")


class MemoryTool:
    """The `loop_memory` toolset."""

    def __init__(self, min_confidence: float) -> None:
        self.min_confidence = min_confidence

    def tools(self) -> list[Tool[Any]]:
        text = DESCRIPTION.format(min=self.min_confidence)
        return [Tool(MEMORY_TOOL, text, RememberArgs, self.run, MEMORY_TOOLSET)]

    async def run(self, a: RememberArgs, ctx: ToolContext) -> ToolOutput:
        memory = MemberMemory(ctx.rtws, ctx.member, min_confidence=self.min_confidence)
        done = memory.remember(
            a.text, a.confidence, writer=ctx.phase or "chat", task=ctx.task_path or ""
        )
        if done.status is WriteStatus.REJECTED or done.item is None:
            return ToolOutput(f"REJECTED: {done.reason}; nothing was written", is_error=True)
        item = done.item
        return ToolOutput(
            f"{done.status.value.upper()}: {item.id} (confidence {item.confidence:g}): {item.text}"
        )
