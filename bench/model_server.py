"""A model with a latency, for the scale-out benchmark: an OpenAI-compatible server on
127.0.0.1 (the real wire protocol, reached by the real `openai` SDK in every worker),
playing the benchmark's tool chain (`bench.common`): `go` or `go <k>` → `noop(k)`;
the tool's result `ok <i>` → `noop(i + 1)`; `ok <calls>` → the final answer. Each
generation waits `latency` seconds before it streams, like a remote model would.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.common import DEFAULT_TOOL_CALLS, FINAL_TEXT, START_TEXT, TOOL_NAME

MODEL = "chain"
LLM_YAML = """\
providers:
  local:
    kind: openai-compatible
    base_url: {url}
    api_key_env: LOCAL_MODEL_KEY
    models:
      chain:
        context_length: 32000
"""
USAGE = {"prompt_tokens": 100, "completion_tokens": 10}


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


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class ChainModel:
    """The server (a context manager): `url` for llm.yaml, `generations` served."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.generations = 0
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with model._lock:
                    model.generations += 1
                    call_id = f"call_{model.generations}"
                time.sleep(model.latency)
                n = next_move(body["messages"][-1])
                if n is None:
                    chunks = [
                        _chunk({"role": "assistant", "content": FINAL_TEXT}),
                        _chunk({}, "stop"),
                    ]
                else:
                    call = {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": TOOL_NAME, "arguments": json.dumps({"n": n})},
                    }
                    chunks = [
                        _chunk({"role": "assistant", "tool_calls": [call]}),
                        _chunk({}, "tool_calls"),
                    ]
                chunks.append({"choices": [], "usage": USAGE})
                payload = b"".join(
                    b"data: "
                    + json.dumps(
                        {"id": "c", "object": "chat.completion.chunk", "created": 0,
                         "model": MODEL, **c}
                    ).encode()
                    + b"\n\n"
                    for c in chunks
                ) + b"data: [DONE]\n\n"  # fmt: skip
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client went away

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ChainModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
