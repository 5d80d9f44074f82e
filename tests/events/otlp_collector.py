"""An OTLP/HTTP trace collector on 127.0.0.1 for the tests that run `mindloop` as a child
process with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at it: what the child exported is
received here, decoded from protobuf, as a real collector would receive it. Shared by the
tracing tests (tests/events) and the end-to-end CLI tests (tests/cli)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

Received = list[ExportTraceServiceRequest]


class _Collector(http.server.BaseHTTPRequestHandler):
    received: Received

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.received.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


@contextmanager
def otlp_collector() -> Iterator[tuple[str, Received]]:
    """(the endpoint for OTEL_EXPORTER_OTLP_ENDPOINT, the export requests received)."""
    received: Received = []
    handler = type("Handler", (_Collector,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def received_spans(received: Received) -> list[tuple[Span, Resource]]:
    """Every span received, with the resource (service) that exported it."""
    return [
        (span, rs.resource)
        for req in received
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]


def attribute(span: Span, key: str) -> str | None:
    """A string attribute of a received span (None when it has none by that key)."""
    for a in span.attributes:
        if a.key == key:
            return str(a.value.string_value)
    return None
