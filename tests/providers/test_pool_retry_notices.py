"""Every retry the provider pool makes is told as it happens (`ProviderPool.on_retry`):
which attempt of how many, the failure and its status, the host tried, the wait, and the
dialog it is for. A connection failure names the whole base URL and its llm.yaml key."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mindloop.config import load_config
from mindloop.providers.base import GenerationRequest, ProviderError, UserMessage
from mindloop.providers.pool import ProviderPool, RetryNotice, generation_caller
from mindloop.rtws import init_rtws
from tests.scenario_util import write_script


class Waits:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def _request(model: str = "mock-model") -> GenerationRequest:
    return GenerationRequest(
        model=model, system="s", messages=[UserMessage(text="go")], member="dev"
    )


async def _stream(pool: ProviderPool, name: str, request: GenerationRequest) -> list[object]:
    return [ev async for ev in pool.stream(name, request)]


async def test_a_retried_mock_failure_is_told_with_attempt_status_wait_and_caller(
    tmp_path: Path,
) -> None:
    init_rtws(tmp_path, provider="mock")
    write_script(
        tmp_path,
        [
            {"match": "go", "error": {"status": 503, "times": 2, "retry_after": 0.25}},
            {"match": "go", "response": "up again"},
        ],
    )
    waits = Waits()
    pool = ProviderPool(load_config(tmp_path).llm, tmp_path, sleep=waits)
    notices: list[RetryNotice] = []
    unsubscribe = pool.on_retry(notices.append)
    pool.on_retry(lambda n: 1 / 0)  # a broken listener never stops the generation
    token = generation_caller.set("dlg-1")
    try:
        events = await _stream(pool, "mock", _request())
    finally:
        generation_caller.reset(token)
    assert "".join(getattr(e, "text", "") for e in events) == "up again"
    assert [(n.attempt, n.max_attempts, n.status) for n in notices] == [(2, 5, 503), (3, 5, 503)]
    assert [n.delay for n in notices] == waits.delays and min(waits.delays) >= 0.25
    first = notices[0]
    assert (first.caller, first.provider, first.model, first.member) == (
        "dlg-1",
        "mock",
        "mock-model",
        "dev",
    )
    assert first.host is None and "injected mock error" in first.error
    unsubscribe()
    await pool.aclose()


async def test_a_refused_connection_names_the_base_url_and_each_retry_the_host(
    tmp_path: Path,
) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    init_rtws(
        tmp_path, provider="openai", base_url=f"http://127.0.0.1:{port}/v1", model="local-model"
    )
    llm = tmp_path / ".minds" / "llm.yaml"
    text = llm.read_text().replace(
        "kind: openai-compatible", "kind: openai-compatible\n    max_retries: 3"
    )
    llm.write_text(text)
    pool = ProviderPool(load_config(tmp_path).llm, tmp_path, sleep=Waits())
    notices: list[RetryNotice] = []
    pool.on_retry(notices.append)
    with pytest.raises(ProviderError) as info:
        await _stream(pool, "openai", _request("local-model"))
    await pool.aclose()
    message = str(info.value)
    assert f"connection failed at http://127.0.0.1:{port}/v1" in message
    assert "providers.openai.base_url in .minds/llm.yaml" in message
    assert message.endswith("(after 3 attempts)")
    assert [(n.attempt, n.host, n.status) for n in notices] == [
        (2, f"127.0.0.1:{port}", None),
        (3, f"127.0.0.1:{port}", None),
    ]
