"""The LLM summary compaction asks for when folding is not enough: one plain generation
through the runtime's provider pool (retries, deadlines and concurrency as llm.yaml sets
them), with no tools and no history."""

from __future__ import annotations

from typing import Any

from mindloop.memory.compaction import Summarizer
from mindloop.providers.base import GenerationRequest, StreamRestart, TextDelta, UserMessage
from mindloop.providers.pool import ProviderPool

_SYSTEM = "You write compact, factual summaries of a dialog for the agent who had it."


def provider_summarizer(
    pool: ProviderPool,
    provider: str,
    model: str,
    *,
    params: dict[str, Any] | None = None,
    member: str | None = None,
) -> Summarizer:
    """A `Summarizer` that asks `model` of `provider`."""

    async def summarize(prompt: str, target_tokens: int) -> str:
        req = GenerationRequest(
            model=model,
            system=_SYSTEM,
            messages=[UserMessage(text=prompt)],
            params=params or {},
            member=member,
        )
        chunks: list[str] = []
        async for ev in pool.stream(provider, req):
            if isinstance(ev, StreamRestart):
                chunks.clear()  # a retry mid-stream: what came so far is void
            elif isinstance(ev, TextDelta):
                chunks.append(ev.text)
        return "".join(chunks)

    return summarize
