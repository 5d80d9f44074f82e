"""A model behind the real wire protocol, for tests and benchmarks that run mindloop in
other processes: an OpenAI-compatible chat-completions server on 127.0.0.1 that streams
what a function of the request says (the real `openai` SDK in each process reaches it,
configured by `llm_yaml`).

    def answer(body: dict, headers: Mapping[str, str]) -> Reply:
        return Reply(text="done")            # or Reply(tool_calls=[("noop", {"n": 1})])

    with ChatServer(answer, model="chain", delay=0.05) as server:
        (rtws / ".minds" / "llm.yaml").write_text(server.llm_yaml())

Each request is answered on its own thread after `delay` seconds (a remote model's
latency); `answer` may count or record what it is asked (it runs on those threads).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The provider `llm.yaml` gets: its key is read from this variable (any value serves).
PROVIDER = "local"
KEY_ENV = "LOCAL_MODEL_KEY"


@dataclass(frozen=True)
class Reply:
    """One streamed answer: text, or tool calls (name, arguments), and the usage."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    prompt_tokens: int = 5
    completion_tokens: int = 2
    # Called once the reply reached its client whole (not if the client went away).
    delivered: Callable[[], None] | None = None


# The request's JSON body and its headers (names in lower case) → the reply.
Answer = Callable[[dict[str, Any], Mapping[str, str]], Reply]


class ChatServer:
    """The server, a context manager: `url` for llm.yaml, `requests` answered so far."""

    def __init__(self, answer: Answer, *, model: str, delay: float = 0.0) -> None:
        self.model = model
        self.delay = delay
        self.requests = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests += 1
                    number = server.requests
                reply = answer(body, {k.lower(): v for k, v in self.headers.items()})
                time.sleep(server.delay)
                payload = server._payload(reply, number)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    self.wfile.flush()
                except OSError:
                    return  # the client went away (a killed worker)
                if reply.delivered is not None:
                    reply.delivered()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _payload(self, reply: Reply, number: int) -> bytes:
        if reply.tool_calls:
            calls = [
                {
                    "index": i,
                    "id": f"call_{number}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(reply.tool_calls)
            ]
            delta: dict[str, Any] = {"role": "assistant", "tool_calls": calls}
            finish = "tool_calls"
        else:
            delta, finish = {"role": "assistant", "content": reply.text}, "stop"
        usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
        chunks: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {"choices": [], "usage": usage},
        ]
        head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": self.model}
        events = (b"data: " + json.dumps({**head, **c}).encode() + b"\n\n" for c in chunks)
        return b"".join(events) + b"data: [DONE]\n\n"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def llm_yaml(self, context_length: int = 32000) -> str:
        """`.minds/llm.yaml` naming this server as provider `local` with its model."""
        return (
            f"providers:\n  {PROVIDER}:\n    kind: openai-compatible\n"
            f"    base_url: {self.url}\n    api_key_env: {KEY_ENV}\n"
            f"    models:\n      {self.model}:\n        context_length: {context_length}\n"
        )

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
