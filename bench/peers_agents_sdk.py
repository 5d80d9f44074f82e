"""Scenarios 1 and 6 on the OpenAI Agents SDK: `Runner` with a file-backed `SQLiteSession`,
and the same agent's input tokens over a long run (scenario 6, full history: what the
runner sends by default); scenario 7 as three agents (plan, do, check) run in turn on one
session by a loop in Python, the way the SDK's users orchestrate phases.

The session is the SDK's own SQLite store (WAL; SQLite's default synchronous=FULL), so
every item the run saves is committed durably. The model is a zero-latency `Model`
implementation that calls the tool until it has seen 20 tool outputs after the last
user item, then answers; in scenario 6 it calls the probe tool instead and records the
size of every request it is given (characters / 4, as the mock provider estimates
mindloop's). Tracing is disabled so nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_RESULT_CHARS,
    DEFAULT_TOOL_CALLS,
    FINAL_TEXT,
    LOOP_CHECK,
    LOOP_DO,
    LOOP_PLAN,
    LOOP_PROMPT,
    PROBE_DESCRIPTION,
    PROBE_TOOL,
    START_TEXT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    estimate_tokens,
    history_texts,
    loop_calls,
    loop_input,
    probe_result_text,
    tool_result_text,
)

try:
    from agents import Agent, Model, RunConfig, Runner, SQLiteSession, function_tool
    from agents.items import ModelResponse
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    AVAILABLE = True
except ImportError:  # the bench extra is not installed
    AVAILABLE = False

NAME = "OpenAI Agents SDK"
SYSTEM_PROMPT = "You are Dev."


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


if AVAILABLE:

    class ScriptedModel(Model):
        """Calls the tool `calls` times after the last user item, then answers."""

        def __init__(self, calls: int = DEFAULT_TOOL_CALLS, tool: str = TOOL_NAME) -> None:
            self.calls = calls
            self.tool = tool
            self.seen: list[int] = []  # scenario 6: input tokens of each request, in order

        def _reply(self, items: str | list[Any]) -> ModelResponse:
            done = 0
            if not isinstance(items, str):
                for item in reversed(items):
                    if _get(item, "role") == "user":
                        break
                    if _get(item, "type") == "function_call_output":
                        done += 1
            usage = Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)
            if done < self.calls:
                n = done + 1
                call = ResponseFunctionToolCall(
                    arguments=f'{{"n": {n}}}',
                    call_id=f"call_{n}",
                    name=self.tool,
                    type="function_call",
                    id=f"fc_{n}",
                    status="completed",
                )
                return ModelResponse(output=[call], usage=usage, response_id=None)
            message = ResponseOutputMessage(
                id="msg_final",
                content=[ResponseOutputText(text=FINAL_TEXT, type="output_text", annotations=[])],
                role="assistant",
                status="completed",
                type="message",
            )
            return ModelResponse(output=[message], usage=usage, response_id=None)

        async def get_response(  # type: ignore[override]
            self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
        ) -> ModelResponse:
            chars = len(system_instructions or "")
            chars += len(input) if isinstance(input, str) else sum(_chars(i) for i in input)
            self.seen.append(estimate_tokens(chars))
            return self._reply(input)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
            raise NotImplementedError("the benchmark runs the SDK without streaming")


def _noop(n: int) -> str:
    return tool_result_text(n)


def _chars(item: Any) -> int:
    """Characters of an input item's text: a message's content (a string or text parts),
    a tool call's output."""
    content = _get(item, "content")
    if content is None:
        content = _get(item, "output")
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    return sum(len(_get(part, "text") or "") for part in content)


def run_tokens(steps: int, result_chars: int = DEFAULT_RESULT_CHARS) -> list[int]:
    """Scenario 6: one run of `steps` model calls (`steps - 1` probe calls, then the
    answer) with the whole history in every request; the input tokens of each call."""

    def probe(n: int) -> str:
        return probe_result_text(n, result_chars)

    tool = function_tool(probe, name_override=PROBE_TOOL, description_override=PROBE_DESCRIPTION)
    model = ScriptedModel(calls=steps - 1, tool=PROBE_TOOL)
    agent = Agent(name="dev", instructions=SYSTEM_PROMPT, tools=[tool], model=model)
    result = asyncio.run(
        Runner.run(
            agent,
            START_TEXT,
            run_config=RunConfig(tracing_disabled=True),
            max_turns=steps + 10,
        )
    )
    if result.final_output != FINAL_TEXT or len(model.seen) != steps:
        raise RuntimeError(
            f"Agents SDK token run: {len(model.seen)} calls, {result.final_output!r}"
        )
    return list(model.seen)


