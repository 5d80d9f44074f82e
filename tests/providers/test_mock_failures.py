"""Injected errors, dropped streams, loud unmatched/missing-script errors, reloading."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.providers.base import (
    GenerationRequest,
    PartialOutput,
    ProviderError,
    StreamEvent,
    StreamRestart,
    TextDelta,
    ToolResultMessage,
    UserMessage,
)
from mindloop.providers.mock import MockProvider
from mindloop.providers.retry import stream_with_retry

SNIPPET_INTRO = "Append this entry under `responses:` in that file:\n\n"


def write_script(directory: Path, body: str, model: str = "m") -> MockProvider:
    (directory / f"{model}.yaml").write_text(body, encoding="utf-8")
    return MockProvider("mock", directory)


def request(text: str, member: str | None = None, model: str = "m") -> GenerationRequest:
    return GenerationRequest(
        model=model, system="sys", messages=[UserMessage(text=text)], member=member
    )


async def collect(provider: MockProvider, req: GenerationRequest) -> list[StreamEvent]:
    return [e async for e in provider.stream(req)]


async def failure(provider: MockProvider, req: GenerationRequest) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await collect(provider, req)
    return info.value


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize(
    ("status", "retriable", "http_status"),
    [(429, True, 429), (500, True, 500), (503, True, 503), ("timeout", True, None),
     (400, False, 400), (401, False, 401), (404, False, 404)],
)  # fmt: skip
async def test_injected_error_status_decides_retriable(
    tmp_path: Path, status: int | str, retriable: bool, http_status: int | None
) -> None:
    provider = write_script(
        tmp_path,
        f"responses:\n  - match: go\n    error: {{status: {status}, message: upstream says no}}\n",
    )
    err = await failure(provider, request("go"))
    assert err.retriable is retriable
    assert err.status == http_status
    assert str(err).startswith("upstream says no")
    assert "responses[0]" in str(err)


async def test_error_without_times_always_fails(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        "responses:\n  - match: go\n    error: {status: 500}\n  - match: go\n    response: never\n",
    )
    for _ in range(4):
        assert (await failure(provider, request("go"))).retriable


async def test_error_with_times_fails_first_calls_then_next_entry_answers(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: go
    error: {status: 429, message: rate limited, times: 2}
  - match: go
    response: finally
""",
    )
    assert (await failure(provider, request("go"))).status == 429
    assert (await failure(provider, request("go"))).status == 429
    assert text_of(await collect(provider, request("go"))) == "finally"
    assert text_of(await collect(provider, request("go"))) == "finally"
    # the count is per provider instance
    fresh = MockProvider("mock", tmp_path)
    assert (await failure(fresh, request("go"))).status == 429


async def test_times_counts_only_matching_calls(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: go
    error: {status: 503, times: 1}
  - default: true
    response: ok
""",
    )
    assert text_of(await collect(provider, request("other"))) == "ok"
    assert (await failure(provider, request("go"))).status == 503
    assert text_of(await collect(provider, request("go"))) == "ok"


async def test_after_chunks_emits_partial_text_then_drops(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: go
    response: "one two three four"
    error: {status: 502, message: connection reset, times: 1}
    after_chunks: 2
  - match: go
    response: "one two three four"
""",
    )
    received: list[StreamEvent] = []
    with pytest.raises(ProviderError) as info:
        async for event in provider.stream(request("go")):
            received.append(event)
    assert text_of(received) == "one two "
    assert all(isinstance(e, TextDelta) for e in received)  # no usage/finish before the drop
    assert info.value.retriable and info.value.status == 502
    assert text_of(await collect(provider, request("go"))) == "one two three four"


PARTIAL_SCRIPT = """responses:
  - match: go
    response: "PARTIAL one two three four"
    error: {{status: {status}, message: broke mid-way}}
    after_chunks: 2
"""


class Waits:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def test_non_retriable_error_after_chunks_reports_the_partial_text(tmp_path: Path) -> None:
    # Issue 10 item 2's reproduction: the partial text reaches the consumer, then the
    # error, which says the generation failed mid-stream and what it had produced.
    provider = write_script(tmp_path, PARTIAL_SCRIPT.format(status=400))
    received: list[StreamEvent] = []
    with pytest.raises(ProviderError) as info:
        async for event in stream_with_retry(provider, request("go"), sleep=Waits()):
            received.append(event)
    assert text_of(received) == "PARTIAL one "
    err = info.value
    assert (err.status, err.retriable) == (400, False)
    assert err.partial == PartialOutput(text="PARTIAL one ")


async def test_retriable_error_after_chunks_restarts_until_attempts_run_out(
    tmp_path: Path,
) -> None:
    provider = write_script(tmp_path, PARTIAL_SCRIPT.format(status=503))
    received: list[StreamEvent] = []
    with pytest.raises(ProviderError) as info:
        async for event in stream_with_retry(
            provider, request("go"), max_attempts=3, sleep=Waits()
        ):
            received.append(event)
    assert [e.attempt for e in received if isinstance(e, StreamRestart)] == [2, 3]
    assert text_of(received) == "PARTIAL one " * 3
    err = info.value
    assert err.status == 503 and str(err).endswith("(after 3 attempts)")
    assert err.partial == PartialOutput(text="PARTIAL one ")


