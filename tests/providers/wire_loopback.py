"""A loopback fault server speaking the real OpenAI / Anthropic streaming wire protocols.

The SDK adapters are tested with the real vendor SDKs against this server, started on
127.0.0.1 port 0 in a thread. Each test scripts the replies, including the faults real
endpoints produce (a status with `Retry-After`, a dropped connection, a request held open
before or during the stream, keep-alives that never end) and asserts on the recorded
requests (JSON body, headers, arrival time).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Keep-alives as the two protocols send them: an SSE comment (OpenAI and most
# OpenAI-compatible servers) and Anthropic's `ping` event. The SDKs swallow both.
OPENAI_KEEPALIVE = b": keep-alive\n\n"
ANTHROPIC_PING = b'event: ping\ndata: {"type": "ping"}\n\n'


@dataclass
class Reply:
    """One scripted HTTP response. `chunks` are written as separate HTTP chunks, after
    `headers`. Then, by default, the body ends. Instead: `drop` closes the connection
    without ending the body (a cut stream); `hold_after` keeps the connection open,
    silent, until the server stops (a hang during the stream); `keepalive` is written
    every `keepalive_every` seconds until the server stops or the client goes away.
    `hold` keeps the request open with no response at all (a hang before the stream)."""

    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    hold: bool = False
    hold_after: bool = False
    keepalive: bytes | None = None
    keepalive_every: float = 0.05


@dataclass
class Recorded:
    path: str
    body: Any
    headers: dict[str, str]
    at: float  # time.monotonic() when the request arrived


class LoopbackServer:
    """Serves `replies` in order (the last one repeats) and records every request."""

    def __init__(self, replies: list[Reply]) -> None:
        self._replies = list(replies)
        self._lock = threading.Lock()
        self._released = threading.Event()
        self.requests: list[Recorded] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return  # keep test output (and any header) out of the logs

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                reply = server._record(self.path, body, headers)
                self.close_connection = True
                if reply.hold:
                    server._released.wait(timeout=30)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for piece in reply.chunks:
                        self._piece(piece)
                    if reply.keepalive is not None:
                        while not server._released.wait(reply.keepalive_every):
                            self._piece(reply.keepalive)
                        return
                    if reply.hold_after:
                        server._released.wait(timeout=30)
                        return
                    if not reply.drop:
                        self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up on the stream: what the test expects

            def _piece(self, piece: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll interval keeps `shutdown()` (which waits for the next poll) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _record(self, path: str, body: Any, headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(
                Recorded(path=path, body=body, headers=headers, at=time.monotonic())
            )
            index = min(len(self.requests), len(self._replies)) - 1
            return self._replies[index]

    @property
    def hits(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


# ---------------------------------------------------------------- wire encodings


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status=status,
        chunks=[json.dumps(body).encode()],
        content_type="application/json",
        headers=dict(headers or {}),
    )


def openai_sse(chunks: list[Any], *, done: bool = True) -> list[bytes]:
    out = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


def openai_chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    usage: dict[str, int] | None = None,
    no_choices: bool = False,
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "served-model",
        "choices": []
        if no_choices
        else [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = {**usage, "total_tokens": sum(usage.values())}
    return chunk


def openai_usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    return openai_chunk(
        usage={"prompt_tokens": prompt, "completion_tokens": completion}, no_choices=True
    )


def openai_text_stream(pieces: list[str], *, prompt: int = 7, completion: int = 3) -> list[bytes]:
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    chunks += [openai_chunk({"content": p}) for p in pieces]
    chunks += [openai_chunk({}, "stop"), openai_usage_chunk(prompt, completion)]
    return openai_sse(chunks)


def anthropic_sse(events: list[dict[str, Any]]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def anthropic_start(input_tokens: int = 11) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "served-model",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        },
    }


def anthropic_block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def anthropic_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def anthropic_block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def anthropic_end(stop_reason: str, output_tokens: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        {"type": "message_stop"},
    ]


def anthropic_text_events(pieces: list[str], *, input_tokens: int = 11) -> list[dict[str, Any]]:
    events = [anthropic_start(input_tokens), {"type": "ping"}]
    events.append(anthropic_block_start(0, {"type": "text", "text": ""}))
    events += [anthropic_delta(0, {"type": "text_delta", "text": p}) for p in pieces]
    events.append(anthropic_block_stop(0))
    return events + anthropic_end("end_turn", 5)


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": None}}


def anthropic_error_body(message: str, kind: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
