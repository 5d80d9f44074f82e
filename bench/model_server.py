"""A model with a latency, for the scale-out benchmark: an OpenAI-compatible server on
127.0.0.1 (the real wire protocol, reached by the real `openai` SDK in every worker),
playing the benchmark's tool chain (`bench.common`): `go` or `go <k>` → `noop(k)`;
the tool's result `ok <i>` → `noop(i + 1)`; `ok <calls>` → the final answer. Each
generation waits `latency` seconds before it streams, like a remote model would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bench.common import DEFAULT_TOOL_CALLS, FINAL_TEXT, START_TEXT, TOOL_NAME
from mindloop.testing.chat_server import ChatServer, Reply

MODEL = "chain"


def next_move(last: dict[str, Any], calls: int = DEFAULT_TOOL_CALLS) -> int | None:
    """The next `noop` call's number after the last message, or None: the final answer."""
    text = str(last.get("content") or "")
    if last.get("role") == "tool":
        done = re.fullmatch(r"ok (\d+)", text.strip())
        n = int(done.group(1)) + 1 if done else calls + 1
    else:
        start = re.fullmatch(re.escape(START_TEXT) + r"(?: (\d+))?", text.strip())
        n = int(start.group(1) or 1) if start else calls + 1
    return n if n <= calls else None


def _answer(body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
    n = next_move(body["messages"][-1])
    if n is None:
        return Reply(text=FINAL_TEXT, prompt_tokens=100, completion_tokens=10)
    return Reply(tool_calls=[(TOOL_NAME, {"n": n})], prompt_tokens=100, completion_tokens=10)


class ChainModel(ChatServer):
    """The server (a context manager): `url` for llm.yaml, `requests` served."""

    def __init__(self, latency: float) -> None:
        super().__init__(_answer, model=MODEL, delay=latency)
