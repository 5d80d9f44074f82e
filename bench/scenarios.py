"""mindloop's benchmark scenarios, driven through the runtime's public path.

Everything here goes through what `mindloop chat`/`run` use: `DialogRuntime` with its
default durable store (`Store.for_rtws`, SQLite WAL, synchronous=FULL), its context
assembly and event bus, and `Scheduler` to drive. The model is the `mock` provider with
a script whose entries all state `usage`, so the "model" costs next to nothing and what
is measured is the runtime. The one trivial tool is passed as the runtime's tool registry
(`DialogRuntime(rtws, tools=...)`), which is the public way to give a team its tools.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common import (
    DEFAULT_TOOL_CALLS,
    FINAL_TEXT,
    START_TEXT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    history_texts,
    peak_rss_bytes,
    tool_result_text,
)
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.events.types import Event
from mindloop.rtws import init_rtws
from mindloop.store import MessageRecord, Store
from mindloop.store.store import StoreStats
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs, ToolRegistry

TASK = "tasks/example.tsk"
USAGE = {"input_tokens": 100, "output_tokens": 10}
FAN_OUT_TEXT = "fan out"
FBR_TEXT = "think fresh"
FAN_OUT_REPLY = "done"
FBR_REPLY = "An idea."
REVIVED_TEXT = "All replies are in."


# ---------------------------------------------------------------------- the rtws


class NoopArgs(ToolArgs):
    n: int


async def _noop(args: NoopArgs, ctx: ToolContext) -> ToolOutput:
    return ToolOutput(tool_result_text(args.n))


def bench_registry() -> ToolRegistry:
    """A registry with one toolset `bench` holding the trivial tool."""
    reg = ToolRegistry()
    reg.add_toolset(
        "bench",
        [Tool(name=TOOL_NAME, description=TOOL_DESCRIPTION, args_model=NoopArgs, run=_noop)],  # type: ignore[arg-type]
    )
    return reg


def chain_entries(member: str, calls: int = DEFAULT_TOOL_CALLS) -> list[dict[str, Any]]:
    """Script entries for the tool chain: `go` (or `go <k>`, starting the chain at call
    k) → noop(k); `ok <i>` → noop(i+1); `ok <calls>` → the final answer."""

    def call(n: int) -> list[dict[str, Any]]:
        return [{"name": TOOL_NAME, "arguments": {"n": n}}]

    entries: list[dict[str, Any]] = [
        {"member": member, "match": START_TEXT, "tool_calls": call(1), "usage": USAGE}
    ]
    entries += [
        {"member": member, "match": f"{START_TEXT} {k}", "tool_calls": call(k), "usage": USAGE}
        for k in range(2, calls + 1)
    ]
    entries += [
        {
            "member": member,
            "role": "tool",
            "match": tool_result_text(i),
            "tool_calls": call(i + 1),
            "usage": USAGE,
        }
        for i in range(1, calls)
    ]
    entries.append(
        {
            "member": member,
            "role": "tool",
            "match": tool_result_text(calls),
            "response": FINAL_TEXT,
            "usage": USAGE,
        }
    )
    return entries


def chain_start(steps: int, calls: int = DEFAULT_TOOL_CALLS) -> str:
    """The user message that makes a dialog take exactly `steps` generations."""
    first = calls - steps + 2
    return START_TEXT if first <= 1 else f"{START_TEXT} {first}"


def fan_out_entries(width: int) -> list[dict[str, Any]]:
    tellasks = "\n\n".join(f"!?@worker job {i}: report back" for i in range(1, width + 1))
    return [
        {"member": "dev", "match": FAN_OUT_TEXT, "response": tellasks + "\n", "usage": USAGE},
        {
            "member": "dev",
            "match": FBR_TEXT,
            "response": "!?@self weigh the two designs\n!?Compare A and B; recommend one.\n",
            "usage": USAGE,
        },
        {
            "member": "dev",
            "contains": "Fresh Boots Reasoning (FBR) request",
            "response": FBR_REPLY,
            "usage": USAGE,
        },
        {
            "member": "dev",
            "contains": "provided response",
            "response": REVIVED_TEXT,
            "usage": USAGE,
        },
        {
            "member": "dev",
            "contains": "FBR @self sideline response",
            "response": REVIVED_TEXT,
            "usage": USAGE,
        },
        {"member": "worker", "response": FAN_OUT_REPLY, "usage": USAGE},
    ]


def make_rtws(root: Path, *, fbr_effort: int = 3, fan_out_width: int = 100) -> Path:
    """A fresh rtws from the public scaffold, with the bench team and mock script."""
    init_rtws(root, provider="mock")
    team = {
        "member_defaults": {"provider": "mock", "model": "mock-model"},
        "default_responder": "dev",
        "members": {
            "dev": {"name": "Dev", "toolsets": ["bench"], "fbr-effort": fbr_effort},
            "worker": {"name": "Worker", "toolsets": ["bench"]},
        },
    }
    (root / ".minds" / "team.yaml").write_text(yaml.safe_dump(team, sort_keys=False), "utf-8")
    script = {"responses": chain_entries("dev") + fan_out_entries(fan_out_width)}
    (root / ".minds" / "mock" / "mock-model.yaml").write_text(
        yaml.safe_dump(script, sort_keys=False, allow_unicode=True), "utf-8"
    )
    return root


@contextmanager
def scratch_dir() -> Any:
    path = Path(tempfile.mkdtemp(prefix="mindloop-bench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------- instruments


class CommitCounter:
    """The store's own counts: commits that changed rows, durable (one fsync of the WAL
    each, synchronous=FULL) or lazy (no fsync of their own: synchronous=NORMAL for that
    transaction, made durable by the next fsync), and statements run. Counts of every
    store this process opened are summed in `PROCESS` (cross-checked against strace)."""

    def __init__(self, store: Store) -> None:
        self.stats = store.stats
        PROCESS.append(store.stats)

    @property
    def durable(self) -> int:
        return self.stats.durable_commits

    @property
    def lazy(self) -> int:
        return self.stats.lazy_commits

    def snapshot(self) -> tuple[int, int]:
        return self.stats.durable_commits, self.stats.statements


PROCESS: list[StoreStats] = []


def process_durable_commits() -> int:
    return sum(s.durable_commits for s in PROCESS)


@dataclass
class StepClock:
    """Timestamps of the bus events the figures are measured between."""

    dialog_id: str | None = None
    drive_start: float = 0.0  # the drive has its history in memory and starts stepping
    gen_starts: list[float] = field(default_factory=list)
    commits_at_gen: list[int] = field(default_factory=list)
    statements_at_gen: list[int] = field(default_factory=list)
    first_gen_end: float = 0.0
    counter: CommitCounter | None = None

    def listener(self, ev: Event) -> None:
        if ev.dialog_id != self.dialog_id:
            return
        if ev.type == "drive_start" and not self.drive_start:
            self.drive_start = time.perf_counter()
        elif ev.type == "generation_start":
            self.gen_starts.append(time.perf_counter())
            if self.counter is not None:
                durable, statements = self.counter.snapshot()
                self.commits_at_gen.append(durable)
                self.statements_at_gen.append(statements)
        elif ev.type == "generation_end" and not self.first_gen_end:
            self.first_gen_end = time.perf_counter()


def _preload(rt: DialogRuntime, dialog_id: str, count: int) -> None:
    recs = [
        MessageRecord(dialog_id=dialog_id, kind=role, data={"text": text})  # type: ignore[arg-type]
        for role, text in history_texts(count)
    ]
    if recs:
        rt.store.append_messages(recs)


# ---------------------------------------------------------------------- scenario 1


async def _s1_run(rt: DialogRuntime, counter: CommitCounter, history: int) -> dict[str, float]:
    rec = rt.create_root_dialog(TASK, "dev")
    _preload(rt, rec.id, history)
    clock = StepClock(dialog_id=rec.id, counter=counter)
    unsubscribe = rt.bus.subscribe(clock.listener)
    durable0, statements0 = counter.snapshot()
    lazy0 = counter.lazy
    t0 = time.perf_counter()
    rt.post_user_message(rec.id, START_TEXT)
    results = await Scheduler(rt).run()
    t1 = time.perf_counter()
    durable1, statements1 = counter.snapshot()
    lazy1 = counter.lazy
    unsubscribe()
    (result,) = results
    if result.reason != "done" or result.final_text != FINAL_TEXT:
        raise RuntimeError(f"scenario 1 drive ended {result.reason}: {result.error}")
    steps = result.steps
    gaps = [b - a for a, b in zip(clock.gen_starts, clock.gen_starts[1:], strict=False)]
    step_commits = [
        b - a for a, b in zip(clock.commits_at_gen, clock.commits_at_gen[1:], strict=False)
    ]
    step_statements = [
        b - a for a, b in zip(clock.statements_at_gen, clock.statements_at_gen[1:], strict=False)
    ]
    return {
        "step_us": (t1 - clock.drive_start) / steps * 1e6,
        "us_per_step": (t1 - t0) / steps * 1e6,
        "load_ms": (clock.drive_start - t0) * 1e3,
        "steady_us_per_step": sum(gaps) / len(gaps) * 1e6,
        "commits_per_step": (durable1 - durable0) / steps,
        "lazy_commits_per_step": (lazy1 - lazy0) / steps,
        "max_commits_in_a_step": float(max(step_commits)),
        "statements_per_step": sum(step_statements) / len(step_statements),
        "commits_per_drive": float(durable1 - durable0),
        "statements_per_drive": float(statements1 - statements0),
        "steps": float(steps),
    }


def scenario1(histories: list[int], runs: int) -> dict[str, Any]:
    """Per-step overhead: 20 tool calls then an answer, on each preloaded history size
    (a fresh rtws and runtime per size; a warm-up drive before the measured ones)."""

    async def main(root: Path, history: int, durable: bool = True) -> list[dict[str, float]]:
        rtws = make_rtws(root / "proj")
        rt = DialogRuntime(rtws, tools=bench_registry(), durable=durable)
        counter = CommitCounter(rt.store)
        try:
            await _s1_run(rt, counter, history)  # warm-up
            return [await _s1_run(rt, counter, history) for _ in range(runs)]
        finally:
            await rt.aclose()

    by_history = {}
    commit_us = []
    for history in histories:
        with scratch_dir() as root:
            by_history[str(history)] = _columns(asyncio.run(main(root, history)))
            commit_us.append(durable_commit_us(root))
    # The middle size once more without any fsync (synchronous=NORMAL throughout): what
    # the runtime itself costs per step, apart from the disk.
    middle = histories[len(histories) // 2]
    with scratch_dir() as root:
        no_fsync = _columns(asyncio.run(main(root, middle, durable=False)))["step_us"]
    return {
        "by_history": by_history,
        "commit_us": commit_us,
        "help_ms": cli_help_ms(runs),
        "no_fsync": {"history": middle, "step_us": no_fsync},
        "peak_rss": peak_rss_bytes(),
    }


def cli_help_ms(runs: int) -> list[float]:
    """What `mindloop --help` takes in a new process (the interpreter's start and the CLI's
    imports: the engine, the store and the SDKs are kept out of it), once per run."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "mindloop.cli.app", "--help"],
            check=True,
            capture_output=True,
            cwd=Path(__file__).resolve().parents[1],  # this repository's mindloop
        )
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def durable_commit_us(directory: Path, commits: int = 300) -> float:
    """What one durable SQLite commit costs on this disk, measured beside the scenario:
    the median of `commits` one-row inserts, each its own transaction, in WAL mode with
    synchronous=FULL (one fsync of the WAL each) — the floor under a durable step."""
    con = sqlite3.connect(directory / "calibrate.sqlite", isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        times = []
        for i in range(commits):
            t0 = time.perf_counter()
            con.execute("BEGIN IMMEDIATE")
            con.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}",))
            con.execute("COMMIT")
            times.append(time.perf_counter() - t0)
    finally:
        con.close()
    return statistics.median(times) * 1e6


