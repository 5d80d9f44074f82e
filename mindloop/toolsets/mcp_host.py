"""Connections to MCP servers: one per server per process, on an event loop of their own.

Why a thread of its own: an MCP session (the SDK's `ClientSession` over `stdio_client` or
`streamable_http_client`) lives in anyio task groups bound to the event loop that entered
them. mindloop drives dialogs on whatever loop its caller runs (each CLI command, each
test, a web server), yet a server must be shared by every dialog of the process and
outlive any one drive. So every session lives on one daemon thread running its own
asyncio loop (the host); a call from any loop or thread is handed over there and waited
for with a deadline on the caller's side, so nothing a server does can hang the caller.

A connection's life:

- It starts on first use (`listing()` when the registry is built, or a call), within the
  server's `startup_timeout`: the process is spawned (or the URL reached), the session
  initialized and every page of `tools/list` read.
- It is lost when the server's side ends (the process exits, the HTTP endpoint goes
  away) or when a call times out and the server then does not even answer a ping (hung).
  A lost connection is started again on its next use, once per process; when it is lost
  a second time, or the restart fails, the server is down: every call answers with an
  error naming what happened (the server's last stderr lines for a stdio server), and
  nothing is tried again until the process restarts.
- A call that was under way when the connection was lost is not repeated (it may or
  may not have taken effect); a call made after a quiet crash goes to the restarted
  server.

A stdio server gets the SDK's minimal environment (HOME, PATH, …) plus its `env`, never
the whole environment of mindloop (provider keys stay here). Its stderr goes to an
anonymous temporary file, read only to explain a failure.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import tempfile
import textwrap
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO, TypeVar, cast

import anyio
import httpx2
import mcp.types as mcp_types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from mindloop.config.mcp import McpServerConfig, MissingEnvVar, expand_env
from mindloop.errors import MindloopError

__all__ = [
    "McpCallFailed",
    "McpConnection",
    "McpHost",
    "McpServerDown",
    "McpStartFailed",
    "ServerSpec",
    "ServerStatus",
    "mcp_host",
    "shutdown_mcp",
]

log = logging.getLogger("mindloop.mcp")

T = TypeVar("T")

# A lost connection is started again this many times per process, then the server is down.
MAX_RESTARTS = 1
# After a call timed out: how long the server has to answer a ping before it counts as hung
# (at most the call's own timeout).
PING_TIMEOUT = 5.0
# Added to the caller's deadline over the server's own timeouts, for the hand-over.
CALLER_GRACE = 5.0
# At most this many pages of tools/list (a server that paginates forever cannot hang us).
MAX_TOOL_PAGES = 100
STDERR_TAIL_CHARS = 1500
STDERR_TAIL_LINES = 12
# Closing every connection at exit waits at most this long.
SHUTDOWN_TIMEOUT = 10.0


class McpStartFailed(MindloopError):
    """A server could not be started (or reached) and listed."""


class McpServerDown(MindloopError):
    """A server is down for the rest of the process, or could not be started for this call."""


class McpCallFailed(MindloopError):
    """One call failed (timed out, the server stopped during it, the server said no)."""


class ServerStatus(StrEnum):
    NOT_STARTED = "not started"
    UP = "up"
    LOST = "lost"  # ended; started again on its next use (if it has a restart left)
    DOWN = "down"  # unavailable until the process restarts


@dataclass(frozen=True)
class ServerSpec:
    """A server as configured for one rtws (absolute; `cwd` is relative to it)."""

    rtws: Path
    name: str
    config: McpServerConfig

    @property
    def label(self) -> str:
        return f"MCP server {self.name!r}"


# ---------------------------------------------------------------------------- helpers


class _StderrLog:
    """A stdio server's stderr, in an anonymous temporary file: its tail explains a crash.

    Read with `pread`, which leaves the offset the server writes at alone; the tail is
    kept when the file is closed, for messages rendered after the session ended."""

    def __init__(self) -> None:
        # Closed by close(), when the session that writes to it has ended.
        self.file: TextIO = cast(TextIO, tempfile.TemporaryFile("w+", prefix="mindloop-mcp-"))  # noqa: SIM115
        self._final: str | None = None

    def tail(self) -> str:
        if self._final is not None:
            return self._final
        try:
            fd = self.file.fileno()
            size = os.fstat(fd).st_size
            data = os.pread(fd, STDERR_TAIL_CHARS * 4, max(0, size - STDERR_TAIL_CHARS * 4))
        except (OSError, ValueError):
            return ""
        lines = data.decode("utf-8", "replace").strip().splitlines()[-STDERR_TAIL_LINES:]
        return "\n".join(lines)[-STDERR_TAIL_CHARS:]

    def close(self) -> None:
        self._final = self.tail()
        with contextlib.suppress(OSError):
            self.file.close()


class _WatchedStream:
    """The session's read stream, telling the connection when the server's side ends
    (a crash or an exit closes it), which the SDK does not report otherwise."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError):
            self._on_end()
            raise
        return item

    async def __aenter__(self) -> _WatchedStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return result


