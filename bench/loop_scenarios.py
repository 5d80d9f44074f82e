"""The work loop's benchmark scenarios (issue 12, "Performance"): tokens stay flat over a
long task (6) and the loop's own overhead per node (7).

Both drive a task exactly as `mindloop run TASK` does (`TaskLoop` on a `DialogRuntime`
with `LoopPolicies`, the default durable store) on the mock provider, whose script is
generated here: one entry per step, matched on the step's last input message (the phase
input `[work loop] Phase <PHASE> (entry <n>)`, or the tool result before it).

- **6, tokens.** PLAN creates one node; DO calls a tool whose result is a few hundred
  characters, step after step, then completes the node; CHECK passes it; SELF_IMPROVE
  ends the task. The script states no input usage, so the mock reports what the request
  it got really holds (characters / 4 of the system prompt and every message): the
  figure per step is the `input_tokens` of the root's `GenerationEnded`.
- **7, overhead.** PLAN creates N nodes in one step; each is done (DO, one step) and
  checked (CHECK, one step); SELF_IMPROVE ends the task. The provider is wrapped to time
  what happens inside its stream, so "the runtime's own time" is the run's wall time
  minus that; fsyncs are the store's durable commits (one fsync of the WAL each) plus
  the `os.fsync` calls of the process (the workspace's projections, written atomically).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from bench.common import (
    PROBE_DESCRIPTION,
    PROBE_TOOL,
    peak_rss_bytes,
    probe_result_text,
    token_marks,
)
from bench.scenarios import CommitCounter, scratch_dir
from mindloop.config import load_config
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.events.types import Event, GenerationEnded, PhaseEnded, PhaseStarted
from mindloop.loop.driver import LoopOutcome, LoopPolicies, TaskLoop
from mindloop.memory.budget import total_budget
from mindloop.providers.base import GenerationRequest, Provider, StreamEvent
from mindloop.providers.mock import MockProvider
from mindloop.rtws import init_rtws
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs, ToolRegistry
from mindloop.toolsets.configured import config_registry
from mindloop.workspace import repo
from mindloop.workspace.models import NodeKind, NodeStatus

TASK = "tasks/example.tsk"
MEMBER = "dev"
START_TOKENS = "work through the probes"
START_LOOP = "plan, do and check the items"
SUMMARY = "Probed the system step by step; every probe answered."
PHASE = "[work loop] Phase "
SUMMARIZE_PROMPT = "Summarise these earlier turns of your dialog"  # memory.compaction's


# ---------------------------------------------------------------------- script pieces


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _create(title: str) -> dict[str, Any]:
    return _call(
        "node_create",
        parent_id="root",
        kind="EXECUTION",
        title=title,
        requirement=f"do {title}",
        acceptance_criteria=[{"when": "done", "then": "it works", "verify": "true"}],
    )


def _end(hint: str, progress: str) -> dict[str, Any]:
    return _call(
        "phase_end", next_behavior=hint, summary={"progress": progress}, reason=f"{hint} next"
    )


def _complete(node: str) -> dict[str, Any]:
    return _call(
        "node_transition",
        node_id=node,
        to="COMPLETE",
        reason="self-check passed",
        self_check=[{"criterion": "AC1", "passed": True, "evidence": "ran it"}],
        no_artifacts_reason="a benchmark node",
    )


def _done(node: str) -> dict[str, Any]:
    return _call(
        "node_transition", node_id=node, to="DONE", reason="checked", conclusion=f"{node} works"
    )


def _entry(*calls: dict[str, Any], **when: Any) -> dict[str, Any]:
    return {"member": MEMBER, **when, "tool_calls": list(calls)}


def _tail_entries() -> list[dict[str, Any]]:
    """First in the file: the compaction's summary request and SELF_IMPROVE (their inputs
    quote earlier messages, which later entries would match)."""
    return [
        {"member": MEMBER, "contains": SUMMARIZE_PROMPT, "response": SUMMARY},
        _entry(_end("END", "the task is done"), contains=f"{PHASE}SELF_IMPROVE"),
    ]


def token_script(steps: int, result_chars: int) -> list[dict[str, Any]]:
    """Scenario 6: PLAN (step 1), then DO: `steps - 2` probe calls and one step that
    completes the node (step `steps`); then CHECK and SELF_IMPROVE (one step each)."""
    probes = steps - 2
    out = _tail_entries()
    out.append(_entry(_done("n1"), _end("END", "n1 passed"), contains=f"{PHASE}CHECK"))
    out.append(_entry(_create("Probe"), _end("DO", "one node planned"), contains=f"{PHASE}PLAN"))
    out.append(_entry(_call(PROBE_TOOL, n=1), contains=f"{PHASE}DO"))
    for i in range(1, probes):
        out.append(
            _entry(
                _call(PROBE_TOOL, n=i + 1), role="tool", match=probe_result_text(i, result_chars)
            )
        )
    out.append(
        _entry(
            _complete("n1"),
            _end("CHECK", f"{probes} probes done"),
            role="tool",
            match=probe_result_text(probes, result_chars),
        )
    )
    return out


def node_title(k: int) -> str:
    return f"Item {k:04d}"


def loop_script(nodes: int) -> list[dict[str, Any]]:
    """Scenario 7: PLAN creates `nodes` nodes in one step; DO completes node k and CHECK
    passes it, one step each; the last CHECK ends the task."""
    out = _tail_entries()
    plan = [_create(node_title(k)) for k in range(1, nodes + 1)]
    out.append(_entry(*plan, _end("DO", f"{nodes} nodes planned"), contains=f"{PHASE}PLAN"))
    for k in range(1, nodes + 1):
        node = f"# Node n{k}: {node_title(k)}"
        out.append(
            _entry(_complete(f"n{k}"), _end("CHECK", f"n{k} done"), contains=[f"{PHASE}DO", node])
        )
        hint = "END" if k == nodes else "DO"
        out.append(
            _entry(_done(f"n{k}"), _end(hint, f"n{k} passed"), contains=[f"{PHASE}CHECK", node])
        )
    return out


# ---------------------------------------------------------------------- the rtws


class ProbeArgs(ToolArgs):
    n: int


def _probe_tool(result_chars: int) -> Tool[Any]:
    async def probe(args: ProbeArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(probe_result_text(args.n, result_chars))

    return Tool(name=PROBE_TOOL, description=PROBE_DESCRIPTION, args_model=ProbeArgs, run=probe)  # type: ignore[arg-type]


def make_loop_rtws(
    root: Path,
    script: list[dict[str, Any]],
    *,
    steps: int | None = None,
    drive_steps: int | None = None,
) -> Path:
    """A fresh rtws from the public scaffold: one member `dev` with the `bench` toolset,
    the generated script, and `loop:` caps raised to let one DO entry take `steps`, and
    one run take `drive_steps` (else the default cap asks the human to go on)."""
    init_rtws(root, provider="mock")
    team: dict[str, Any] = {
        "member_defaults": {"provider": "mock", "model": "mock-model"},
        "default_responder": MEMBER,
        "members": {MEMBER: {"name": "Dev", "toolsets": ["bench"]}},
    }
    loop: dict[str, Any] = {}
    if steps is not None:
        loop["phases"] = {"do": steps}
        loop["nodes"] = {"step_budget": steps, "max_step_budget": steps}
        drive_steps = max(drive_steps or 0, steps + 10)
    if drive_steps is not None:
        loop["retries"] = {"drive_steps": drive_steps}
    if loop:
        team["loop"] = loop
    (root / ".minds" / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False), "utf-8")
    (root / ".minds" / "mock" / "mock-model.yaml").write_text(
        yaml.safe_dump({"responses": script}, sort_keys=False, allow_unicode=True), "utf-8"
    )
    return root


class TimedProvider:
    """A provider whose time inside `stream` (between the consumer asking for the next
    event and getting it) is summed: the model's share of a run."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0
        self.calls = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        events = self.inner.stream(request).__aiter__()
        while True:
            t0 = time.perf_counter()
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                self.seconds += time.perf_counter() - t0
                return
            self.seconds += time.perf_counter() - t0
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


