"""Scenarios 1 and 6 on LangGraph: `create_react_agent` with its SQLite checkpointer, and
the same agent's input tokens over a long run (scenario 6, full history: its normal
behaviour); scenario 7 as a `StateGraph` plan → do ⇄ check loop on the same checkpointer.

The graph checkpoints after every super-step (`durability="sync"`: the checkpoint is
written before the next step starts) to a file database in WAL mode with
synchronous=FULL, the same durability mindloop's store uses. The model is a zero-latency
`BaseChatModel` that calls the tool until it has seen 20 results after the last human
message, then answers. In scenario 6 it calls the probe tool instead and records the size
of every request it is given (characters / 4, as the mock provider estimates mindloop's).
"""

from __future__ import annotations

import sqlite3
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

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
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import create_react_agent
    from pydantic import Field

    AVAILABLE = True
except ImportError:  # the bench extra is not installed
    AVAILABLE = False

NAME = "LangGraph"
SYSTEM_PROMPT = "You are Dev."


if AVAILABLE:

    class ScriptedChatModel(BaseChatModel):
        """Calls the tool `calls` times after the last human message, then answers."""

        calls: int = DEFAULT_TOOL_CALLS
        tool: str = TOOL_NAME
        seen: list[int] = Field(default_factory=list)  # scenario 6: input tokens per request

        @property
        def _llm_type(self) -> str:
            return "bench-scripted"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
            return self

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> ChatResult:
            self.seen.append(estimate_tokens(sum(_chars(m.content) for m in messages)))
            done = 0
            for message in reversed(messages):
                if isinstance(message, HumanMessage):
                    break
                if isinstance(message, ToolMessage):
                    done += 1
            if done < self.calls:
                n = done + 1
                reply = AIMessage(
                    content="",
                    tool_calls=[{"name": self.tool, "args": {"n": n}, "id": f"call_{n}"}],
                    usage_metadata={"input_tokens": 100, "output_tokens": 10, "total_tokens": 110},
                )
            else:
                reply = AIMessage(
                    content=FINAL_TEXT,
                    usage_metadata={"input_tokens": 100, "output_tokens": 10, "total_tokens": 110},
                )
            return ChatResult(generations=[ChatGeneration(message=reply)])


def _noop(n: int) -> str:
    return tool_result_text(n)


def _chars(content: Any) -> int:
    """Characters of a message's content (a string, or a list of text parts)."""
    if isinstance(content, str):
        return len(content)
    return sum(len(p.get("text", "")) if isinstance(p, dict) else len(str(p)) for p in content)


def run_tokens(steps: int, result_chars: int = DEFAULT_RESULT_CHARS) -> list[int]:
    """Scenario 6: one run of `steps` model calls (`steps - 1` probe calls, then the
    answer) with the whole history in every request; the input tokens of each call."""

    def probe(n: int) -> str:
        return probe_result_text(n, result_chars)

    tool = StructuredTool.from_function(probe, name=PROBE_TOOL, description=PROBE_DESCRIPTION)
    model = ScriptedChatModel(calls=steps - 1, tool=PROBE_TOOL, seen=[])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is marked as moving to langchain
        graph = create_react_agent(model, [tool], prompt=SYSTEM_PROMPT)
    out = graph.invoke(
        {"messages": [HumanMessage(content=START_TEXT)]}, {"recursion_limit": 2 * steps + 10}
    )
    if out["messages"][-1].content != FINAL_TEXT or len(model.seen) != steps:
        raise RuntimeError(f"LangGraph token run: {len(model.seen)} calls, {out['messages'][-1]!r}")
    return list(model.seen)


