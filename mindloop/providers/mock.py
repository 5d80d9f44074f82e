"""The mock provider: scripted, deterministic answers for offline runs, demos and tests.

`MockProvider(name, script_dir)` answers a request for model `m` from
`<script_dir>/m.yaml` (format: docs/mock-provider.md, schema: mock_script.py). It speaks
the same stream protocol as the real adapters, including injected failures the retry
layer treats exactly like real ones, so whole team scenarios run without a network.

The hot path is cheap on purpose (the mock drives the runtime benchmarks): one `stat` per
call, a cached compiled script, lazily normalised text, and pre-split chunks.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from mindloop.providers.base import (
    AssistantMessage,
    Finish,
    GenerationRequest,
    ProviderError,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallEvent,
    ToolResultMessage,
    Usage,
)
from mindloop.providers.mock_script import (
    CompiledEntry,
    MockScript,
    MockScriptError,
    RequestView,
)

NOT_FOUND_HEADER = "🤖 Mock Response Not Found"
SCRIPT_MISSING_HEADER = "🤖 Mock Script Not Found"
SHOWN_MESSAGE_CHARS = 300
SUGGEST_MATCH_CHARS = 200  # longer last messages are suggested as `contains` of a prefix
SUGGEST_CONTAINS_CHARS = 80

_CALL_ID_RE = re.compile(r"call_(\d+)")

_StatKey = tuple[int, int, int, int]


class MockProvider:
    """A provider whose "model" is a YAML script per model name."""

    def __init__(self, name: str, script_dir: Path) -> None:
        self.name = name
        self.script_dir = Path(script_dir)
        self._paths: dict[str, Path] = {}
        self._scripts: dict[Path, tuple[_StatKey, MockScript | MockScriptError]] = {}
        # How often each `error: {times: N}` entry has fired, by (script, entry index).
        self._fired: dict[tuple[Path, int], int] = {}
        self._next_call = 1

    def script_path(self, model: str) -> Path:
        """The script file answering `model`; refuses names that leave `script_dir`."""
        path = self._paths.get(model)
        if path is None:
            base = self.script_dir.resolve()
            try:
                path = (base / f"{model}.yaml").resolve()
            except (OSError, ValueError):  # e.g. a NUL byte in the name
                path = base.parent
            if not model or not path.is_relative_to(base):
                raise ProviderError(
                    f"mock provider '{self.name}': model name {model!r} does not name a "
                    f"script file inside {self.script_dir}"
                )
            self._paths[model] = path
        return path

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        """Answer `request` from its script: thinking, text chunks, tool calls, usage,
        finish; or the entry's injected error. Raises ProviderError when unmatched."""
        path = self.script_path(request.model)
        script = self._script(path, request)
        view = RequestView(request)
        entry = self._select(script, view)
        spec = entry.spec

        if spec.delay_ms:
            await asyncio.sleep(spec.delay_ms / 1000)

        error = spec.error
        response_chunks = entry.response_chunks
        if error is not None:
            if spec.after_chunks is None:
                raise self._injected(path, entry)
            response_chunks = response_chunks[: spec.after_chunks]

        chunk_delay = spec.chunk_delay_ms / 1000
        first = True
        for chunk in entry.thinking_chunks:
            if chunk_delay and not first:
                await asyncio.sleep(chunk_delay)
            first = False
            yield ThinkingDelta(text=chunk)
        for chunk in response_chunks:
            if chunk_delay and not first:
                await asyncio.sleep(chunk_delay)
            first = False
            yield TextDelta(text=chunk)

        if error is not None:
            raise self._injected(path, entry)

        if entry.tool_calls:
            # Reserve the ids before yielding: concurrent streams must not share them.
            first_id = self._first_call_number(request)
            self._next_call = first_id + len(entry.tool_calls)
            for offset, (name, arguments) in enumerate(entry.tool_calls):
                call = ToolCall(id=f"call_{first_id + offset}", name=name, arguments=arguments)
                yield ToolCallEvent(call=call)

        usage = spec.usage
        input_tokens = usage.input_tokens if usage is not None else None
        output_tokens = usage.output_tokens if usage is not None else None
        if input_tokens is None:
            input_tokens = _estimate_tokens(_context_chars(request))
        if output_tokens is None:
            output_tokens = _estimate_tokens(entry.output_chars)
        yield Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        yield Finish(reason="tool_calls" if entry.tool_calls else "stop")

    async def aclose(self) -> None:
        """Forget cached scripts (nothing else is held open)."""
        self._scripts.clear()
        self._paths.clear()

    # ------------------------------------------------------------ script cache

    def _script(self, path: Path, request: GenerationRequest) -> MockScript:
        """The compiled script for `path`, re-read only when its stat changed."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._scripts.pop(path, None)
            raise ProviderError(self._missing_message(path, request)) from None
        except OSError as exc:
            raise ProviderError(f"mock script {path}: cannot read: {exc}") from None
        key = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
        cached = self._scripts.get(path)
        if cached is None or cached[0] != key:
            loaded: MockScript | MockScriptError
            try:
                loaded = MockScript.load(path)
            except MockScriptError as exc:
                loaded = exc
            cached = (key, loaded)
            self._scripts[path] = cached
        result = cached[1]
        if isinstance(result, MockScriptError):
            raise ProviderError(f"invalid mock script:\n{result}")
        return result

    # ------------------------------------------------------------ selection

    def _select(self, script: MockScript, view: RequestView) -> CompiledEntry:
        """First matching entry in file order; an error entry with `times: N` is skipped
        once it has fired N times, so a later entry answers."""
        for entry in script.entries:
            if not entry.matches(view):
                continue
            error = entry.spec.error
            if error is not None and error.times is not None:
                key = (script.path, entry.index)
                fired = self._fired.get(key, 0)
                if fired >= error.times:
                    continue
                self._fired[key] = fired + 1
            return entry
        raise ProviderError(self._unmatched_message(script, view))

    def _first_call_number(self, request: GenerationRequest) -> int:
        """Next `call_<n>`: the instance counter, but never at or below an id already in
        the latest assistant tool calls of the history, so ids stay unique in a dialog
        even when a new process (fresh counter) continues it."""
        number = self._next_call
        for message in reversed(request.messages):
            if isinstance(message, AssistantMessage) and message.tool_calls:
                for call in message.tool_calls:
                    found = _CALL_ID_RE.fullmatch(call.id)
                    if found:
                        number = max(number, int(found.group(1)) + 1)
                break
        return number

    def _injected(self, path: Path, entry: CompiledEntry) -> ProviderError:
        error = entry.spec.error
        assert error is not None
        status = "timeout" if error.status == "timeout" else f"HTTP {error.status}"
        return ProviderError(
            f"{error.message} (mock provider '{self.name}': {status} injected by "
            f"{path}:{entry.line} responses[{entry.index}])",
            retriable=error.retriable,
            status=error.http_status,
            retry_after=error.retry_after,
        )

    # ------------------------------------------------------------ loud failures

    def _unmatched_message(self, script: MockScript, view: RequestView) -> str:
        shown = view.text
        if len(shown) > SHOWN_MESSAGE_CHARS:
            shown = shown[:SHOWN_MESSAGE_CHARS] + "…"
        role = {"user": "user", "tool": "tool result", "assistant": "assistant"}.get(
            view.role or "", "none: the request has no messages"
        )
        return "\n".join(
            [
                NOT_FOUND_HEADER,
                f"  script:  {script.path} (provider '{self.name}', "
                f"{len(script.entries)} entries, none matched)",
                f"  member:  {view.member or '(none)'}",
                f"  last message ({role}):",
                _indent(shown, "    | "),
                "Append this entry under `responses:` in that file:",
                "",
                suggest_entry(view),
            ]
        )

    def _missing_message(self, path: Path, request: GenerationRequest) -> str:
        view = RequestView(request)
        return "\n".join(
            [
                SCRIPT_MISSING_HEADER,
                f"  model '{request.model}' of mock provider '{self.name}' answers from "
                f"{path}, which does not exist.",
                f"  member:  {request.member or '(none)'}",
                "Create it, for example with:",
                "",
                "responses:",
                suggest_entry(view),
            ]
        )


def suggest_entry(view: RequestView) -> str:
    """A ready-to-paste `responses` item (indented for `responses:`) that matches the
    request `view` describes. Values are quoted by yaml.safe_dump, so any text is safe."""
    text = " ".join(view.text.split())
    entry: dict[str, object] = {}
    if len(text) <= SUGGEST_MATCH_CHARS:
        entry["match"] = text
    else:
        entry["contains"] = text[:SUGGEST_CONTAINS_CHARS]
    if view.member is not None:
        entry["member"] = view.member
    who = view.member or "the model"
    entry["response"] = f"(what {who} answers here)"
    return _indent(_dump_exact([entry]).rstrip("\n"), "  ")


def _dump_exact(data: object) -> str:
    """YAML for `data`, readable (raw unicode) when that round-trips; PyYAML writes some
    line-break characters (e.g. U+0085) raw, which a reader folds, so then escape all."""
    options: dict[str, Any] = {"sort_keys": False, "default_flow_style": False, "width": 1 << 20}
    dumped = yaml.safe_dump(data, allow_unicode=True, **options)
    if yaml.safe_load(dumped) == data:
        return dumped
    return yaml.safe_dump(data, allow_unicode=False, **options)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.split("\n"))


def _context_chars(request: GenerationRequest) -> int:
    """Characters of the whole context: realistic input usage grows with the history (a
    script can set `usage.input_tokens` to skip this per-message pass)."""
    total = len(request.system)
    for m in request.messages:
        total += len(m.content) if isinstance(m, ToolResultMessage) else len(m.text)
    return total


def _estimate_tokens(chars: int) -> int:
    return (chars + 3) // 4