def loop_runtime(
    rtws: Path, result_chars: int = 0
) -> tuple[DialogRuntime, LoopPolicies, TimedProvider]:
    """What `mindloop run TASK` builds, plus the `bench` toolset and the timed mock."""
    config = load_config(rtws)
    tools: ToolRegistry = config_registry(config)
    tools.add_toolset("bench", [_probe_tool(result_chars)])
    policies = LoopPolicies(config.team.work_language)
    model = TimedProvider(MockProvider("mock", rtws / ".minds" / "mock"))
    rt = DialogRuntime(
        rtws, config=config, tools=tools, policies=policies, providers={"mock": model}
    )
    return rt, policies, model


@contextmanager
def counting_fsyncs() -> Iterator[Callable[[], int]]:
    """Count `os.fsync` calls made from Python while the block runs (SQLite's own are
    counted by the store as durable commits)."""
    real = os.fsync
    count = 0

    def fsync(fd: Any) -> None:
        nonlocal count
        count += 1
        real(fd)

    os.fsync = fsync
    try:
        yield lambda: count
    finally:
        os.fsync = real


def _root_generations(rt: DialogRuntime, root: str) -> tuple[list[int], Callable[[], None]]:
    tokens: list[int] = []

    def hear(ev: Event) -> None:
        if type(ev) is GenerationEnded and ev.dialog_id == root:
            tokens.append(ev.input_tokens or 0)

    return tokens, rt.bus.subscribe(hear)


# ---------------------------------------------------------------------- scenario 6


