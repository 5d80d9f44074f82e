"""The benchmark must keep running: a CI-sized pass of `bench/run.py` (no thresholds).
Scenarios 6 and 7 (the work loop) have their own test, `test_bench_loop.py`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _positive_numbers(node: Any) -> list[float]:
    if isinstance(node, bool):
        return []
    if isinstance(node, int | float):
        return [float(node)]
    if isinstance(node, dict):
        return [x for v in node.values() for x in _positive_numbers(v)]
    if isinstance(node, list):
        return [x for v in node for x in _positive_numbers(v)]
    return []


def test_quick_benchmark_reports_every_scenario(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "bench/run.py",
            "--quick",
            "--runs",
            "1",
            "--scenario",
            "1,2,3,4,5",
            "--json",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text("utf-8"))
    scenarios = report["scenarios"]
    assert set(scenarios) == {"1", "2", "3", "4", "5"}
    watched = scenarios["5"]
    assert set(watched) == {"5", "50"}
    for row in watched.values():  # a watching process lets go of every settled dialog
        assert row["live_views"] == 0 and row["peak_rss_bytes"] > 0

    s1 = scenarios["1"]["by_history"]
    assert set(s1) == {"10", "20", "40"}
    for row in s1.values():
        assert row["us_per_step"]["median"] >= row["step_us"]["median"] > 0
        assert row["load_ms"]["median"] > 0 and row["steady_us_per_step"]["median"] > 0
        # every step's tool call is fsync'd before the tool runs
        assert row["commits_per_step"]["median"] >= 1
        assert row["steps"]["median"] == 21
        assert row["max_commits_in_a_step"]["max"] > 0

    assert set(scenarios["2"]) == {"tellask", "fbr"}
    for row in scenarios["2"].values():
        assert row["revive_ms"]["median"] > 0 and row["peak_rss_bytes"] > 0

    s3 = scenarios["3"]
    assert s3["wall_s"]["median"] > 0 and s3["steps_per_s"]["median"] > 0
    assert s3["peak_rss_bytes"] > 0

    s4 = scenarios["4"]
    assert all(x > 0 for x in _positive_numbers(s4["mindloop"]))
    for key in ("langgraph", "agents"):
        peer = s4[key]
        if peer["installed"]:
            assert all(r > 0 for r in peer["ratio_to_mindloop"].values())
        else:
            assert "not installed (pip install -e .[bench])" in proc.stdout

    assert [t["status"] for t in report["targets"]] == ["-"] * len(report["targets"])
    assert "targets" in proc.stdout and "1. per-step overhead" in proc.stdout
