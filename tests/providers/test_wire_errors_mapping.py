"""Error classification and key redaction shared by the SDK adapters."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindloop.providers import wire_errors


@pytest.mark.parametrize(
    ("status", "retriable"),
    [(400, False), (401, False), (403, False), (404, False), (422, False), (408, True),
     (429, True), (500, True), (502, True), (503, True), (529, True)],
)  # fmt: skip
def test_status_retriability(status: int, retriable: bool) -> None:
    err = wire_errors.status_error("p", status, {"error": {"message": "m"}}, secret=None)
    assert err.retriable is retriable and err.status == status
    assert str(err) == f"p: {status} m"


def test_status_error_falls_back_to_the_body_text() -> None:
    err = wire_errors.status_error("p", 502, "<html>Bad   gateway</html>", secret=None)
    assert str(err) == "p: 502 <html>Bad gateway</html>"


def test_stream_error_retriable_by_type() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert wire_errors.stream_error("p", body, secret=None).retriable
    bad = {"error": {"type": "invalid_request_error", "message": "nope"}}
    assert not wire_errors.stream_error("p", bad, secret=None).retriable


@given(
    key=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=16, max_size=60),
    before=st.text(max_size=40),
    after=st.text(max_size=40),
)
def test_redact_removes_the_key_and_its_fragments(key: str, before: str, after: str) -> None:
    fragment = key[:12] + "***" + key[-4:]
    text = wire_errors.redact(f"{before}{key} {before} {fragment}{after}", key)
    assert key not in text
    assert key[:8] not in text


def test_redact_without_a_secret_changes_nothing() -> None:
    assert wire_errors.redact("hello sk-abc", None) == "hello sk-abc"


def test_long_messages_are_clipped() -> None:
    err = wire_errors.status_error("p", 400, {"error": {"message": "x" * 5000}}, secret=None)
    assert len(str(err)) <= wire_errors.MAX_MESSAGE_CHARS + 1
