"""mindloop's performance benchmark: runtime overhead per step, fan-out, many dialogs, the
same per-step scenario on LangGraph and the OpenAI Agents SDK, a watching process, and the
work loop: input tokens over a long task beside the peers' (6) and the loop's own overhead
per node (7).

    python bench/run.py [--runs 5] [--quick] [--scenario 1,2,3,4,5,6,7] [--json out.json]
                        [--strace] [--token-steps 1000] [--loop-nodes 50] [--result-chars 400]
    python bench/run.py --postgres [--latency-ms 50] [--runs 5] [--quick]

`--postgres` measures scale-out instead (`bench/postgres.py`): the per-step overhead on
PostgreSQL beside SQLite's, and scenario 3 on 1, 2 and 3 `mindloop worker` processes
with a simulated model latency, on a PostgreSQL server the bench starts on 127.0.0.1.

Each scenario runs in its own subprocess (so its peak RSS is its own), does a warm-up,
then `--runs` measured runs; the table shows medians with min–max. `--quick` uses tiny
CI sizes (the smoke test runs it); targets are only judged at the full sizes. The work
loop's sizes can be set on their own (`--token-steps`, `--loop-nodes`) for a quick check;
scenarios 6 and 7 print their goal's PASS/FAIL at any size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import DEFAULT_RESULT_CHARS  # noqa: E402 (after the path is set)

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class Sizes:
    histories: tuple[int, ...]
    fan_out: int
    dialogs: int
    dialog_steps: int
    watched: tuple[int, int]  # scenario 5: dialogs a watching process drives (few, many)
    pg_dialogs: int  # --postgres: scenario 3 on workers, roots per round …
    pg_steps: int  # … steps each
    pg_concurrency: int  # … drives at once on each worker
    token_steps: int  # scenario 6: root steps of the task
    result_chars: int  # scenario 6: characters of each tool result
    loop_nodes: int  # scenario 7: nodes planned, done and checked


FULL = Sizes(
    histories=(10, 200, 2000),
    fan_out=100,
    dialogs=1000,
    dialog_steps=10,
    watched=(100, 10_000),
    token_steps=1000,
    result_chars=DEFAULT_RESULT_CHARS,
    loop_nodes=50,
    pg_dialogs=200,
    pg_steps=10,
    pg_concurrency=5,
)
QUICK = Sizes(
    histories=(10, 20, 40),
    fan_out=5,
    dialogs=10,
    dialog_steps=3,
    watched=(5, 50),
    token_steps=30,
    result_chars=DEFAULT_RESULT_CHARS,
    loop_nodes=4,
    pg_dialogs=6,
    pg_steps=3,
    pg_concurrency=2,
)
WORKER_COUNTS = (1, 2, 3)
PEERS = {"langgraph": "bench.peers_langgraph", "agents": "bench.peers_agents_sdk"}
TOKEN_GROWTH = 1.2  # scenario 6's goal: every step's input ≤ 1.2 × step 10's
NODE_MS = 2.0  # scenario 7's goal: the runtime's own time per node
NOT_INSTALLED = "not installed (pip install -e .[bench])"


# ---------------------------------------------------------------------- worker side


def worker(
    case: str, runs: int, sizes: Sizes, count_all_commits: bool, latency_ms: float = 50.0
) -> dict[str, Any]:
    """Run one case in this process and return its raw samples."""
    import importlib

    from bench import loop_scenarios, scenarios
    from bench.common import peak_rss_bytes

    if case.startswith("pg-"):
        from bench import postgres

        middle = sizes.histories[len(sizes.histories) // 2]
        if case in ("pg-s1-sqlite", "pg-s1-postgres"):
            return postgres.per_step(middle, runs, on_postgres=case.endswith("postgres"))
        n = int(case.removeprefix("pg-w"))
        return postgres.on_workers(
            n, sizes.pg_dialogs, sizes.pg_steps, sizes.pg_concurrency, latency_ms / 1e3, runs
        )
    if case == "s1":
        out = scenarios.scenario1(list(sizes.histories), runs)
    elif case in ("s2-tellask", "s2-fbr"):
        out = scenarios.scenario2(case.removeprefix("s2-"), sizes.fan_out, runs)
    elif case == "s3":
        out = scenarios.scenario3(sizes.dialogs, sizes.dialog_steps, runs)
    elif case.startswith("s5-"):
        out = scenarios.scenario5(int(case.removeprefix("s5-")))
    elif case == "s6":
        out = loop_scenarios.scenario6(sizes.token_steps, sizes.result_chars)
    elif case.startswith("s6-"):
        peer = importlib.import_module(PEERS[case.removeprefix("s6-")])
        if not peer.AVAILABLE:
            return {"installed": False, "name": peer.NAME}
        tokens = peer.run_tokens(sizes.token_steps, sizes.result_chars)
        out = {"installed": True, "name": peer.NAME, "tokens": tokens}
    elif case == "s7":
        out = loop_scenarios.scenario7(sizes.loop_nodes, runs)
    elif case.startswith("s7-"):
        peer = importlib.import_module(PEERS[case.removeprefix("s7-")])
        if not peer.AVAILABLE:
            return {"installed": False, "name": peer.NAME}
        with tempfile.TemporaryDirectory(prefix="mindloop-bench-peer-") as tmp:
            samples = peer.run_loop(sizes.loop_nodes, runs, Path(tmp))
        out = {"installed": True, "name": peer.NAME}
        out["samples"] = {key: [s[key] for s in samples] for key in samples[0]}
        out["peak_rss"] = peak_rss_bytes()
    elif case.startswith("s4-"):
        peer = importlib.import_module(PEERS[case.removeprefix("s4-")])
        if not peer.AVAILABLE:
            return {"installed": False, "name": peer.NAME}
        by_history = {}
        for history in sizes.histories:
            with tempfile.TemporaryDirectory(prefix="mindloop-bench-peer-") as tmp:
                samples = peer.run_case(history, runs, Path(tmp))
            by_history[str(history)] = {"us_per_step": [s["us_per_step"] for s in samples]}
        out = {"installed": True, "name": peer.NAME, "by_history": by_history}
        out["peak_rss"] = peak_rss_bytes()
    else:
        raise SystemExit(f"unknown case {case!r}")
    if count_all_commits:
        out["process_durable_commits"] = scenarios.process_durable_commits()
    return out


# ---------------------------------------------------------------------- parent side


def _strace_available() -> bool:
    return shutil.which("strace") is not None


def run_case(case: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        case,
        "--runs",
        str(args.runs),
    ]
    if args.quick:
        cmd.append("--quick")
    cmd += ["--latency-ms", str(args.latency_ms)]
    for flag in ("token_steps", "loop_nodes", "result_chars"):
        value = getattr(args, flag)
        if value is not None:
            cmd += [f"--{flag.replace('_', '-')}", str(value)]
    trace_file = None
    if args.strace and case in ("s1", "s7"):
        cmd.append("--count-all-commits")
        trace_file = Path(tempfile.mkstemp(prefix="mindloop-bench-strace-")[1])
        cmd = ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(trace_file), *cmd]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"benchmark case {case} failed (exit {proc.returncode})")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["case_wall_s"] = time.perf_counter() - started
    if trace_file is not None:
        out["strace_fsyncs"] = _strace_syncs(trace_file.read_text())
        trace_file.unlink()
    return out


def _strace_syncs(summary: str) -> int:
    """Sum the `calls` column of fsync/fdatasync rows of an `strace -c` summary."""
    total = 0
    for line in summary.splitlines():
        parts = line.split()
        if parts and parts[-1] in ("fsync", "fdatasync"):
            numbers = [p for p in parts[:-1] if re.fullmatch(r"[\d.]+", p)]
            if len(numbers) >= 4:
                total += int(numbers[3])
    return total


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def collect(args: argparse.Namespace) -> dict[str, Any]:
    if args.postgres:
        return collect_postgres(args)
    selected = {int(s) for s in args.scenario.split(",") if s.strip()}
    cases = []
    if 1 in selected or 4 in selected:
        cases.append("s1")  # scenario 4's ratios use this same run's mindloop figures
    if 2 in selected:
        cases += ["s2-tellask", "s2-fbr"]
    if 3 in selected:
        cases.append("s3")
    if 4 in selected:
        cases += ["s4-langgraph", "s4-agents"]
    if 5 in selected:
        sizes = QUICK if args.quick else FULL
        cases += [f"s5-{n}" for n in sizes.watched]
    if 6 in selected:
        cases += ["s6", "s6-langgraph", "s6-agents"]
    if 7 in selected:
        cases += ["s7", "s7-langgraph", "s7-agents"]
    raw = {}
    for case in cases:
        print(f"running {case} …", file=sys.stderr, flush=True)
        raw[case] = run_case(case, args)
    return {"raw": raw, "selected": sorted(selected)}


def collect_postgres(args: argparse.Namespace) -> dict[str, Any]:
    """The scale-out cases, on one PostgreSQL server started here (each case makes a
    database of its own on it)."""
    from bench.postgres import PG_URL_ENV
    from mindloop.testing.postgres import PgServer

    cases = ["pg-s1-sqlite", "pg-s1-postgres", *(f"pg-w{n}" for n in WORKER_COUNTS)]
    server = PgServer()
    server.start()
    os.environ[PG_URL_ENV] = server.url()
    raw = {}
    try:
        for case in cases:
            print(f"running {case} …", file=sys.stderr, flush=True)
            raw[case] = run_case(case, args)
    finally:
        os.environ.pop(PG_URL_ENV, None)
        server.stop()
    return {"raw": raw, "selected": ["postgres"]}


# ---------------------------------------------------------------------- report


def sizes_of(args: argparse.Namespace) -> Sizes:
    """The quick or full sizes, with the work loop's as the flags set them."""
    sizes = QUICK if args.quick else FULL
    given = {
        k: getattr(args, k)
        for k in ("token_steps", "loop_nodes", "result_chars")
        if getattr(args, k) is not None
    }
    return replace(sizes, **given)