def run_case(history: int, runs: int, workdir: Path) -> list[dict[str, float]]:
    """Warm-up, then `runs` measured invocations, each on a fresh thread whose state was
    preloaded with `history` messages through the checkpointer."""
    tool = StructuredTool.from_function(_noop, name=TOOL_NAME, description=TOOL_DESCRIPTION)
    conn = sqlite3.connect(str(workdir / "langgraph.sqlite"), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    conn.execute("PRAGMA synchronous=FULL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is marked as moving to langchain
        graph = create_react_agent(ScriptedChatModel(), [tool], checkpointer=saver)
    samples = []
    try:
        for i in range(runs + 1):
            config: Any = {"configurable": {"thread_id": f"t{i}"}, "recursion_limit": 200}
            preload = [
                HumanMessage(content=text) if role == "user" else AIMessage(content=text)
                for role, text in history_texts(history)
            ]
            if preload:
                graph.update_state(config, {"messages": preload}, as_node="agent")
            t0 = time.perf_counter()
            out = graph.invoke(
                {"messages": [HumanMessage(content=START_TEXT)]}, config, durability="sync"
            )
            elapsed = time.perf_counter() - t0
            last = out["messages"][-1]
            if last.content != FINAL_TEXT:
                raise RuntimeError(f"LangGraph run ended with {last!r}")
            steps = DEFAULT_TOOL_CALLS + 1
            if i:
                samples.append({"us_per_step": elapsed / steps * 1e6})
    finally:
        conn.close()
    return samples


# ---------------------------------------------------------------------- scenario 7

if AVAILABLE:

    class LoopChatModel(ScriptedChatModel):
        """Calls the tools the phase input asks for (`bench.common.loop_calls`); the time
        spent in `_generate` is the model's share of a run."""

        seconds: float = 0.0

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> ChatResult:
            t0 = time.perf_counter()
            text = next(m.content for m in reversed(messages) if isinstance(m, HumanMessage))
            start = sum(isinstance(m, AIMessage) for m in messages)
            calls = [
                {"name": name, "args": args, "id": f"call_{start}_{i}"}
                for i, (name, args) in enumerate(loop_calls(str(text)))
            ]
            reply = AIMessage(
                content="",
                tool_calls=calls,
                usage_metadata={"input_tokens": 100, "output_tokens": 10, "total_tokens": 110},
            )
            result = ChatResult(generations=[ChatGeneration(message=reply)])
            self.seconds += time.perf_counter() - t0
            return result

    class LoopState(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]
        todos: dict[str, str]  # item id → PENDING | COMPLETE | DONE
        current: str | None
        nodes: int


def _loop_graph(model: Any, saver: Any) -> Any:
    """PLAN creates the items; DO completes the next pending one; CHECK passes it; the
    router goes back to DO while an item is pending. Each phase is one model call whose
    tool calls run through the tools (validated, as a ToolNode would) and update the
    state the checkpointer saves."""

    def todo_create(title: str) -> str:
        return f"created {title}"

    def todo_complete(item: str) -> str:
        return f"{item} complete"

    def todo_done(item: str) -> str:
        return f"{item} done"

    tools = {
        f.__name__: StructuredTool.from_function(f, description=f.__name__.replace("_", " "))
        for f in (todo_create, todo_complete, todo_done)
    }

    def call(state: LoopState, text: str) -> tuple[list[AnyMessage], dict[str, str]]:
        human = HumanMessage(content=text)
        ai = model.invoke([SystemMessage(content=LOOP_PROMPT), *state["messages"], human])
        todos = dict(state["todos"])
        out: list[AnyMessage] = [human, ai]
        for c in ai.tool_calls:
            out.append(tools[c["name"]].invoke({**c, "type": "tool_call"}))
            if c["name"] == "todo_create":
                todos[f"n{len(todos) + 1}"] = "PENDING"
            else:
                todos[c["args"]["item"]] = "COMPLETE" if c["name"] == "todo_complete" else "DONE"
        return out, todos

    def plan(state: LoopState) -> dict[str, Any]:
        msgs, todos = call(state, loop_input(LOOP_PLAN, nodes=state["nodes"]))
        return {"messages": msgs, "todos": todos}

    def do(state: LoopState) -> dict[str, Any]:
        item = next(k for k, v in state["todos"].items() if v == "PENDING")
        msgs, todos = call(state, loop_input(LOOP_DO, item))
        return {"messages": msgs, "todos": todos, "current": item}

    def check(state: LoopState) -> dict[str, Any]:
        msgs, todos = call(state, loop_input(LOOP_CHECK, state["current"]))
        return {"messages": msgs, "todos": todos}

    def route(state: LoopState) -> str:
        return "do" if any(v == "PENDING" for v in state["todos"].values()) else END

    g = StateGraph(LoopState)
    g.add_node("plan", plan)
    g.add_node("do", do)
    g.add_node("check", check)
    g.add_edge(START, "plan")
    g.add_edge("plan", "do")
    g.add_edge("do", "check")
    g.add_conditional_edges("check", route, ["do", END])
    return g.compile(checkpointer=saver)


def run_loop(nodes: int, runs: int, workdir: Path) -> list[dict[str, float]]:
    """Scenario 7: a warm-up, then `runs` loops of `nodes` items, each on a fresh thread,
    checkpointed after every phase (`durability="sync"`, synchronous=FULL); the
    framework's own time (wall minus `_generate`) and CPU time per item."""
    conn = sqlite3.connect(str(workdir / "langgraph-loop.sqlite"), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    conn.execute("PRAGMA synchronous=FULL")
    samples = []
    try:
        for i in range(runs + 1):
            model = LoopChatModel()
            graph = _loop_graph(model, saver)
            config: Any = {
                "configurable": {"thread_id": f"loop{i}"},
                "recursion_limit": 3 * nodes + 10,
            }
            t0, cpu0 = time.perf_counter(), time.process_time()
            out = graph.invoke(
                {"messages": [], "todos": {}, "current": None, "nodes": nodes},
                config,
                durability="sync",
            )
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            done = [k for k, v in out["todos"].items() if v == "DONE"]
            if len(done) != nodes:
                raise RuntimeError(f"LangGraph loop: {len(done)}/{nodes} items done")
            if i:
                samples.append(
                    {
                        "own_ms_per_node": (wall - model.seconds) / nodes * 1e3,
                        "cpu_ms_per_node": cpu / nodes * 1e3,
                    }
                )
    finally:
        conn.close()
    return samples