# ---------------------------------------------------------------------- scenario 2


async def _s2_run(root: Path, variant: str, width: int) -> dict[str, float]:
    rtws = make_rtws(root, fbr_effort=width if variant == "fbr" else 3, fan_out_width=width)
    rt = DialogRuntime(rtws, tools=bench_registry())
    try:
        rec = rt.create_root_dialog(TASK, "dev")
        clock = StepClock(dialog_id=rec.id)
        rt.bus.subscribe(clock.listener)
        t0 = time.perf_counter()
        rt.post_user_message(rec.id, FAN_OUT_TEXT if variant == "tellask" else FBR_TEXT)
        results = await Scheduler(rt).run()
        t1 = time.perf_counter()
        sides = [d for d in rt.store.list_dialogs(root_id=rec.id) if d.kind != "root"]
        final = rt.store.load_history(rec.id)[-1].data.get("text")
        if len(sides) != width or final != REVIVED_TEXT or len(clock.gen_starts) != 2:
            raise RuntimeError(
                f"fan-out ({variant}) went wrong: {len(sides)} side dialogs, last answer "
                f"{final!r}, {len(clock.gen_starts)} root generations; results {results[-3:]}"
            )
        revived = clock.gen_starts[1]
        return {
            "revive_ms": (revived - t0) * 1e3,
            "fan_out_ms": (revived - clock.first_gen_end) * 1e3,
            "total_ms": (t1 - t0) * 1e3,
        }
    finally:
        await rt.aclose()


