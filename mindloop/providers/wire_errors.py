"""Turn what goes wrong on the wire into `ProviderError`s the retry layer can act on.

Both SDK adapters fail in the same few ways (an HTTP status, a transport failure, a
stream that stops early, a body that is not what the protocol promises), so the rules
for "is this worth retrying" and the one-line message live here once. Every message
passes through `redact` so an API key echoed back by a server never reaches a log, a
traceback or the store. Failures of the connection name the host, so a wrong port or a
server that is down is recognisable from the one line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import httpx2

from mindloop.providers.base import ProviderError

# HTTP statuses that mean "try again later" rather than "your request is wrong".
RETRIABLE_STATUSES: frozenset[int] = frozenset({408, 409, 425, 429})

# Error `type`/`code` values that servers send inside a stream (HTTP status already 200)
# and that describe a transient condition on their side.
RETRIABLE_ERROR_TYPES: frozenset[str] = frozenset(
    {
        "overloaded_error",
        "rate_limit_error",
        "rate_limit_exceeded",
        "api_error",
        "server_error",
        "internal_error",
        "timeout_error",
        "service_unavailable",
    }
)

MAX_MESSAGE_CHARS = 500
REDACTED = "***"
_MIN_KEY_PREFIX = 8  # a token starting with this many characters of the key is a key fragment


def host_of(url: str) -> str:
    """`host:port` of a base URL, for messages ("api.openai.com", "127.0.0.1:8000")."""
    return urlsplit(url).netloc or url


def retry_after_seconds(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """The wait a response asks for before a retry, in seconds, or None.

    `retry-after-ms` (OpenAI's, milliseconds) wins when valid; then `Retry-After` as
    delay-seconds ("3", also "1.5") or as an HTTP-date (a date already past asks for no
    wait). Anything else, negative or not finite, is ignored."""
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = _seconds(lowered.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, as HTTP-dates are
        when = when.replace(tzinfo=UTC)
    delta = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, delta)


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def status_is_retriable(status: int) -> bool:
    """429, 5xx (including Anthropic's 529 "overloaded") and a few transient 4xx."""
    return status >= 500 or status in RETRIABLE_STATUSES


def redact(text: str, secret: str | None) -> str:
    """Remove `secret` and any token that starts like it (servers echo partial keys)."""
    if not secret:
        return text
    text = text.replace(secret, REDACTED)
    if len(secret) >= 2 * _MIN_KEY_PREFIX:
        prefix = re.escape(secret[:_MIN_KEY_PREFIX])
        text = re.sub(prefix + r"\S*", REDACTED, text)
    return text


def _clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > MAX_MESSAGE_CHARS:
        return text[:MAX_MESSAGE_CHARS] + "…"
    return text


def body_message(body: object) -> str | None:
    """The human message of an error body: `{"error": {"message": ...}}`, `{"message": ...}`
    or a bare string (an HTML or text error page)."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            msg = inner.get("message")
            if isinstance(msg, str) and msg:
                return msg
        elif isinstance(inner, str) and inner:
            return inner
        return None
    if isinstance(body, str) and body.strip():
        return body
    return None


def body_error_type(body: object) -> str | None:
    """`error.type` (or `error.code`) of an error body, for in-stream errors."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            for key in ("type", "code"):
                value = inner.get(key)
                if isinstance(value, str) and value:
                    return value
    return None


def status_error(
    provider: str,
    status: int,
    body: object,
    *,
    secret: str | None,
    fallback: str = "",
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """An HTTP error status: "openai: 401 Incorrect API key provided". The response's
    `Retry-After` travels on the error for the retry layer."""
    message = body_message(body) or fallback or "no error message"
    text = redact(_clip(f"{provider}: {status} {message}"), secret)
    return ProviderError(
        text,
        retriable=status_is_retriable(status),
        status=status,
        retry_after=retry_after_seconds(headers) if headers is not None else None,
    )


def stream_error(provider: str, body: object, *, secret: str | None) -> ProviderError:
    """An error the server reported inside an otherwise successful (200) stream."""
    kind = body_error_type(body)
    message = body_message(body) or "error reported inside the stream"
    label = f" ({kind})" if kind else ""
    text = redact(_clip(f"{provider}: stream error{label}: {message}"), secret)
    return ProviderError(text, retriable=kind in RETRIABLE_ERROR_TYPES)


def transport_error(provider: str, host: str, what: str, exc: BaseException) -> ProviderError:
    """Timeouts, refused or reset connections: always worth another attempt.
    "openai: request timed out at 127.0.0.1:8000 (ReadTimeout)"."""
    return ProviderError(f"{provider}: {what} at {host} ({type(exc).__name__})", retriable=True)


def connection_error(
    provider: str, host: str, exc: BaseException, base_url: str | None = None
) -> ProviderError:
    """An SDK connection error, judged by the transport error underneath it: a request
    that could not even be formed (bad URL scheme, illegal header) will fail again the
    same way; a read that broke off is a dropped stream; anything else (refused, reset,
    DNS) is a transient connection failure, which names the whole base URL tried and the
    llm.yaml key that sets it (a wrong port or path is then plain to see)."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, httpx2.LocalProtocolError | httpx2.UnsupportedProtocol):
        return ProviderError(
            f"{provider}: the request could not be sent ({type(cause).__name__}); "
            "check base_url and the API key",
            retriable=False,
        )
    if isinstance(cause, httpx2.RemoteProtocolError | httpx2.ReadError):
        return dropped_stream(provider, host, type(cause).__name__)
    if isinstance(cause, httpx2.TimeoutException):
        return transport_error(provider, host, "request timed out", cause)
    if base_url is None:
        return transport_error(provider, host, "connection failed", exc)
    return ProviderError(
        f"{provider}: connection failed at {base_url} ({type(exc).__name__}); is a server "
        f"running there? (providers.{provider}.base_url in .minds/llm.yaml)",
        retriable=True,
    )


def dropped_stream(provider: str, host: str, detail: str) -> ProviderError:
    """The stream ended before the protocol's end marker (connection dropped mid-way)."""
    return ProviderError(
        f"{provider}: stream from {host} dropped before completion: {detail}", retriable=True
    )


def malformed(provider: str, host: str, detail: str, *, secret: str | None) -> ProviderError:
    """The server answered, but not in the protocol it claims to speak: not retried, since
    asking again would get the same garbage. "openai: 127.0.0.1:8000 returned malformed
    data: a stream event is not valid JSON"."""
    text = redact(_clip(f"{provider}: {host} returned malformed data: {detail}"), secret)
    return ProviderError(text, retriable=False)