def _leaves(err: BaseException) -> list[BaseException]:
    if isinstance(err, BaseExceptionGroup):
        return [leaf for sub in err.exceptions for leaf in _leaves(sub)]
    return [err]


def _closed(err: BaseException) -> bool:
    return any(
        isinstance(e, MCPError) and e.code == mcp_types.CONNECTION_CLOSED for e in _leaves(err)
    )


def describe(err: BaseException) -> str:
    """One line for what went wrong, from the innermost meaningful exception (the SDK's
    task groups wrap a transport failure in exception groups and cancellations)."""
    leaves = [e for e in _leaves(err) if not isinstance(e, asyncio.CancelledError)]
    if not leaves:
        return "cancelled"
    first = leaves[0]
    if isinstance(first, MindloopError):  # ours: already a sentence
        return str(first)
    if isinstance(first, MCPError):
        return f"{first.message} (MCP error {first.code})"
    if isinstance(first, TimeoutError):
        return "timed out"
    if isinstance(first, FileNotFoundError) and first.filename:
        return f"cannot run {first.filename!r}: not found"
    text = str(first).strip()
    if isinstance(first, httpx2.HTTPError):
        with contextlib.suppress(RuntimeError):  # no request attached
            text = f"{text} ({first.request.method} {first.request.url})"
    return f"{type(first).__name__}: {text}" if text else type(first).__name__


# ---------------------------------------------------------------------------- connection


@dataclass
class _Live:
    """One started session of a server (a connection has one at a time)."""

    stderr: _StderrLog | None
    session: ClientSession | None = None
    task: asyncio.Task[None] | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False
    lost: str | None = None  # why the session ended, once it has
    http_error: str | None = None  # the last HTTP error status seen (streamable HTTP)

    def lose(self, why: str) -> None:
        if not self.stopping and self.lost is None:
            self.lost = why
        self.wake.set()

    def why(self, base: str) -> str:
        """`base`, with what explains it: the HTTP error status, the server's stderr."""
        text = f"{base} ({self.http_error})" if self.http_error else base
        tail = self.stderr.tail() if self.stderr is not None else ""
        if tail:
            text += "; its stderr ends with:\n" + textwrap.indent(tail, "    ")
        return text