def scenario2(variant: str, width: int, runs: int) -> dict[str, Any]:
    """Fan-out: one message starts `width` side dialogs (tellasks, or `!?@self` FBR)."""

    async def main(root: Path) -> list[dict[str, float]]:
        out = []
        for i in range(runs + 1):  # the first run is the warm-up
            sample = await _s2_run(root / f"run{i}", variant, width)
            if i:
                out.append(sample)
        return out

    with scratch_dir() as root:
        samples = asyncio.run(main(root))
    return {"samples": _columns(samples), "peak_rss": peak_rss_bytes()}


# ---------------------------------------------------------------------- scenario 3


async def _s3_run(root: Path, dialogs: int, steps: int) -> dict[str, float]:
    rt = DialogRuntime(make_rtws(root), tools=bench_registry())
    try:
        start = chain_start(steps)
        ids = []
        for _ in range(dialogs):
            rec = rt.create_root_dialog(TASK, "dev")
            rt.post_user_message(rec.id, start)
            ids.append(rec.id)
        t0 = time.perf_counter()
        results = await Scheduler(rt).run()
        t1 = time.perf_counter()
        done = [r for r in results if r.reason == "done" and r.final_text == FINAL_TEXT]
        total_steps = sum(r.steps for r in results)
        if len(done) != dialogs or total_steps != dialogs * steps:
            bad = [r for r in results if r.reason != "done"][:3]
            raise RuntimeError(
                f"many dialogs: {len(done)}/{dialogs} done, {total_steps} steps; e.g. {bad}"
            )
        wall = t1 - t0
        return {"wall_s": wall, "steps_per_s": total_steps / wall}
    finally:
        await rt.aclose()