async def _s6_run(root: Path, steps: int, result_chars: int) -> dict[str, Any]:
    rtws = make_loop_rtws(root, token_script(steps, result_chars), steps=steps)
    rt, policies, _ = loop_runtime(rtws, result_chars)
    try:
        loop = TaskLoop(rt, policies, TASK)
        tokens, unsubscribe = _root_generations(rt, loop.root)
        compactions: list[int] = []

        def hear(ev: Event) -> None:
            if ev.type == "context_compacted" and ev.dialog_id == loop.root:
                compactions.append(len(tokens) + 1)

        unhear = rt.bus.subscribe(hear)
        t0 = time.perf_counter()
        report = await loop.run(START_TOKENS)
        wall = time.perf_counter() - t0
        unsubscribe()
        unhear()
        if report.outcome is not LoopOutcome.DONE or len(tokens) < steps:
            raise RuntimeError(
                f"scenario 6 loop ended {report.outcome}: {report.reason} after "
                f"{len(tokens)} root generations (expected {steps} and more)"
            )
        memory = rt.config.team.loop.memory
        window = rt.config.model_info(MEMBER).context_length
        return {
            "tokens": tokens,
            "steps": steps,
            "wall_s": wall,
            "compactions_at": compactions,
            "budget": total_budget(memory, window),
            "system_cap": memory.system_prompt,
            "window": window,
        }
    finally:
        await rt.aclose()


def scenario6(steps: int, result_chars: int) -> dict[str, Any]:
    """Tokens stay flat: the root's input tokens at each step of a `steps`-step task."""
    with scratch_dir() as root:
        out = asyncio.run(_s6_run(root / "proj", steps, result_chars))
    marks = token_marks(steps)
    tokens = out.pop("tokens")
    out["at"] = {str(m): tokens[m - 1] for m in marks}
    work = tokens[marks[0] - 1 : steps]  # from the first mark to the task's last DO step
    out["max_from_first_mark"] = max(work)
    out["after"] = tokens[steps:]  # CHECK and SELF_IMPROVE's review entries, after the work
    out["peak_rss"] = peak_rss_bytes()
    return out


# ---------------------------------------------------------------------- scenario 7


async def _s7_run(root: Path, nodes: int) -> dict[str, float]:
    # every step in one run: PLAN, two per node, SELF_IMPROVE's entries (a batch of 40
    # messages holds about five nodes)
    rtws = make_loop_rtws(root, loop_script(nodes), drive_steps=3 * nodes + 20)
    rt, policies, model = loop_runtime(rtws)
    try:
        counter = CommitCounter(rt.store)
        loop = TaskLoop(rt, policies, TASK)
        ends: list[float] = []
        gaps: list[float] = []
        entries = 0

        def hear(ev: Event) -> None:
            nonlocal entries
            if isinstance(ev, PhaseEnded):
                ends.append(time.perf_counter())
            elif isinstance(ev, PhaseStarted):
                entries += 1
                if ends:
                    gaps.append(time.perf_counter() - ends[-1])

        steps, unsubscribe = _root_generations(rt, loop.root)
        unhear = rt.bus.subscribe(hear)
        durable0 = counter.durable
        with counting_fsyncs() as file_fsyncs:
            t0, cpu0 = time.perf_counter(), time.process_time()
            report = await loop.run(START_LOOP)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            files = file_fsyncs()
        durable = counter.durable - durable0
        unsubscribe()
        unhear()
        ws = repo.load(rt.store, TASK)
        done = [
            n
            for n in ws.nodes.values()
            if n.kind is NodeKind.EXECUTION and n.status is NodeStatus.DONE
        ]
        if report.outcome is not LoopOutcome.DONE or len(done) != nodes:
            raise RuntimeError(
                f"scenario 7 loop ended {report.outcome}: {report.reason}; "
                f"{len(done)}/{nodes} nodes DONE"
            )
        own = wall - model.seconds
        return {
            "wall_ms": wall * 1e3,
            "model_ms": model.seconds * 1e3,
            "own_ms_per_node": own / nodes * 1e3,
            "own_us_per_step": own / len(steps) * 1e6,
            # CPU time of the process (the model's included): what a loaded machine's
            # wall time hides
            "cpu_ms_per_node": cpu / nodes * 1e3,
            "transition_ms": statistics.median(gaps) * 1e3,
            "phase_entries": float(entries),
            "steps": float(len(steps)),
            "fsyncs_per_node": (durable + files) / nodes,
            "commits_per_node": durable / nodes,
            "file_fsyncs_per_node": files / nodes,
        }
    finally:
        await rt.aclose()


def scenario7(nodes: int, runs: int) -> dict[str, Any]:
    """Loop overhead: a warm-up, then `runs` loops of `nodes` nodes, each on a fresh rtws."""

    async def main(root: Path) -> list[dict[str, float]]:
        out = []
        for i in range(runs + 1):
            sample = await _s7_run(root / f"run{i}", nodes)
            if i:
                out.append(sample)
        return out

    with scratch_dir() as root:
        samples = asyncio.run(main(root))
    return {
        "samples": {key: [s[key] for s in samples] for key in samples[0]},
        "peak_rss": peak_rss_bytes(),
    }
