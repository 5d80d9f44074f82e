"""A loopback HTTP server speaking the real OpenAI / Anthropic streaming wire protocols.

The SDK adapters are tested with the real vendor SDKs against this server, started on
127.0.0.1 port 0 in a thread. Each test scripts the replies (status, SSE body pieces, a
dropped connection, a held-open request) and asserts on the recorded request JSON.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted HTTP response. `chunks` are written as separate HTTP chunks; `drop`
    closes the connection after them without ending the body; `hold` keeps the request
    open (no response) until the server stops."""

    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    content_type: str = "text/event-stream"
    drop: bool = False
    hold: bool = False


@dataclass
class Recorded:
    path: str
    body: Any
    headers: dict[str, str]


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
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                for piece in reply.chunks:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                if not reply.drop:
                    self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll interval keeps `shutdown()` (which waits for the next poll) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _record(self, path: str, body: Any, headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(Recorded(path=path, body=body, headers=headers))
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


def json_reply(status: int, body: Any) -> Reply:
    return Reply(status=status, chunks=[json.dumps(body).encode()], content_type="application/json")


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