def scenario3(dialogs: int, steps: int, runs: int) -> dict[str, Any]:
    """Many dialogs: `dialogs` roots of `steps` generations each, driven concurrently."""

    async def main(root: Path) -> list[dict[str, float]]:
        out = []
        for i in range(runs + 1):
            sample = await _s3_run(root / f"run{i}", dialogs, steps)
            if i:
                out.append(sample)
            shutil.rmtree(root / f"run{i}", ignore_errors=True)
        return out

    with scratch_dir() as root:
        samples = asyncio.run(main(root))
    return {"samples": _columns(samples), "peak_rss": peak_rss_bytes()}


# ---------------------------------------------------------------------- scenario 5


async def _s5_run(root: Path, dialogs: int, wave: int = 100) -> dict[str, float]:
    """One watching scheduler (what `mindloop run --watch` runs) is fed `dialogs` short
    root dialogs (one tool step and an answer each), `wave` at a time."""
    rt = DialogRuntime(make_rtws(root), tools=bench_registry())
    sched = Scheduler(rt)
    start = chain_start(2)
    try:
        t0 = time.perf_counter()
        task = asyncio.create_task(
            sched.run(watch=True, poll_interval=0.05, stop=lambda: sched.drives >= dialogs)
        )
        fed = 0
        while fed < dialogs:
            for _ in range(min(wave, dialogs - fed)):
                rt.start_root_dialog(TASK, start, "dev")
                fed += 1
            while sched.drives < fed and not task.done():
                await asyncio.sleep(0.005)
        await task
        wall = time.perf_counter() - t0
        return {
            "wall_s": wall,
            "live_views": float(len(rt.live)),
            "kept": float(len(sched.results)),
        }
    finally:
        await rt.aclose()


def scenario5(dialogs: int) -> dict[str, Any]:
    """Memory of a long watch: peak RSS of a process that drove `dialogs` dialogs."""
    with scratch_dir() as root:
        sample = asyncio.run(_s5_run(root, dialogs))
    return {"samples": _columns([sample]), "peak_rss": peak_rss_bytes()}


def _columns(samples: list[dict[str, float]]) -> dict[str, list[float]]:
    return {key: [s[key] for s in samples] for key in samples[0]}
