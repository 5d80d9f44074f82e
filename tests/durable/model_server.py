"""A model for the worker tests that counts its calls: an OpenAI-compatible server on
127.0.0.1 (the real wire protocol, reached by the real `openai` SDK in every worker
process), answering from the request's content and recording every call.

Each call is keyed by what it asks (the member's system prompt aside, the messages): a
step that a recovered workflow made again would show as a second call with the same key.
Which worker made a call is told by its API key (each worker gets its own).

The team's replies are a function of the last message, so any worker may answer any step:

- `TASK <n>` (a root's first message): ask `qa` to check it (a tellask);
  `TASK <n> ASK` also asks the human first;
- a tellask body `check <n>` (qa's side dialog): `checked <n>`;
- the human's answer `answer <n>`: then ask `qa`;
- `checked <n>` (the reply delivered to dev): the final answer `done <n>`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mindloop.testing.chat_server import ChatServer, Reply

MODEL = "counting"


def reply_for(last: str) -> str:
    m = re.search(r"TASK (\d+)( ASK)?", last)
    if m and m.group(2):
        return f"!?@human Go ahead with {m.group(1)}?\n!?Say yes.\n"
    n = m.group(1) if m else None
    if n is None and (a := re.search(r"answer (\d+)", last)):
        n = a.group(1)
    if n is not None:
        return f"!?@qa check {n}\n!?check {n}\n"
    if (c := re.search(r"check (\d+)", last)) and "checked" not in last:
        return f"checked {c.group(1)}"
    if d := re.search(r"checked (\d+)", last):
        return f"done {d.group(1)}"
    return "nothing to do"


@dataclass
class Call:
    key: str
    worker: str
    last: str
    completed: bool = False


class ModelServer(ChatServer):
    """The counting model (a context manager); `calls` in the order they came."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[Call] = []
        self._calls_lock = threading.Lock()
        super().__init__(self._answer, model=MODEL, delay=delay)

    def _answer(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        msgs = [m for m in body["messages"] if m.get("role") != "system"]
        key = hashlib.sha256(json.dumps(msgs, sort_keys=True).encode()).hexdigest()
        last = str(msgs[-1].get("content") or "") if msgs else ""
        worker = headers.get("authorization", "").removeprefix("Bearer ")
        call = Call(key, worker, last)
        with self._calls_lock:
            self.calls.append(call)

        def delivered() -> None:
            call.completed = True

        return Reply(text=reply_for(last), delivered=delivered)

    def snapshot(self) -> list[Call]:
        with self._calls_lock:
            return list(self.calls)

    def repeated(self, allowed_from: set[str] = frozenset()) -> dict[str, int]:  # type: ignore[assignment]
        """Keys of requests answered completely more than once, leaving out the calls
        made by the workers in `allowed_from` (killed ones, whose answered call may not
        have been recorded when they died)."""
        done = Counter(
            c.key for c in self.snapshot() if c.completed and c.worker not in allowed_from
        )
        return {k: n for k, n in done.items() if n > 1}