def build_report(args: argparse.Namespace, collected: dict[str, Any]) -> dict[str, Any]:
    sizes = sizes_of(args)
    raw = collected["raw"]
    selected = collected["selected"]
    report: dict[str, Any] = {
        "config": {
            "runs": args.runs,
            "quick": args.quick,
            "sizes": sizes.__dict__,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "scenarios": {},
        "targets": [],
    }
    targets: list[dict[str, Any]] = report["targets"]
    if selected == ["postgres"]:
        report["scenarios"]["postgres"] = postgres_report(raw, sizes, args.latency_ms)
        return report

    def target(name: str, value: float, limit: float, ok: bool, unit: str) -> None:
        status = "-" if args.quick else ("PASS" if ok else "MISS")
        targets.append(
            {"target": name, "value": value, "limit": limit, "unit": unit, "status": status}
        )

    s1 = raw.get("s1")
    if s1 is not None and 1 in selected:
        rows = {h: {k: stats(v) for k, v in cols.items()} for h, cols in s1["by_history"].items()}
        report["scenarios"]["1"] = {
            "by_history": rows,
            "durable_commit_us": stats(s1["commit_us"]),
            "help_ms": stats(s1["help_ms"]),
            "no_fsync": {
                "history": s1["no_fsync"]["history"],
                "step_us": stats(s1["no_fsync"]["step_us"]),
            },
            "peak_rss_bytes": s1["peak_rss"],
        }
        if "strace_fsyncs" in s1:
            report["scenarios"]["1"]["strace_fsyncs"] = s1["strace_fsyncs"]
            report["scenarios"]["1"]["process_durable_commits"] = s1["process_durable_commits"]
        hs = [str(h) for h in sizes.histories]
        mid, small, large = hs[1], hs[0], hs[-1]
        us = rows[mid]["step_us"]["median"]
        target(f"s1 @{mid} msgs: µs/step", us, 800, us <= 800, "µs")
        help_ms = report["scenarios"]["1"]["help_ms"]["median"]
        target("mindloop --help (a new process): ms", help_ms, 200, help_ms <= 200, "ms")
        commits = rows[mid]["max_commits_in_a_step"]["max"]
        target(f"s1 @{mid} msgs: durable commits in any step", commits, 2, commits <= 2, "")
        ratio = rows[large]["step_us"]["median"] / rows[small]["step_us"]["median"]
        target(f"s1 @{large} / @{small} msgs: µs/step", ratio, 1.5, ratio <= 1.5, "×")
        ratio = rows[large]["us_per_step"]["median"] / rows[small]["us_per_step"]["median"]
        target(f"s1 @{large} / @{small} msgs: incl. load", ratio, 1.5, ratio <= 1.5, "×")
    for variant in ("tellask", "fbr"):
        s2 = raw.get(f"s2-{variant}")
        if s2 is None:
            continue
        cols = {k: stats(v) for k, v in s2["samples"].items()}
        report["scenarios"].setdefault("2", {})[variant] = {
            **cols,
            "peak_rss_bytes": s2["peak_rss"],
        }
        ms = cols["revive_ms"]["median"]
        target(
            f"s2 {variant} ×{sizes.fan_out}: ms until the caller is revived",
            ms,
            100,
            ms <= 100,
            "ms",
        )
    s3 = raw.get("s3")
    if s3 is not None:
        cols = {k: stats(v) for k, v in s3["samples"].items()}
        report["scenarios"]["3"] = {**cols, "peak_rss_bytes": s3["peak_rss"]}
        rss = s3["peak_rss"]
        target(
            f"s3 {sizes.dialogs}×{sizes.dialog_steps}: peak RSS", rss / MIB, 1024, rss < GIB, "MiB"
        )
    if 4 in selected and s1 is not None:
        mind = {h: statistics.median(c["us_per_step"]) for h, c in s1["by_history"].items()}
        peers: dict[str, Any] = {
            "mindloop": {
                "us_per_step": {h: stats(s1["by_history"][h]["us_per_step"]) for h in mind}
            }
        }
        for key in PEERS:
            peer = raw[f"s4-{key}"]
            if not peer["installed"]:
                peers[key] = {"name": peer["name"], "installed": False}
                continue
            by = {h: stats(c["us_per_step"]) for h, c in peer["by_history"].items()}
            peers[key] = {
                "name": peer["name"],
                "installed": True,
                "us_per_step": by,
                "ratio_to_mindloop": {h: by[h]["median"] / mind[h] for h in by},
                "growth_large_over_small": by[str(sizes.histories[-1])]["median"]
                / by[str(sizes.histories[0])]["median"],
                "peak_rss_bytes": peer["peak_rss"],
            }
        report["scenarios"]["4"] = peers
    watched = {
        case.removeprefix("s5-"): data for case, data in raw.items() if case.startswith("s5-")
    }
    if watched:
        rows = {
            n: {
                "wall_s": data["samples"]["wall_s"][0],
                "live_views": data["samples"]["live_views"][0],
                "kept_results": data["samples"]["kept"][0],
                "peak_rss_bytes": data["peak_rss"],
            }
            for n, data in watched.items()
        }
        report["scenarios"]["5"] = rows
        few, many = (str(n) for n in sizes.watched)
        if few in rows and many in rows:
            ratio = rows[many]["peak_rss_bytes"] / rows[few]["peak_rss_bytes"]
            target(
                f"s5 watch: peak RSS after {many} dialogs ÷ after {few}",
                ratio,
                1.1,
                ratio <= 1.1,
                "×",
            )
    if "s6" in raw:
        report["scenarios"]["6"] = s6 = _tokens_report(raw)
        growth = s6["mindloop"]["growth"]
        target(
            f"s6 @{sizes.token_steps} steps: mindloop's largest input ÷ its input at step 10",
            growth,
            TOKEN_GROWTH,
            s6["mindloop"]["goal_met"],
            "×",
        )
    s7 = raw.get("s7")
    if s7 is not None:
        cols = {k: stats(v) for k, v in s7["samples"].items()}
        report["scenarios"]["7"] = {**cols, "nodes": sizes.loop_nodes}
        report["scenarios"]["7"]["peak_rss_bytes"] = s7["peak_rss"]
        if "strace_fsyncs" in s7:
            report["scenarios"]["7"]["strace_fsyncs"] = s7["strace_fsyncs"]
        ms = cols["own_ms_per_node"]["median"]
        report["scenarios"]["7"]["goal_met"] = ms <= NODE_MS
        report["scenarios"]["7"]["peers"] = _loop_peers(raw, ms)
        target(f"s7 {sizes.loop_nodes} nodes: own ms per node", ms, NODE_MS, ms <= NODE_MS, "ms")
    return report


def _loop_peers(raw: dict[str, Any], ms: float) -> dict[str, Any]:
    """Scenario 7 on each peer: own and CPU ms per item, and the ratio to mindloop's."""
    out: dict[str, Any] = {}
    for key in PEERS:
        peer = raw.get(f"s7-{key}")
        if peer is None:
            continue
        if not peer["installed"]:
            out[key] = {"name": peer["name"], "installed": False}
            continue
        cols = {k: stats(v) for k, v in peer["samples"].items()}
        out[key] = {
            "name": peer["name"],
            "installed": True,
            **cols,
            "ratio_to_mindloop": cols["own_ms_per_node"]["median"] / ms,
            "peak_rss_bytes": peer["peak_rss"],
        }
    return out


def postgres_report(raw: dict[str, Any], sizes: Sizes, latency_ms: float) -> dict[str, Any]:
    per_step = {
        store: {
            "history": raw[f"pg-s1-{store}"]["history"],
            "step_us": stats(raw[f"pg-s1-{store}"]["step_us"]),
            "statements_per_step": stats(raw[f"pg-s1-{store}"]["statements_per_step"]),
        }
        for store in ("sqlite", "postgres")
    }
    workers = {}
    for n in WORKER_COUNTS:
        case = raw[f"pg-w{n}"]
        workers[str(n)] = {
            **{k: stats(v) for k, v in case["samples"].items()},
            "bound_steps_per_s": case["bound_steps_per_s"],
        }
    one = workers["1"]["steps_per_s"]["median"]
    for row in workers.values():
        row["speedup"] = row["steps_per_s"]["median"] / one
    return {
        "per_step": per_step,
        "workers": workers,
        "dialogs": sizes.pg_dialogs,
        "steps": sizes.pg_steps,
        "concurrency": sizes.pg_concurrency,
        "latency_ms": latency_ms,
    }


def print_postgres(pg: dict[str, Any]) -> None:
    print("scale-out: the store on PostgreSQL, the work on `mindloop worker` processes")
    print(
        "   per-step overhead (scenario 1, one process, the zero-latency mock, "
        f"@{pg['per_step']['sqlite']['history']} messages)"
    )
    print(f"   {'store':>10}  {'µs/step':>20}  {'SQL/step':>8}")
    for store, row in pg["per_step"].items():
        name = "SQLite" if store == "sqlite" else "PostgreSQL"
        print(
            f"   {name:>10}  {_mm(row['step_us']):>20}  "
            f"{row['statements_per_step']['median']:>8.1f}"
        )
    sqlite, postgres = (pg["per_step"][s]["step_us"]["median"] for s in ("sqlite", "postgres"))
    print(f"   PostgreSQL ÷ SQLite: ×{postgres / sqlite:.1f} per step\n")
    print(
        f"   scenario 3 on workers: {pg['dialogs']} roots × {pg['steps']} steps per round, "
        f"model latency {pg['latency_ms']:g} ms per generation, concurrency "
        f"{pg['concurrency']} per worker"
    )
    print(
        f"   {'workers':>7}  {'wall s':>20}  {'steps/s':>20}  {'×1 worker':>9}  "
        f"{'bound steps/s':>13}  {'worker CPU ms/step':>18}"
    )
    for n, row in pg["workers"].items():
        print(
            f"   {n:>7}  {_mm(row['wall_s'], '{:.2f}'):>20}  {_mm(row['steps_per_s']):>20}  "
            f"{row['speedup']:>9.2f}  {row['bound_steps_per_s']:>13.0f}  "
            f"{_mm(row['worker_cpu_ms_per_step'], '{:.1f}'):>18}"
        )
    print(
        "   bound = workers × concurrency ÷ latency (the most the queue lets them do);"
        " worker CPU = the workers' CPU time\n"
        "   per step (the store on PostgreSQL, the DBOS queue and step records, the HTTP"
        " model client), all workers summed.\n"
    )


def _tokens_report(raw: dict[str, Any]) -> dict[str, Any]:
    """Scenario 6: mindloop's input tokens at the marks and its goal; each peer's at the
    same marks, its growth and its ratio to mindloop at the last."""
    mind = raw["s6"]
    at = {m: int(v) for m, v in mind["at"].items()}
    marks = list(at)
    first, last = at[marks[0]], at[marks[-1]]
    growth = mind["max_from_first_mark"] / first
    out: dict[str, Any] = {
        "steps": mind["steps"],
        "mindloop": {
            "at": at,
            "max_from_first_mark": mind["max_from_first_mark"],
            "growth": growth,
            "goal_met": growth <= TOKEN_GROWTH,
            "budget": mind["budget"],
            "system_cap": mind["system_cap"],
            "window": mind["window"],
            "compactions_at": mind["compactions_at"],
            "after_the_work": mind["after"],
            "wall_s": mind["wall_s"],
        },
    }
    for key in PEERS:
        peer = raw[f"s6-{key}"]
        if not peer["installed"]:
            out[key] = {"name": peer["name"], "installed": False}
            continue
        tokens = peer["tokens"]
        pat = {m: int(tokens[int(m) - 1]) for m in marks}
        out[key] = {
            "name": peer["name"],
            "installed": True,
            "at": pat,
            "growth": pat[marks[-1]] / pat[marks[0]],
            "ratio_to_mindloop": pat[marks[-1]] / last,
        }
    return out


def _mm(s: dict[str, float], fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def print_report(report: dict[str, Any]) -> None:
    cfg = report["config"]
    sc = report["scenarios"]
    if "postgres" in sc:
        print(
            f"\nmindloop benchmark · {cfg['runs']} runs after a warm-up · medians (min–max)"
            f"{' · QUICK sizes' if cfg['quick'] else ''}\n"
            f"python {cfg['python']} · {cfg['platform']} · {cfg['cpus']} CPUs\n"
        )
        print_postgres(sc["postgres"])
        return
    print(
        f"\nmindloop benchmark · {cfg['runs']} runs after a warm-up · medians (min–max)"
        f"{' · QUICK sizes' if cfg['quick'] else ''}\n"
        f"python {cfg['python']} · {cfg['platform']} · {cfg['cpus']} CPUs\n"
    )
    if "1" in sc:
        print("1. per-step overhead, durable store (20 tool calls + answer = 21 steps per drive)")
        print(
            f"   {'history':>8}  {'µs/step':>20}  {'incl. load':>20}  {'load ms':>16}  {'fsyncs/step':>11}  {'max':>3}  {'lazy/step':>9}  {'SQL/step':>8}"
        )
        for h, row in sc["1"]["by_history"].items():
            print(
                f"   {h:>8}  {_mm(row['step_us']):>20}  {_mm(row['us_per_step']):>20}  "
                f"{_mm(row['load_ms'], '{:.1f}'):>16}  "
                f"{row['commits_per_step']['median']:>11.2f}  {row['max_commits_in_a_step']['max']:>3.0f}  "
                f"{row['lazy_commits_per_step']['median']:>9.2f}  {row['statements_per_step']['median']:>8.1f}"
            )
        print(
            "   µs/step = from the drive's start (history in memory) to its answer, ÷ steps; incl. load ="
            " from posting the message, i.e. with\n"
            "   the one-time load of the history (load ms) that a process pays once per dialog.\n"
            "   fsyncs = durable commits (a COMMIT that changed rows under synchronous=FULL: one fsync"
            " of the WAL); lazy = commits\n"
            "   without an fsync of their own (synchronous=NORMAL), made durable by the next fsync."
        )
        print(
            f"   this disk: one durable SQLite commit (1 row, WAL, synchronous=FULL) ="
            f" {_mm(sc['1']['durable_commit_us'])} µs, measured beside each history size."
        )
        nf = sc["1"]["no_fsync"]
        print(
            f"   the same @{nf['history']} without any fsync (synchronous=NORMAL): "
            f"{_mm(nf['step_us'])} µs/step — the runtime's own cost, apart from the disk."
        )
        print(
            f"   `mindloop --help` in a new process: {_mm(sc['1']['help_ms'])} ms (interpreter"
            " start and the CLI's imports; the engine, store and SDKs stay unimported)."
        )
        if "strace_fsyncs" in sc["1"]:
            print(
                f"   strace: {sc['1']['strace_fsyncs']} fsync/fdatasync calls in the scenario-1 process,"
                f" {sc['1']['process_durable_commits']} durable commits counted (difference: WAL checkpoints, setup)"
            )
        print()
    if "2" in sc:
        print("2. fan-out: one message → N side dialogs, each answering in one step")
        print(
            f"   {'variant':>8}  {'ms until caller revived':>26}  {'ms from dispatch':>22}  {'peak RSS MiB':>12}"
        )
        for variant, row in sc["2"].items():
            print(
                f"   {variant:>8}  {_mm(row['revive_ms'], '{:.1f}'):>26}  {_mm(row['fan_out_ms'], '{:.1f}'):>22}  "
                f"{row['peak_rss_bytes'] / MIB:>12.0f}"
            )
        print()
    if "3" in sc:
        row = sc["3"]
        size = cfg["sizes"]
        print(
            f"3. many dialogs: {size['dialogs']} roots × {size['dialog_steps']} steps, concurrently, one process"
        )
        print(
            f"   wall s {_mm(row['wall_s'], '{:.2f}')} · steps/s {_mm(row['steps_per_s'])} · "
            f"peak RSS {row['peak_rss_bytes'] / MIB:.0f} MiB\n"
        )
    if "4" in sc:
        print(
            "4. side by side: scenario 1, µs/step incl. load (each from the call to the answer),"
            " medians (min–max), ratio peer/mindloop"
        )
        mind = sc["4"]["mindloop"]["us_per_step"]
        for key, peer in sc["4"].items():
            if key == "mindloop":
                cells = "  ".join(f"@{h}: {_mm(s):>22}" for h, s in mind.items())
                print(f"   {'mindloop':>18}  {cells}")
                continue
            if not peer["installed"]:
                print(f"   {peer['name']:>18}  {NOT_INSTALLED}")
                continue
            cells = "  ".join(
                f"@{h}: {_mm(s):>22} ×{peer['ratio_to_mindloop'][h]:.1f}"
                for h, s in peer["us_per_step"].items()
            )
            print(f"   {peer['name']:>18}  {cells}  (grows ×{peer['growth_large_over_small']:.1f})")
        print()
    if "5" in sc:
        print("5. a watching process (`run --watch`) fed short dialogs, 100 at a time")
        for n, row in sc["5"].items():
            print(
                f"   {n:>6} dialogs: peak RSS {row['peak_rss_bytes'] / MIB:.0f} MiB · "
                f"wall {row['wall_s']:.1f} s · views held at the end {row['live_views']:.0f}"
            )
        print()
    if "6" in sc:
        _print_tokens(sc["6"], cfg["sizes"])
    if "7" in sc:
        _print_overhead(sc["7"])
    if report["targets"]:
        print("targets")
        for t in report["targets"]:
            print(
                f"   {t['status']:>4}  {t['target']}: {t['value']:.2f}{t['unit']} (limit {t['limit']}{t['unit']})"
            )


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _print_tokens(s6: dict[str, Any], size: dict[str, Any]) -> None:
    mind = s6["mindloop"]
    marks = list(mind["at"])
    print(
        f"6. tokens stay flat: a {s6['steps']}-step task (PLAN, then DO calling a tool whose"
        f" result is {size['result_chars']} characters, step after step),\n"
        "   input tokens of the request at each step (provider-reported; the peers keep the"
        " full history, their default)"
    )
    head = "".join(f"{'@' + m:>10}" for m in marks)
    print(f"   {'':>18}{head}  {'growth':>8}  {'peer/mindloop @' + marks[-1]:>20}")
    cells = "".join(f"{v:>10,}" for v in mind["at"].values())
    print(f"   {'mindloop':>18}{cells}  {'×' + format(mind['growth'], '.2f'):>8}")
    for key in PEERS:
        peer = s6[key]
        if not peer["installed"]:
            print(f"   {peer['name']:>18}  {NOT_INSTALLED}")
            continue
        cells = "".join(f"{v:>10,}" for v in peer["at"].values())
        print(
            f"   {peer['name']:>18}{cells}  {'×' + format(peer['growth'], '.1f'):>8}"
            f"  {'×' + format(peer['ratio_to_mindloop'], '.1f'):>20}"
        )
    compacted = ", ".join(str(n) for n in mind["compactions_at"]) or "none"
    print(
        f"   mindloop: B = {mind['budget']:,} tokens of compiled context (window"
        f" {mind['window']:,}) + a system prompt ≤ {mind['system_cap']:,};"
        f" dialog compacted at steps: {compacted};\n"
        f"   after the work, CHECK and SELF_IMPROVE (an entry per batch of the history)"
        f" asked with {', '.join(f'{t:,}' for t in mind['after_the_work'])} tokens;"
        f" the task took {mind['wall_s']:.1f} s"
    )
    print(
        f"   goal: mindloop's input ≤ {TOKEN_GROWTH} × its step-{marks[0]} figure at every step"
        f" from {marks[0]} to {s6['steps']} (largest ×{mind['growth']:.2f}):"
        f" {_verdict(mind['goal_met'])}\n"
    )


def _print_overhead(s7: dict[str, Any]) -> None:
    print(
        f"7. loop overhead: {s7['nodes']} nodes planned (one PLAN step), each done (DO) and"
        " checked (CHECK) in one step, then SELF_IMPROVE (an entry per 40 messages); zero-latency mock"
    )
    print(
        f"   {'own ms/node':>22}  {'CPU ms/node':>20}  {'ms/transition':>18}  {'own µs/step':>22}"
        f"  {'fsyncs/node':>11}  {'commits':>7}  {'files':>5}  {'entries':>7}"
    )
    print(
        f"   {_mm(s7['own_ms_per_node'], '{:.1f}'):>22}  {_mm(s7['cpu_ms_per_node'], '{:.1f}'):>20}"
        f"  {_mm(s7['transition_ms'], '{:.1f}'):>18}  {_mm(s7['own_us_per_step']):>22}"
        f"  {s7['fsyncs_per_node']['median']:>11.1f}  {s7['commits_per_node']['median']:>7.1f}"
        f"  {s7['file_fsyncs_per_node']['median']:>5.1f}  {s7['phase_entries']['median']:>7.0f}"
    )
    print(
        "   own = wall time minus the time inside the model's stream; a transition = from a"
        " phase's end to the next phase's start (routing, entry);\n"
        "   fsyncs = durable store commits (one fsync of the WAL each) + os.fsync calls (the"
        " workspace's projection files, written atomically)"
    )
    if "strace_fsyncs" in s7:
        print(f"   strace: {s7['strace_fsyncs']} fsync/fdatasync calls in the scenario-7 process")
    if s7.get("peers"):
        print(
            "   the same task shape on the peers (one PLAN call creating the items, then per item"
            " one DO and one CHECK call; the peers' durable history only):"
        )
        for peer in s7["peers"].values():
            if not peer["installed"]:
                print(f"   {peer['name']:>18}  {NOT_INSTALLED}")
                continue
            print(
                f"   {peer['name']:>18}  own ms/node {_mm(peer['own_ms_per_node'], '{:.1f}')}"
                f"  CPU ms/node {_mm(peer['cpu_ms_per_node'], '{:.1f}')}"
                f"  ×{peer['ratio_to_mindloop']:.2f} of mindloop's"
            )
    ms = s7["own_ms_per_node"]["median"]
    print(
        f"   goal: ≤ {NODE_MS} ms of the runtime's own time per node ({ms:.1f}): {_verdict(ms <= NODE_MS)}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="measured runs after the warm-up")
    parser.add_argument("--quick", action="store_true", help="tiny CI sizes (targets not judged)")
    parser.add_argument(
        "--scenario", default="1,2,3,4,5,6,7", help="comma-separated scenario numbers"
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--strace",
        action="store_true",
        help="count fsyncs of scenario 1 with strace (if installed)",
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="measure scale-out instead: PostgreSQL beside SQLite, scenario 3 on 1-3 workers",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=50.0,
        help="--postgres: the simulated model's latency per generation",
    )
    parser.add_argument(
        "--token-steps", type=int, help="scenario 6: root steps of the task (default 1000)"
    )
    parser.add_argument(
        "--result-chars", type=int, help="scenario 6: characters of each tool result (400)"
    )
    parser.add_argument(
        "--loop-nodes", type=int, help="scenario 7: nodes planned, done and checked (50)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--count-all-commits", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.token_steps is not None and args.token_steps < 10:
        parser.error("--token-steps must be at least 10 (the goal compares with step 10)")
    if args.loop_nodes is not None and args.loop_nodes < 1:
        parser.error("--loop-nodes must be at least 1")
    if args.result_chars is not None and args.result_chars < 20:
        parser.error("--result-chars must be at least 20")
    sizes = sizes_of(args)
    if args.worker:
        out = worker(args.worker, args.runs, sizes, args.count_all_commits, args.latency_ms)
        print(json.dumps(out))
        return 0
    if args.strace and not _strace_available():
        print("strace is not installed; running without --strace", file=sys.stderr)
        args.strace = False
    report = build_report(args, collect(args))
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
