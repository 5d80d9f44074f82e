"""Builds providers from llm.yaml entries and enforces per-provider concurrency.

One `ProviderPool` per runtime: providers are built lazily on first use (so a missing API
key only matters for a provider somebody actually uses) and each gets a semaphore sized
by its `concurrency` setting, so a fan-out of 100 side dialogs queues instead of
hammering the endpoint.

Every retry the pool makes is told, as it happens, to whoever listens (`on_retry`): a
`RetryNotice` with the attempt about to start, the failure, the host tried and the wait,
so a face can show it and a log can keep it. The pool does not know dialogs; the caller
it works for is whatever `generation_caller` holds in the calling task (the engine, or
whoever bridges its events, sets it when a generation starts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from mindloop.errors import MindloopError
from mindloop.providers.base import GenerationRequest, Provider, ProviderError, StreamEvent
from mindloop.providers.guard import Deadlines
from mindloop.providers.retry import Sleep, stream_with_retry

if TYPE_CHECKING:
    from mindloop.config import LlmConfig, ProviderConfig


DEFAULT_SCRIPT_DIR = ".minds/mock"

log = logging.getLogger(__name__)

# Who the generation streamed in this task is for (a dialog id), as the retry notices name it.
generation_caller: ContextVar[str | None] = ContextVar("mindloop_generation_caller", default=None)


class RetryNotice(BaseModel):
    """One retry of a generation, told before its wait: `attempt` (2 for the first retry)
    of `max_attempts` starts after `delay` seconds because the last one failed with
    `error` (`status` its HTTP status, if any) at `host` (None for a provider without
    one, e.g. the mock)."""

    caller: str | None  # the dialog the generation is for, when known
    provider: str  # the llm.yaml entry
    model: str
    member: str | None
    host: str | None
    attempt: int
    max_attempts: int
    status: int | None
    error: str
    delay: float


RetryListener = Callable[[RetryNotice], None]


class ProviderSetupError(MindloopError):
    pass


def build_provider(cfg: ProviderConfig, rtws: Path) -> Provider:
    """Instantiate the adapter for one llm.yaml provider entry."""
    names = {key: (info.name or key) for key, info in cfg.models.items()}
    if cfg.kind == "mock":
        from mindloop.providers.mock import MockProvider

        return MockProvider(cfg.name, Path(rtws) / (cfg.script_dir or DEFAULT_SCRIPT_DIR))
    api_key = _api_key(cfg)
    if cfg.kind == "openai-compatible":
        from mindloop.providers.openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(
            cfg.name, cfg.base_url, api_key, model_name_map=names, timeout=cfg.timeout
        )
    if cfg.kind == "anthropic":
        from mindloop.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider(
            cfg.name, cfg.base_url, api_key, model_name_map=names, timeout=cfg.timeout
        )
    raise ProviderSetupError(f"provider {cfg.name!r}: unknown kind {cfg.kind!r}")


def _api_key(cfg: ProviderConfig) -> str | None:
    if not cfg.api_key_env:
        return None
    key = os.environ.get(cfg.api_key_env)
    if not key:
        raise ProviderSetupError(
            f"provider {cfg.name!r} needs an API key: set the environment variable "
            f"{cfg.api_key_env} (named by api_key_env in .minds/llm.yaml)"
        )
    return key


class ProviderPool:
    """`injected` providers (name -> Provider) stand in for the llm.yaml entries of those
    names (which still give their models, retries and concurrency); the caller owns and
    closes them. `sleep` is how the pool waits between attempts (tests pass one that
    records)."""

    def __init__(
        self,
        llm: LlmConfig,
        rtws: Path,
        injected: Mapping[str, Provider] | None = None,
        *,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._llm = llm
        self._rtws = rtws
        self._sleep = sleep
        self._providers: dict[str, Provider] = {}
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._injected = dict(injected or {})
        self._retry_listeners: list[RetryListener] = []
        unknown = sorted(set(self._injected) - set(llm.providers))
        if unknown:
            raise ProviderSetupError(
                f"injected provider(s) {', '.join(map(repr, unknown))} not in .minds/llm.yaml "
                f"(providers: {', '.join(llm.providers) or '(none)'}); an injected provider "
                "replaces the entry of its name"
            )

    def get(self, name: str) -> Provider:
        prov = self._providers.get(name)
        if prov is None:
            cfg = self._llm.providers.get(name)
            if cfg is None:
                raise ProviderSetupError(f"no provider {name!r} in .minds/llm.yaml")
            injected = self._injected.get(name)
            prov = build_provider(cfg, self._rtws) if injected is None else injected
            self._providers[name] = prov
            self._limits[name] = asyncio.Semaphore(max(1, cfg.concurrency))
        return prov

    def on_retry(self, listener: RetryListener) -> Callable[[], None]:
        """Hear every retry from now on (called inline, before the wait: keep it cheap);
        returns an unsubscribe function. A listener that raises is ignored."""
        self._retry_listeners.append(listener)
        return lambda: self._retry_listeners.remove(listener)

    def _retrying(
        self, name: str, provider: Provider, request: GenerationRequest, max_attempts: int
    ) -> Callable[[int, ProviderError, float], None]:
        def tell(attempt: int, error: ProviderError, delay: float) -> None:
            notice = RetryNotice(
                caller=generation_caller.get(),
                provider=name,
                model=request.model,
                member=request.member,
                host=getattr(provider, "host", None),
                attempt=attempt,
                max_attempts=max_attempts,
                status=error.status,
                error=str(error),
                delay=delay,
            )
            log.warning(
                "provider %s: attempt %d of %d in %.1fs after: %s",
                notice.provider,
                attempt,
                max_attempts,
                delay,
                notice.error,
                extra={"retry": notice.model_dump()},
            )
            for listener in list(self._retry_listeners):
                with contextlib.suppress(Exception):  # a face must never stop a generation
                    listener(notice)

        return tell

    def stream(self, provider_name: str, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        """Stream one generation with retries, deadlines and `Retry-After` as the provider's
        llm.yaml entry sets them, holding a concurrency slot throughout; each retry is
        told to the `on_retry` listeners. (The retry loop itself holds the slot: no
        generator layer of its own here, which every event would pass through.)"""
        provider = self.get(provider_name)
        cfg = self._llm.providers[provider_name]
        deadlines = Deadlines(
            first_content=cfg.first_content_deadline, total=cfg.generation_deadline
        )
        return stream_with_retry(
            provider,
            request,
            max_attempts=cfg.max_retries,
            retry_after_cap=cfg.retry_after_cap,
            deadlines=deadlines,
            sleep=self._sleep,
            on_retry=self._retrying(provider_name, provider, request, cfg.max_retries),
            slot=self._limits[provider_name],
        )

    async def aclose(self) -> None:
        for name, prov in self._providers.items():
            if name not in self._injected:
                await prov.aclose()
        self._providers.clear()
