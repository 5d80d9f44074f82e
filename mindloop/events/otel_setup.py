"""Tracing set up from the standard `OTEL_*` environment variables.

`mindloop chat` and `run` (through `service.open_project`) call `tracing_from_env`; it
returns None — and nothing subscribes to the bus, so an untraced run pays nothing — unless
tracing was asked for:

- `OTEL_SDK_DISABLED=true` turns it off whatever else is set;
- a tracer provider handed in (`open_project(tracer_provider=...)`), or one the embedding
  application installed globally (`opentelemetry.trace.set_tracer_provider`), is used as
  it is: its processors and exporters are the application's;
- otherwise an SDK provider is built when `OTEL_TRACES_EXPORTER` names exporters (`otlp`,
  `console`; `none` disables) or an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`,
  `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). The SDK reads the rest itself: the service name
  (`OTEL_SERVICE_NAME`, default `mindloop`), `OTEL_RESOURCE_ATTRIBUTES`, the sampler, the
  batch processor's settings, the exporter's headers and timeout. OTLP goes over
  `http/protobuf` unless `OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL=grpc`.

The SDK and the OTLP exporter are the `mindloop[otel]` extra. Asked for without them,
tracing is off with a warning naming the extra: a traced run is never a failed run.
Message content is recorded only with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
set to `true` (the GenAI conventions' opt-in).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when tracing is on: an untraced run never loads OpenTelemetry
    from mindloop.events.otel import SpanRecorder

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
DEFAULT_SERVICE_NAME = "mindloop"
INSTALL_HINT = "pip install 'mindloop[otel]'"

log = logging.getLogger("mindloop.tracing")


@dataclass
class Tracing:
    """Tracing for one project: the bus listener, and how to flush at the end."""

    recorder: SpanRecorder
    flush: Callable[[], None]  # ends the recorder's open spans and exports what is queued

    def close(self) -> None:
        self.recorder.close()
        self.flush()


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def tracing_from_env(
    env: Mapping[str, str],
    *,
    provider_names: Mapping[str, str] | None = None,
    tracer_provider: Any = None,
) -> Tracing | None:
    """Tracing as `env` asks for it (see the module's docstring), or None. `env` is the
    process's environment: the SDK and its exporters read their own settings from it."""
    if _true(env.get("OTEL_SDK_DISABLED")):
        return None
    owned = False
    if tracer_provider is None:
        tracer_provider = _global_provider()
    if tracer_provider is None:
        exporters = exporters_wanted(env)
        if not exporters:
            return None
        tracer_provider = _sdk_provider(env, exporters)
        if tracer_provider is None:
            return None
        owned = True
    from mindloop.events.otel import SpanRecorder

    recorder = SpanRecorder(
        tracer_provider.get_tracer("mindloop"),
        capture_content=_true(env.get(CAPTURE_CONTENT_ENV)),
        provider_names=provider_names,
    )
    # A provider built here is shut down (flushing its batch); another's is only flushed.
    done = getattr(tracer_provider, "shutdown" if owned else "force_flush", None)
    return Tracing(recorder=recorder, flush=done if callable(done) else (lambda: None))


def exporters_wanted(env: Mapping[str, str]) -> list[str]:
    """The span exporters `env` asks for (lower-case names), [] when none."""
    raw = env.get("OTEL_TRACES_EXPORTER")
    if raw is not None and raw.strip():
        return [n for n in (p.strip().lower() for p in raw.split(",")) if n and n != "none"]
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return ["otlp"]
    return []


def _global_provider() -> Any:
    """The application's global tracer provider, if it installed one (never imported
    just to look: an application that traces has imported it already)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def _sdk_provider(env: Mapping[str, str], exporters: list[str]) -> Any:
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "tracing is configured (%s) but the OpenTelemetry SDK is not installed: %s; "
            "running without tracing",
            ", ".join(exporters),
            INSTALL_HINT,
        )
        return None
    named = env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = Resource.create({} if named else {"service.name": DEFAULT_SERVICE_NAME})
    made = [(name, _exporter(name, env)) for name in exporters]
    usable = [exporter for _, exporter in made if exporter is not None]
    if not usable:
        return None
    provider = TracerProvider(resource=resource)
    for exporter in usable:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    """One span exporter by its `OTEL_TRACES_EXPORTER` name; None (warned) if unusable."""
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        log.warning("OTEL_TRACES_EXPORTER: unknown exporter %r (use otlp or console)", name)
        return None
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )

            return GrpcExporter()
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            return OTLPSpanExporter()
    except ImportError:
        package = "opentelemetry-exporter-otlp-proto-" + ("grpc" if protocol == "grpc" else "http")
        log.warning(
            "the OTLP exporter needs %s (%s); spans are not exported", package, INSTALL_HINT
        )
        return None
    log.warning("OTLP protocol %r is not supported (use http/protobuf or grpc)", protocol)
    return None
