"""`bench/run.py --postgres` must keep running: a CI-sized pass (no thresholds) that starts
its own PostgreSQL server and 1, 2 and 3 real workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_quick_postgres_benchmark_prints_the_worker_table(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "bench/run.py", "--postgres", "--quick", "--runs", "1",
         "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "workers" in proc.stdout and "PostgreSQL ÷ SQLite" in proc.stdout, proc.stdout
    pg = json.loads(out.read_text("utf-8"))["scenarios"]["postgres"]
    assert set(pg["per_step"]) == {"sqlite", "postgres"}
    for row in pg["per_step"].values():
        assert row["step_us"]["median"] > 0 and row["statements_per_step"]["median"] > 0
    assert set(pg["workers"]) == {"1", "2", "3"}
    for n, row in pg["workers"].items():
        assert row["steps_per_s"]["median"] > 0 and row["worker_cpu_ms_per_step"]["median"] > 0
        assert row["bound_steps_per_s"] == int(n) * pg["concurrency"] * 1000 / pg["latency_ms"]