def run_case(history: int, runs: int, workdir: Path) -> list[dict[str, float]]:
    """Warm-up, then `runs` measured runs, each on a fresh session preloaded with
    `history` items."""
    tool = function_tool(_noop, name_override=TOOL_NAME, description_override=TOOL_DESCRIPTION)
    agent = Agent(name="dev", instructions=SYSTEM_PROMPT, tools=[tool], model=ScriptedModel())
    run_config = RunConfig(tracing_disabled=True)
    db = workdir / "agents.sqlite"

    async def main() -> list[dict[str, float]]:
        samples = []
        for i in range(runs + 1):
            session = SQLiteSession(f"s{i}", db)
            try:
                preload = [{"role": role, "content": text} for role, text in history_texts(history)]
                if preload:
                    await session.add_items(preload)  # type: ignore[arg-type]
                t0 = time.perf_counter()
                result = await Runner.run(
                    agent, START_TEXT, session=session, run_config=run_config, max_turns=100
                )
                elapsed = time.perf_counter() - t0
            finally:
                session.close()
            if result.final_output != FINAL_TEXT:
                raise RuntimeError(f"Agents SDK run ended with {result.final_output!r}")
            if i:
                samples.append({"us_per_step": elapsed / (DEFAULT_TOOL_CALLS + 1) * 1e6})
        return samples

    return asyncio.run(main())


# ---------------------------------------------------------------------- scenario 7

if AVAILABLE:

    class LoopModel(Model):
        """Calls the tools the phase input asks for (`bench.common.loop_calls`); the time
        spent in `get_response` is the model's share of a run."""

        def __init__(self) -> None:
            self.seconds = 0.0
            self.calls = 0

        async def get_response(  # type: ignore[override]
            self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
        ) -> ModelResponse:
            t0 = time.perf_counter()
            self.calls += 1
            if isinstance(input, str):
                text = input
            else:
                text = next(
                    _get(i, "content") for i in reversed(input) if _get(i, "role") == "user"
                )
            output = [
                ResponseFunctionToolCall(
                    arguments=json.dumps(args),
                    call_id=f"call_{self.calls}_{k}",
                    name=name,
                    type="function_call",
                    id=f"fc_{self.calls}_{k}",
                    status="completed",
                )
                for k, (name, args) in enumerate(loop_calls(str(text)))
            ]
            usage = Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)
            response = ModelResponse(output=list(output), usage=usage, response_id=None)
            self.seconds += time.perf_counter() - t0
            return response

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
            raise NotImplementedError("the benchmark runs the SDK without streaming")


async def _loop_once(nodes: int, session: Any, model: Any) -> int:
    """One loop: the planner creates the items, then the doer and the checker take each
    pending one in turn; every phase is one `Runner.run` (one model call: each agent
    stops on its tool's output) on the shared session. Returns the items done."""
    todos: dict[str, str] = {}

    def todo_create(title: str) -> str:
        """Create an item."""
        item = f"n{len(todos) + 1}"
        todos[item] = "PENDING"
        return f"created {item}: {title}"

    def todo_complete(item: str) -> str:
        """Mark an item complete."""
        todos[item] = "COMPLETE"
        return f"{item} complete"

    def todo_done(item: str) -> str:
        """Mark an item done."""
        todos[item] = "DONE"
        return f"{item} done"

    def agent(name: str, tool: Any) -> Any:
        return Agent(
            name=name,
            instructions=LOOP_PROMPT,
            tools=[function_tool(tool)],
            model=model,
            tool_use_behavior="stop_on_first_tool",
        )

    planner = agent("planner", todo_create)
    doer = agent("doer", todo_complete)
    checker = agent("checker", todo_done)
    run_config = RunConfig(tracing_disabled=True)
    await Runner.run(
        planner, loop_input(LOOP_PLAN, nodes=nodes), session=session, run_config=run_config
    )
    while (item := next((k for k, v in todos.items() if v == "PENDING"), None)) is not None:
        await Runner.run(doer, loop_input(LOOP_DO, item), session=session, run_config=run_config)
        await Runner.run(
            checker, loop_input(LOOP_CHECK, item), session=session, run_config=run_config
        )
    return sum(v == "DONE" for v in todos.values())


def run_loop(nodes: int, runs: int, workdir: Path) -> list[dict[str, float]]:
    """Scenario 7: a warm-up, then `runs` loops of `nodes` items, each on a fresh
    file-backed session (every item saved durably); the framework's own time (wall minus
    `get_response`) and CPU time per item. The item list lives in the loop's Python
    state, as the SDK keeps no state but the session."""
    db = workdir / "agents-loop.sqlite"

    async def main() -> list[dict[str, float]]:
        samples = []
        for i in range(runs + 1):
            model = LoopModel()
            session = SQLiteSession(f"loop{i}", db)
            try:
                t0, cpu0 = time.perf_counter(), time.process_time()
                done = await _loop_once(nodes, session, model)
                wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            finally:
                session.close()
            if done != nodes:
                raise RuntimeError(f"Agents SDK loop: {done}/{nodes} items done")
            if i:
                samples.append(
                    {
                        "own_ms_per_node": (wall - model.seconds) / nodes * 1e3,
                        "cpu_ms_per_node": cpu / nodes * 1e3,
                    }
                )
        return samples

    return asyncio.run(main())
