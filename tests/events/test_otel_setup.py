"""Tracing set up from `OTEL_*` variables: off unless asked for (and then nothing of
OpenTelemetry is even imported), the SDK built as the variables say, a missing extra
reported without failing the run, and `mindloop chat` exporting its spans over OTLP/HTTP
to a collector on 127.0.0.1."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from mindloop.events.otel_setup import exporters_wanted, tracing_from_env
from tests.events.otlp_collector import Received, otlp_collector, received_spans
from tests.scenario_util import ml, write_script, write_team

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, []),
        (ENDPOINT, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}, ["otlp"]),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_TRACES_EXPORTER": "console, OTLP"}, ["console", "otlp"]),
        ({"OTEL_TRACES_EXPORTER": " "}, []),
    ],
)
def test_which_exporters_the_variables_ask_for(env: dict[str, str], wanted: list[str]) -> None:
    assert exporters_wanted(env) == wanted


def test_nothing_configured_or_the_sdk_disabled_means_no_tracing() -> None:
    assert tracing_from_env({}) is None
    assert tracing_from_env({**ENDPOINT, "OTEL_SDK_DISABLED": "TRUE"}) is None
    assert tracing_from_env({"OTEL_SDK_DISABLED": "true"}, tracer_provider=TracerProvider()) is None


def test_an_untraced_project_never_imports_opentelemetry(rtws: Path) -> None:
    code = (
        "import sys; from mindloop import service; "
        f"p = service.open_project({str(rtws)!r}); "
        "print(p.tracing, sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    env = {"PATH": "/usr/bin:/bin"}  # no OTEL_* variable
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "None []"


def test_an_endpoint_builds_an_sdk_provider_named_after_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    tracing = tracing_from_env(ENDPOINT)
    assert tracing is not None
    provider = tracing.recorder._tracer.resource  # type: ignore[attr-defined]
    assert provider.attributes["service.name"] == "mindloop"
    tracing.close()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "team-a")  # read by the SDK itself
    named = tracing_from_env({**ENDPOINT, "OTEL_SERVICE_NAME": "team-a"})
    assert named is not None
    assert named.recorder._tracer.resource.attributes["service.name"] == "team-a"  # type: ignore[attr-defined]
    named.close()


def test_an_unknown_exporter_or_protocol_is_reported_and_tracing_stays_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="mindloop.tracing"):
        assert tracing_from_env({"OTEL_TRACES_EXPORTER": "zipkin"}) is None
        assert tracing_from_env({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}) is None
    assert "unknown exporter 'zipkin'" in caplog.text
    assert "OTLP protocol 'http/json' is not supported" in caplog.text


def test_without_the_sdk_tracing_is_off_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # import fails
    with caplog.at_level(logging.WARNING, logger="mindloop.tracing"):
        assert tracing_from_env(ENDPOINT) is None
    assert "pip install 'mindloop[otel]'" in caplog.text


def test_an_application_s_global_provider_is_used_and_only_flushed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = TracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    flushed: list[bool] = []
    monkeypatch.setattr(provider, "force_flush", lambda *a: flushed.append(True))
    monkeypatch.setattr(provider, "shutdown", lambda: pytest.fail("not ours to shut down"))
    tracing = tracing_from_env({})
    assert tracing is not None
    tracing.close()
    assert flushed == [True]


# ---------------------------------------------------------------- OTLP end to end


@pytest.fixture
def collector() -> Iterator[tuple[str, Received]]:
    with otlp_collector() as found:
        yield found


def test_mindloop_chat_exports_its_spans_over_otlp(
    rtws: Path, collector: tuple[str, Received]
) -> None:
    url, received = collector
    write_team(rtws, {"lead": {"toolsets": ["fs"]}})
    write_script(
        rtws,
        [
            {"match": "list the files", "tool_calls": [{"name": "list_dir", "arguments": {}}]},
            {"role": "tool", "contains": "README.md", "response": "Two files."},
        ],
    )
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_SERVICE_NAME": "otel-e2e"}
    proc = ml("chat", "-C", str(rtws), "--task", "tasks/example.tsk", "list the files", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spans = received_spans(received)
    names = sorted(span.name for span, _ in spans)
    assert names == [
        "chat mock-model",
        "chat mock-model",
        "execute_tool list_dir",
        "invoke_agent lead",
    ]
    services = {
        a.value.string_value for _, res in spans for a in res.attributes if a.key == "service.name"
    }
    assert services == {"otel-e2e"}
    drive = next(span for span, _ in spans if span.name == "invoke_agent lead")
    assert all(
        span.trace_id == drive.trace_id and span.parent_span_id == drive.span_id
        for span, _ in spans
        if span is not drive
    )
