"""Scenario 7's requests, recorded and timed: a check that a change to request compilation
leaves what the model sees byte-identical, and what compiling costs per request.

    PYTHONPATH=. python bench/s7_requests.py record NODES OUT.jsonl   # every request sent
    PYTHONPATH=. python bench/s7_requests.py diff A.jsonl B.jsonl     # exit 1 on a difference
    PYTHONPATH=. python bench/s7_requests.py record6 STEPS CHARS OUT  # scenario 6's instead
    PYTHONPATH=. python bench/s7_requests.py time NODES RUNS          # µs per compile_request

`record` runs one scenario-7 loop of NODES nodes and writes each request the mock
receives as one JSON line (`record6`: scenario 6's long task, whose requests are
trimmed and compacted) (ids that differ between runs — dialog ids, uuids, times — are
replaced by stable names in the order they first appear, so two runs of the same code
diff clean). Run it from each worktree (it imports the mindloop of the current
directory) and `diff` the two files. `time` wraps `LoopPolicy.compile_request` and
prints its calls and median/mean CPU microseconds over RUNS loops (after a warm-up).
"""

from __future__ import annotations

import asyncio
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench import loop_scenarios as L
from bench.scenarios import scratch_dir
from mindloop.loop.policy import LoopPolicy
from mindloop.providers.base import GenerationRequest, StreamEvent

# What differs between two runs of the same code: uuids (hex, with or without dashes),
# dialog/message ids, timestamps.
_VOLATILE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|\b[0-9a-f]{32}\b|\b[0-9a-f]{12}\b"
    r"|\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b1[6-9]\d{8}(?:\.\d+)?\b"
)


def _stable(text: str, names: dict[str, str]) -> str:
    def name(m: re.Match[str]) -> str:
        return names.setdefault(m.group(0), f"<v{len(names)}>")

    return _VOLATILE.sub(name, text)


async def _record(root: Path, nodes: int, s6: tuple[int, int] | None = None) -> list[str]:
    seen: list[str] = []
    real = L.TimedProvider.stream

    async def stream(self: Any, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        seen.append(request.model_dump_json())
        async for event in real(self, request):
            yield event

    L.TimedProvider.stream = stream  # type: ignore[method-assign]
    try:
        if s6 is None:
            await L._s7_run(root / "run", nodes)
        else:
            await L._s6_run(root / "run", *s6)
    finally:
        L.TimedProvider.stream = real  # type: ignore[method-assign]
    names: dict[str, str] = {}
    return [_stable(s, names) for s in seen]


def record(nodes: int, out: Path, s6: tuple[int, int] | None = None) -> None:
    with scratch_dir() as root:
        lines = asyncio.run(_record(root, nodes, s6))
    out.write_text("".join(line + "\n" for line in lines), "utf-8")
    print(f"{len(lines)} requests -> {out}")


def diff(a: Path, b: Path) -> int:
    la, lb = a.read_text("utf-8").splitlines(), b.read_text("utf-8").splitlines()
    bad = 0
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            bad += 1
            if bad <= 3:
                at = next(j for j, (p, q) in enumerate(zip(x, y, strict=False)) if p != q)
                print(f"request {i}: first difference at char {at}")
                print("  A:", x[max(0, at - 120) : at + 120])
                print("  B:", y[max(0, at - 120) : at + 120])
    if len(la) != len(lb):
        print(f"request counts differ: {len(la)} vs {len(lb)}")
        bad += 1
    print(f"{len(la)} vs {len(lb)} requests, {bad} differ")
    return 1 if bad else 0


def timed(nodes: int, runs: int) -> None:
    real = LoopPolicy.compile_request
    took: list[float] = []
    by_phase: dict[str, list[float]] = {}

    def compile_request(self: LoopPolicy, *args: Any, **kw: Any) -> GenerationRequest:
        t0 = time.thread_time()  # CPU of this thread: what a loaded machine hides
        try:
            return real(self, *args, **kw)
        finally:
            took.append(time.thread_time() - t0)
            by_phase.setdefault(self.phase.value, []).append(took[-1])

    LoopPolicy.compile_request = compile_request  # type: ignore[method-assign]

    async def main(root: Path) -> list[float]:
        per_run = []
        for i in range(runs + 1):
            took.clear()
            by_phase.clear()
            t0 = time.process_time()
            await L._s7_run(root / f"run{i}", nodes)
            cpu = time.process_time() - t0
            if i:
                per_run.append(sum(took) / len(took) * 1e6)
                print(
                    f"run {i}: {len(took)} requests, mean {per_run[-1]:.0f} µs, "
                    f"median {statistics.median(took) * 1e6:.0f} µs, "
                    f"{sum(took) / cpu * 100:.1f} % of CPU; by phase (n, mean µs): "
                    + ", ".join(
                        f"{p} {len(v)} {sum(v) / len(v) * 1e6:.0f}" for p, v in by_phase.items()
                    )
                )
        return per_run

    with scratch_dir() as root:
        per_run = asyncio.run(main(root))
    print(f"mean µs per compile_request over runs: median {statistics.median(per_run):.0f}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "record":
        record(int(sys.argv[2]), Path(sys.argv[3]))
    elif cmd == "record6":  # scenario 6: STEPS RESULT_CHARS OUT (compaction, trims)
        record(0, Path(sys.argv[4]), (int(sys.argv[2]), int(sys.argv[3])))
    elif cmd == "diff":
        sys.exit(diff(Path(sys.argv[2]), Path(sys.argv[3])))
    elif cmd == "time":
        timed(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(f"unknown command {cmd!r}: record, diff or time")