class McpConnection:
    """One server of one rtws, shared by every dialog of the process. Runs on the host
    loop: call its coroutines through `McpHost.call` / `McpHost.run`."""

    def __init__(self, spec: ServerSpec, environ: Mapping[str, str] | None = None) -> None:
        self.spec = spec
        self._environ = environ
        self._lock: asyncio.Lock | None = None
        self._live: _Live | None = None
        self._retired: set[asyncio.Task[None]] = set()
        self.restarts = 0
        self.starts = 0  # sessions started (each a process for stdio)
        self.down: str | None = None  # why the server is down for the rest of the process
        self.tools: list[mcp_types.Tool] = []  # the listing of the latest start

    @property
    def status(self) -> ServerStatus:
        """Where the server is in its life (read from any thread: a snapshot)."""
        if self.down is not None:
            return ServerStatus.DOWN
        live = self._live
        if live is None or live.session is None:
            return ServerStatus.NOT_STARTED
        return ServerStatus.UP if live.lost is None else ServerStatus.LOST

    # -- public, on the host loop

    async def listing(self) -> list[mcp_types.Tool]:
        """The server's tools (starting it if needed)."""
        await self._ensure()
        return self.tools

    async def call(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call tool `name` (as the server names it); McpServerDown / McpCallFailed."""
        session, live = await self._ensure()
        timeout = self.spec.config.call_timeout
        try:
            return await session.call_tool(name, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            raise await self._timed_out(session, live, timeout) from None
        except MCPError as err:
            if err.code == mcp_types.REQUEST_TIMEOUT:
                raise await self._timed_out(session, live, timeout) from None
            if err.code == mcp_types.CONNECTION_CLOSED or live.lost is not None:
                raise self._lost_during_call(live, live.lost or "its connection closed") from None
            raise McpCallFailed(
                f"{self.spec.label} answered the call with an error: {err.message} "
                f"(MCP error {err.code})"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as err:
            raise self._lost_during_call(live, describe(err)) from None
        except Exception as err:  # a result the SDK could not accept (schema, shape)
            raise McpCallFailed(
                f"{self.spec.label} gave an answer that could not be used: {describe(err)}"
            ) from None

    async def close(self) -> None:
        """Stop the session (the process of a stdio server) and wait for it, bounded."""
        live, self._live = self._live, None
        tasks = set(self._retired)
        if live is not None:
            live.stopping = True
            live.wake.set()
            if live.task is not None:
                tasks.add(live.task)
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_TIMEOUT)
        self._retired.clear()

    # -- starting and restarting

    async def _ensure(self) -> tuple[ClientSession, _Live]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.down is not None:
                raise McpServerDown(f"{self.spec.label} is down: {self.down}")
            live = self._live
            if live is not None and live.lost is None and live.session is not None:
                return live.session, live
            lost = live.why(live.lost) if live is not None and live.lost is not None else None
            if live is not None:
                self._retire(live)
            if lost is not None:
                if self.restarts >= MAX_RESTARTS:
                    self.down = (
                        f"it stopped again after {self.restarts} restart(s) ({lost}); its tools "
                        "stay unavailable until mindloop is restarted"
                    )
                    log.warning("%s is down: %s", self.spec.label, self.down)
                    raise McpServerDown(f"{self.spec.label} is down: {self.down}")
                self.restarts += 1
                log.warning("%s stopped (%s); restarting it", self.spec.label, lost)
            try:
                return await self._start()
            except McpStartFailed as err:
                if lost is not None:
                    self.down = (
                        f"it stopped ({lost}) and could not be started again: {err}; its tools "
                        "stay unavailable until mindloop is restarted"
                    )
                    log.warning("%s is down: %s", self.spec.label, self.down)
                    raise McpServerDown(f"{self.spec.label} is down: {self.down}") from None
                raise McpServerDown(f"{self.spec.label} could not be started: {err}") from None

    def _retire(self, live: _Live) -> None:
        """Let a finished or abandoned session wind down in the background."""
        live.stopping = True
        live.wake.set()
        if live.task is not None and not live.task.done():
            if live.session is None:
                live.task.cancel()  # still starting: nothing to wind down gracefully
            self._retired.add(live.task)
            live.task.add_done_callback(self._retired.discard)
        if self._live is live:
            self._live = None

    async def _start(self) -> tuple[ClientSession, _Live]:
        cfg = self.spec.config
        live = _Live(stderr=_StderrLog() if cfg.transport == "stdio" else None)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Nobody may be waiting any more when it fails (a start that timed out).
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        live.task = asyncio.get_running_loop().create_task(self._serve(live, ready))
        self.starts += 1
        try:
            await asyncio.wait_for(asyncio.shield(ready), cfg.startup_timeout + CALLER_GRACE)
        except TimeoutError:
            self._retire(live)
            raise McpStartFailed(
                live.why(f"it did not start within {cfg.startup_timeout:g} s")
            ) from None
        except BaseException:
            self._retire(live)
            raise
        assert live.session is not None
        self._live = live
        return live.session, live

    async def _serve(self, live: _Live, ready: asyncio.Future[None]) -> None:
        """Own one session from start to end (anyio contexts must be left by the task
        that entered them), then tell the connection how it ended."""
        cfg = self.spec.config
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._open_transport(stack, live)
                closed = (
                    "its process exited"
                    if cfg.transport == "stdio"
                    else f"the connection to {cfg.url} closed"
                )
                watched = _WatchedStream(read, lambda: live.lose(closed))
                session = await stack.enter_async_context(
                    ClientSession(
                        watched,
                        write,
                        client_info=mcp_types.Implementation(name="mindloop", version=_version()),
                    )
                )
                with anyio.fail_after(cfg.startup_timeout):
                    await session.initialize()
                    self.tools = await _list_tools(session)
                live.session = session
                if not ready.done():
                    ready.set_result(None)
                await live.wake.wait()
        except BaseException as err:
            why = describe(err)
            if live.lost is not None and _closed(err):
                why = live.lost  # "its process exited" says more than "Connection closed"
            elif isinstance(err, TimeoutError) or why == "timed out":
                why = f"it did not answer within {cfg.startup_timeout:g} s"
            if not ready.done():
                ready.set_exception(McpStartFailed(live.why(why)))
            else:
                live.lose(why)
                if not live.stopping and why != "cancelled":
                    live.lost = why  # the transport's own failure says more than "closed"
            if not isinstance(err, Exception):
                raise  # cancellation, KeyboardInterrupt: not ours to swallow
        finally:
            if not ready.done():
                ready.set_exception(McpStartFailed(live.why("it stopped while starting")))
            if live.stderr is not None:
                live.stderr.close()

    async def _open_transport(
        self, stack: contextlib.AsyncExitStack, live: _Live
    ) -> tuple[Any, Any]:
        cfg = self.spec.config
        environ = os.environ if self._environ is None else self._environ
        try:
            if cfg.command is not None:
                params = _stdio_params(self.spec, environ)
                assert live.stderr is not None
                return await stack.enter_async_context(
                    stdio_client(params, errlog=live.stderr.file)
                )
            assert cfg.url is not None
            url = expand_env(cfg.url, environ)
            client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=_http_headers(cfg, environ),
                    timeout=httpx2.Timeout(cfg.startup_timeout, read=max(300.0, cfg.call_timeout)),
                    event_hooks={"response": [_status_recorder(live)]},
                )
            )
            return await stack.enter_async_context(streamable_http_client(url, http_client=client))
        except MissingEnvVar as err:
            raise McpStartFailed(str(err)) from None

    # -- failures of a call

    async def _timed_out(self, session: ClientSession, live: _Live, timeout: float) -> Exception:
        try:
            with anyio.fail_after(min(PING_TIMEOUT, timeout)):
                await session.send_ping()
        except Exception:
            live.lose(f"it did not answer a ping after a call timed out after {timeout:g} s")
            return McpCallFailed(
                f"{self.spec.label} did not answer within {timeout:g} s and no longer responds; "
                "the call was abandoned (it may still take effect) and the server will be "
                "restarted on its next use"
            )
        return McpCallFailed(
            f"{self.spec.label} did not answer within {timeout:g} s; the call was abandoned "
            "(it may still take effect)"
        )

    def _lost_during_call(self, live: _Live, why: str) -> McpCallFailed:
        live.lose(why)
        next_time = (
            "it will be restarted on its next use"
            if self.restarts < MAX_RESTARTS
            else "it has been restarted before, so it is now down"
        )
        return McpCallFailed(
            f"{self.spec.label} stopped during the call: {live.why(live.lost or why)}\nThe "
            f"call was not repeated and may or may not have taken effect; {next_time}."
        )


def _stdio_params(spec: ServerSpec, environ: Mapping[str, str]) -> StdioServerParameters:
    cfg = spec.config
    assert cfg.command is not None
    cwd = spec.rtws / cfg.cwd if cfg.cwd else spec.rtws
    if not cwd.is_dir():
        raise McpStartFailed(f"its cwd {cwd} is not a directory")
    env = {key: expand_env(value, environ) for key, value in cfg.env.items()}
    return StdioServerParameters(
        command=cfg.command,
        args=[expand_env(arg, environ) for arg in cfg.args],
        env=env or None,
        cwd=cwd,
    )


def _http_headers(cfg: McpServerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    headers = {key: expand_env(value, environ) for key, value in cfg.headers.items()}
    for header, name in cfg.headers_env.items():
        if name not in environ:
            raise MissingEnvVar(name)
        headers[header] = environ[name]
    return headers


def _status_recorder(live: _Live) -> Callable[[httpx2.Response], Awaitable[None]]:
    """An httpx2 hook keeping the last error status: the SDK reports a 401 as a bare
    "Server returned an error response", which does not tell the user to fix a header."""

    async def record(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            live.http_error = (
                f"HTTP {response.status_code} {response.reason_phrase} from {response.url}"
            )

    return record


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mindloop")
    except PackageNotFoundError:
        return "0"


# ---------------------------------------------------------------------------- the host


class McpHost:
    """The process's MCP connections and the loop they run on (see the module docstring)."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="mindloop-mcp", daemon=True)
        self._connections: dict[tuple[str, str], McpConnection] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def connection(self, spec: ServerSpec) -> McpConnection:
        """The connection of `spec`'s server in this process; a changed configuration of
        the same server gets a new one (the old one is closed)."""
        key = (str(spec.rtws), spec.name)
        with self._lock:
            found = self._connections.get(key)
            if found is not None and found.spec == spec:
                return found
            created = self._connections[key] = McpConnection(spec)
        if found is not None:
            self.submit(found.close())
        return created

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("McpHost.submit called from the host thread itself")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run `coro` on the host, blocking this thread at most `timeout` seconds."""
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    async def call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Await `coro` on the host from any event loop, at most `timeout` seconds."""
        future = self.submit(coro)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        finally:
            future.cancel()  # no-op once done; stops the host's work when we gave up

    def close(self, timeout: float = SHUTDOWN_TIMEOUT) -> None:
        """Close every connection (stdio servers exit) and stop the host."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()

        async def close_all() -> None:
            await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)


_HOST: McpHost | None = None
_HOST_LOCK = threading.Lock()


def mcp_host() -> McpHost:
    """The process's host, started on first use (and closed at exit)."""
    global _HOST
    with _HOST_LOCK:
        if _HOST is None:
            _HOST = McpHost()
            if not _ATEXIT_REGISTERED:
                _register_atexit()
        return _HOST


_ATEXIT_REGISTERED = False


def _register_atexit() -> None:
    global _ATEXIT_REGISTERED
    _ATEXIT_REGISTERED = True
    atexit.register(shutdown_mcp)


def shutdown_mcp(timeout: float = SHUTDOWN_TIMEOUT) -> None:
    """Close every MCP connection of the process (servers started later get a new host).
    Runs at exit; tests call it to stop their servers."""
    global _HOST
    with _HOST_LOCK:
        host, _HOST = _HOST, None
    if host is not None:
        host.close(timeout)
