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
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LLM_YAML = """\
providers:
  local:
    kind: openai-compatible
    base_url: {url}
    api_key_env: LOCAL_MODEL_KEY
    models:
      counting:
        context_length: 32000
"""


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


@dataclass
class ModelServer:
    delay: float = 0.0  # seconds before the answer streams (a model's latency)
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                msgs = [m for m in body["messages"] if m.get("role") != "system"]
                key = hashlib.sha256(json.dumps(msgs, sort_keys=True).encode()).hexdigest()
                last = str(msgs[-1].get("content") or "") if msgs else ""
                worker = self.headers.get("Authorization", "").removeprefix("Bearer ")
                call = Call(key, worker, last)
                with server._lock:
                    server.calls.append(call)
                time.sleep(server.delay)
                text = reply_for(last)
                chunks = [
                    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
                ]
                payload = b"".join(
                    b"data: " + json.dumps({"id": "c", "object": "chat.completion.chunk",
                                             "created": 0, "model": "counting", **c}).encode()
                    + b"\n\n"
                    for c in chunks
                ) + b"data: [DONE]\n\n"  # fmt: skip
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    self.wfile.flush()
                    call.completed = True
                except OSError:
                    pass  # the worker was killed while waiting

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> list[Call]:
        with self._lock:
            return list(self.calls)

    def repeated(self, allowed_from: set[str] = frozenset()) -> dict[str, int]:  # type: ignore[assignment]
        """Keys of requests answered completely more than once, leaving out the calls
        made by the workers in `allowed_from` (killed ones, whose answered call may not
        have been recorded when they died)."""
        done = Counter(
            c.key for c in self.snapshot() if c.completed and c.worker not in allowed_from
        )
        return {k: n for k, n in done.items() if n > 1}