async def test_retry_after_travels_on_the_injected_error(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: go
    error: {status: 429, message: slow down, retry_after: 2.5, times: 1}
  - match: go
    response: fine
""",
    )
    assert (await failure(provider, request("go"))).retry_after == 2.5
    waits = Waits()
    events = [e async for e in stream_with_retry(provider, request("go"), sleep=waits)]
    assert text_of(events) == "fine" and waits.delays == []  # `times: 1` was used above
    provider = write_script(
        tmp_path,
        "responses:\n  - match: go\n    error: {status: 503, retry_after: 4}\n",
    )
    waits = Waits()
    with pytest.raises(ProviderError):
        [e async for e in stream_with_retry(provider, request("go"), max_attempts=2, sleep=waits)]
    assert len(waits.delays) == 1 and waits.delays[0] >= 4


async def test_unmatched_request_is_loud_and_not_retriable(tmp_path: Path) -> None:
    provider = write_script(tmp_path, "responses:\n  - match: hello\n    response: hi\n")
    long_text = "please " + "x" * 500
    err = await failure(provider, request(long_text, member="alice"))
    message = str(err)
    assert message.startswith("🤖 Mock Response Not Found")
    assert not err.retriable
    assert str(tmp_path / "m.yaml") in message
    assert "alice" in message
    assert "please " + "x" * 293 + "…" in message
    assert "x" * 294 not in message.split(SNIPPET_INTRO)[0]
    snippet = message.split(SNIPPET_INTRO, 1)[1]
    assert snippet.startswith("  - contains: please xxx")
    assert "    member: alice" in snippet


async def test_appending_the_suggested_entry_makes_the_request_match(tmp_path: Path) -> None:
    script = tmp_path / "m.yaml"
    provider = write_script(tmp_path, "responses:\n  - match: hello\n    response: hi\n")
    tool_result = ToolResultMessage(call_id="call_1", name="read_file", content="# Title\n" * 80)
    req = GenerationRequest(
        model="m", system="sys", messages=[UserMessage(text="go"), tool_result], member="bob"
    )
    snippet = str(await failure(provider, req)).split(SNIPPET_INTRO, 1)[1]
    script.write_text(script.read_text() + snippet + "\n")
    assert text_of(await collect(provider, req)) == "(what bob answers here)"


@settings(max_examples=150, deadline=None)
@given(
    text=st.text() | st.text(min_size=190, max_size=400),
    member=st.none() | st.text(min_size=1),
    tail=st.sampled_from(["", "\n", "\n\n"]),
)
def test_suggested_entry_round_trip_for_any_text(text: str, member: str | None, tail: str) -> None:
    """Whatever the last message and member, pasting the suggestion makes it match."""

    async def run(directory: Path) -> str:
        script = directory / "m.yaml"
        script.write_text("responses:\n  - match: '\\x00 never'\n    response: nope\n" + tail)
        provider = MockProvider("mock", directory)
        req = request(text, member=member)
        snippet = str(await failure(provider, req)).split(SNIPPET_INTRO, 1)[1]
        with script.open("a", encoding="utf-8") as handle:
            handle.write(snippet + "\n")
        return text_of(await collect(provider, req))

    with tempfile.TemporaryDirectory() as directory:
        answered = asyncio.run(run(Path(directory)))
    assert answered == f"(what {member or 'the model'} answers here)"


async def test_missing_script_names_the_file_and_creating_it_from_the_example_works(
    tmp_path: Path,
) -> None:
    provider = MockProvider("mock", tmp_path / "mock")
    req = request("List the files", member="dev", model="gpt-local")
    err = await failure(provider, req)
    message = str(err)
    expected_path = (tmp_path / "mock" / "gpt-local.yaml").resolve()
    assert message.startswith("🤖 Mock Script Not Found")
    assert str(expected_path) in message
    assert not err.retriable
    example = message.split("Create it, for example with:\n\n", 1)[1]
    expected_path.parent.mkdir()
    expected_path.write_text(example + "\n")
    assert text_of(await collect(provider, req)) == "(what dev answers here)"


async def test_model_names_cannot_leave_the_script_dir(tmp_path: Path) -> None:
    (tmp_path / "secret.yaml").write_text("responses:\n  - default: true\n    response: s\n")
    provider = MockProvider("mock", tmp_path / "scripts")
    for bad in ("../secret", "", "a\x00b"):
        err = await failure(provider, request("x", model=bad))
        assert "does not name a script file" in str(err)
        assert not err.retriable


async def test_script_is_reloaded_when_the_file_changes(tmp_path: Path) -> None:
    provider = write_script(tmp_path, "responses:\n  - match: hi\n    response: one\n")
    assert text_of(await collect(provider, request("hi"))) == "one"
    write_script(tmp_path, "responses:\n  - match: hi\n    response: second version\n")
    assert text_of(await collect(provider, request("hi"))) == "second version"
    # same size, different content: the mtime tells
    script = tmp_path / "m.yaml"
    script.write_text("responses:\n  - match: hi\n    response: third  version\n")
    stat = script.stat()
    os.utime(script, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert text_of(await collect(provider, request("hi"))) == "third  version"


async def test_broken_script_reports_file_and_line_then_recovers(tmp_path: Path) -> None:
    provider = write_script(tmp_path, "responses:\n  - match: hi\n    response: [unclosed\n")
    err = await failure(provider, request("hi"))
    assert f"{tmp_path / 'm.yaml'}:" in str(err)
    assert "YAML syntax error" in str(err)
    assert not err.retriable
    write_script(tmp_path, "responses:\n  - match: hi\n    response: fixed\n")
    assert text_of(await collect(provider, request("hi"))) == "fixed"


async def test_invalid_entry_is_reported_when_streaming(tmp_path: Path) -> None:
    provider = write_script(tmp_path, "responses:\n  - match: hi\n    respones: typo\n")
    err = await failure(provider, request("hi"))
    assert f"{tmp_path / 'm.yaml'}:3: responses[0]: unknown key 'respones'" in str(err)
