"""`phase_end`: how a work-loop phase ends (agent-loop §3), a loop-owned tool.

The model proposes: a `next_behavior` hint, a summary of at most 300 tokens (by default:
`loop.memory.sections.last_step_summary`)
(characters / 4) and a reason. The arguments are validated against their schema (unknown
keys, a hint outside the enum, a summary over its budget are errors the model reads and
can repair); an accepted call records the end as a store effect of its result, so the
phase's end commits with the observation (DESIGN.md §8.5) and a kill right after leaves
the phase ended, never half-ended. The runtime then decides what follows (the router).

Only a phase's turn policy offers the tool (loop roots in a phase); a call that reaches it
anywhere else records nothing.
"""

from __future__ import annotations

import math
import time
from typing import Any

from pydantic import Field

from mindloop.store.loop_state import EndedBy, Hint, PhaseEnd, Summary, end_phase
from mindloop.tools.base import StoreEffect, Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs

SUMMARY_TOKENS = 300  # agent-loop §7.1 (`loop.memory.sections.last_step_summary`)
CHARS_PER_TOKEN = 4
TOOLSET = "loop"

DESCRIPTION = (
    "End the current work-loop phase. next_behavior is your hint for what should follow "
    "(PLAN, DO, CHECK, ADJUST, WAIT or END; one the phase may not give is refused with "
    "HINT_ILLEGAL, and the runtime decides from the node statuses, dropping a hint that does "
    "not fit them). summary: {{progress, key_decisions[], pending[], "
    "risks[]}}, at most {cap} tokens in all; it is the next phase's last step summary. "
    "reason: why the phase ends now."
)


class PhaseEndArgs(ToolArgs):
    next_behavior: Hint = Field(description="your hint: PLAN, DO, CHECK, ADJUST, WAIT or END")
    summary: Summary = Field(description="{progress, key_decisions[], pending[], risks[]}")
    reason: str = Field(description="why the phase ends now")


def summary_tokens(summary: Summary) -> int:
    """The summary's size in tokens (characters / 4, rounded up) as the model wrote it."""
    chars = len(summary.progress) + sum(
        len(s) for s in (*summary.key_decisions, *summary.pending, *summary.risks)
    )
    return math.ceil(chars / CHARS_PER_TOKEN)


async def _phase_end(args: PhaseEndArgs, ctx: ToolContext, cap: int) -> ToolOutput:
    size = summary_tokens(args.summary)
    if size > cap:
        return ToolOutput(
            f"Error: summary is {size} tokens (characters / {CHARS_PER_TOKEN}); at most "
            f"{cap}. Shorten it and call phase_end again; the phase has not ended.",
            is_error=True,
        )
    if not args.reason.strip():
        return ToolOutput("Error: reason: say why the phase ends now.", is_error=True)
    end = PhaseEnd(
        by=EndedBy.TOOL,
        hint=args.next_behavior,
        summary=args.summary,
        reason=args.reason.strip(),
        at=time.time(),
    )
    root = ctx.dialog_id

    def apply(store: Any) -> None:
        end_phase(store, root, end)

    return ToolOutput(
        f"Phase ended (hint {args.next_behavior}). The runtime picks the next phase.",
        effects=(StoreEffect(apply=apply, what="phase_end"),),
    )


def phase_end_tools(summary_tokens: int = SUMMARY_TOKENS) -> list[Tool[Any]]:
    """The `loop` toolset; `summary_tokens` is `loop.memory.sections.last_step_summary`."""

    async def run(args: PhaseEndArgs, ctx: ToolContext) -> ToolOutput:
        return await _phase_end(args, ctx, summary_tokens)

    text = DESCRIPTION.format(cap=summary_tokens)
    return [Tool("phase_end", text, PhaseEndArgs, run, TOOLSET, store_only=True)]
