"""The work loop's benchmark scenarios keep running and printing: scenario 6 (tokens over a
long task, beside the peers) and 7 (the loop's overhead per node), at tiny sizes. Only the
structure is checked, never a timing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOT_INSTALLED = "not installed (pip install -e .[bench])"


def test_loop_scenarios_print_their_figures_beside_the_peers(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "bench/run.py",
            "--scenario",
            "6,7",
            "--runs",
            "1",
            "--token-steps",
            "24",
            "--loop-nodes",
            "3",
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
    text = proc.stdout
    report = json.loads(out.read_text("utf-8"))
    assert set(report["scenarios"]) == {"6", "7"}

    s6 = report["scenarios"]["6"]
    mind = s6["mindloop"]
    assert s6["steps"] == 24 and list(mind["at"]) == ["10", "24"]
    assert all(v > 0 for v in mind["at"].values())
    assert mind["max_from_first_mark"] >= mind["at"]["10"]
    assert mind["goal_met"] == (mind["growth"] <= 1.2)
    # CHECK, then SELF_IMPROVE's review: an entry per batch of the history (agent-loop §9.3)
    assert len(mind["after_the_work"]) >= 2
    assert "6. tokens stay flat: a 24-step task" in text
    assert re.search(r"^ +mindloop +[\d,]+ +[\d,]+ +×\d", text, re.M)
    for key in ("langgraph", "agents"):
        peer = s6[key]
        if not peer["installed"]:
            assert f"{peer['name']}  {NOT_INSTALLED}" in text
            continue
        assert list(peer["at"]) == ["10", "24"]
        # the whole history in every request: the peers' input grows with each result
        assert peer["at"]["24"] > peer["at"]["10"]
        assert peer["ratio_to_mindloop"] > 0
        assert re.search(
            rf"^ +{re.escape(peer['name'])} +[\d,]+ +[\d,]+ +×[\d.]+ +×[\d.]+$", text, re.M
        )
    assert re.search(
        r"goal: mindloop's input ≤ 1\.2 × its step-10 figure .*: (PASS|FAIL)$", text, re.M
    )

    s7 = report["scenarios"]["7"]
    assert s7["nodes"] == 3
    # PLAN, DO and CHECK per node, then SELF_IMPROVE: an entry per batch of the history
    assert s7["phase_entries"]["median"] >= 2 * 3 + 2
    assert s7["steps"]["median"] == s7["phase_entries"]["median"]  # one step each
    for key in ("own_ms_per_node", "cpu_ms_per_node", "transition_ms", "own_us_per_step"):
        assert s7[key]["median"] > 0
    assert s7["commits_per_node"]["median"] >= 1
    assert s7["fsyncs_per_node"]["median"] == (
        s7["commits_per_node"]["median"] + s7["file_fsyncs_per_node"]["median"]
    )
    assert "7. loop overhead: 3 nodes planned" in text
    for key in ("langgraph", "agents"):
        peer = s7["peers"][key]
        if not peer["installed"]:
            assert f"{peer['name']}  {NOT_INSTALLED}" in text
            continue
        assert peer["own_ms_per_node"]["median"] > 0 and peer["cpu_ms_per_node"]["median"] > 0
        assert peer["ratio_to_mindloop"] > 0
        assert re.search(
            rf"^ +{re.escape(peer['name'])}  own ms/node [\d.]+ .* ×[\d.]+ of mindloop's$",
            text,
            re.M,
        )
    assert re.search(
        r"goal: ≤ 2\.0 ms of the runtime's own time per node \([\d.]+\): (PASS|FAIL)$", text, re.M
    )
    targets = [t["target"] for t in report["targets"]]
    assert any(t.startswith("s6 @24 steps") for t in targets)
    assert any(t.startswith("s7 3 nodes") for t in targets)
