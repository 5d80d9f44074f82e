"""Usage and cost on the command line: the `chat` and `run` summaries, `dialogs list` and
`dialogs show` (and their `--json`), and a spending cap making `chat` exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.scenario_util import ml, write_script, write_team

TASK = "tasks/example.tsk"
SCRIPT = [
    {
        "member": "lead",
        "match": "go",
        "response": "!?@worker Count the files.\n",
        "usage": {"input_tokens": 300, "output_tokens": 30},
    },
    {
        "member": "worker",
        "contains": "Count the files",
        "tool_calls": [{"name": "list_dir", "arguments": {}}],
        "usage": {"input_tokens": 1000, "output_tokens": 100},
    },
    {
        "member": "worker",
        "role": "tool",
        "contains": "README.md",
        "response": "three",
        "usage": {"input_tokens": 2000, "output_tokens": 50},
    },
    {  # asked to go on after a cap stopped it: another tool call
        "member": "worker",
        "contains": "caps.drive.max_tokens",
        "tool_calls": [{"name": "list_dir", "arguments": {}}],
        "usage": {"input_tokens": 2000, "output_tokens": 50},
    },
    {
        "member": "lead",
        "contains": "three",
        "response": "There are three files.",
        "usage": {"input_tokens": 500, "output_tokens": 20},
    },
]


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_team(proj, {"lead": {"toolsets": ["fs"]}, "worker": {"toolsets": ["fs"]}})
    write_script(proj, SCRIPT)
    llm_path = proj / ".minds" / "llm.yaml"
    llm = yaml.safe_load(llm_path.read_text("utf-8"))
    llm["providers"]["mock"]["models"]["mock-model"]["price"] = {
        "input_per_mtok": 3,
        "output_per_mtok": 15,
    }
    llm_path.write_text(yaml.safe_dump(llm), "utf-8")
    return proj


# lead 300/30 + worker 1000/100 + worker 2000/50 + lead 500/20, at $3 in / $15 out per Mtok
TOKENS_IN, TOKENS_OUT = 3800, 200
COST = (TOKENS_IN * 3 + TOKENS_OUT * 15) / 1e6  # $0.0144


def test_chat_and_dialogs_show_tokens_and_cost(proj: Path) -> None:
    out = ml("chat", "-C", str(proj), "-t", TASK, "go")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "usage: 4 generations · 3,800 tokens in / 200 out · $0.0144 (this run)" in out.stdout

    dialogs = json.loads(ml("dialogs", "list", "--json", "-C", str(proj)).stdout)
    usage = {d["member"]: d["usage"] for d in dialogs}
    assert usage["lead"] == {
        "generations": 2,
        "input_tokens": 800,
        "output_tokens": 50,
        "cost_usd": pytest.approx((800 * 3 + 50 * 15) / 1e6),
        "unpriced": 0,
    }
    assert usage["worker"]["input_tokens"] == 3000 and usage["worker"]["generations"] == 2
    table = ml("dialogs", "list", "-C", str(proj)).stdout
    assert "tokens" in table and "cost" in table and "3,150" in table  # the worker's tokens

    [lead] = [d for d in dialogs if d["member"] == "lead"]
    shown = json.loads(ml("dialogs", "show", "--json", "-C", str(proj), lead["id"]).stdout)
    assert shown["usage"]["generations"] == 2
    assert shown["tree_usage"]["input_tokens"] == TOKENS_IN
    assert shown["tree_usage"]["cost_usd"] == pytest.approx(COST)
    assert [g["cost_usd"] for g in shown["generations"]] == [
        pytest.approx((300 * 3 + 30 * 15) / 1e6),
        pytest.approx((500 * 3 + 20 * 15) / 1e6),
    ]
    text = ml("dialogs", "show", "-C", str(proj), lead["id"]).stdout
    assert "usage: 2 generations · 800 tokens in / 50 out · $0.00315" in text
    assert "dialog tree: 4 generations · 3,800 tokens in / 200 out · $0.0144" in text


def test_a_cap_stops_chat_with_exit_3_and_says_which(proj: Path) -> None:
    team_path = proj / ".minds" / "team.yaml"
    team = yaml.safe_load(team_path.read_text("utf-8"))
    team["caps"] = {"drive": {"max_tokens": 1000}}
    team_path.write_text(yaml.safe_dump(team), "utf-8")
    out = ml("chat", "-C", str(proj), "-t", TASK, "go")
    assert out.returncode == 3, out.stdout + out.stderr
    dialogs = json.loads(ml("dialogs", "list", "--json", "-C", str(proj)).stdout)
    [worker] = [d for d in dialogs if d["member"] == "worker"]
    assert worker["status"] == "stopped"
    assert (
        f"dialog {worker['id']} (@worker): Stopped: this drive used 1,100 tokens, its cap is "
        "1,000. Raise or remove caps.drive.max_tokens in .minds/team.yaml"
    ) in out.stdout.replace("\n", " ")

    run = ml("run", "-C", str(proj), "--retry-errors")  # the worker again: capped again
    assert run.returncode == 3, run.stdout + run.stderr
    assert "usage: 1 generation · 2,000 tokens in / 50 out · $0.00675" in run.stdout
    assert "this drive used 2,050 tokens, its cap is 1,000" in run.stdout.replace("\n", " ")
