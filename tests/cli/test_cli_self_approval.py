"""A self.md change under `loop.self_md.require_approval`, as a user meets it: `mindloop
run TASK` ends DONE with exit 0 while the proposal's approval is open (SELF_IMPROVE does
not wait for it) and lists it with the commands that decide it; `approve` applies it,
`reject` records it rejected; `self history` shows both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mindloop.toolsets import self_md as sm
from mindloop.toolsets.self_md_doc import EMPTY_SHA256, sha256_hex
from tests.scenario_util import ml, write_script

TASK = "tasks/example.tsk"


def _end(hint: str) -> dict[str, Any]:
    return {
        "name": "phase_end",
        "arguments": {"next_behavior": hint, "summary": {"progress": "ok"}, "reason": "r"},
    }


FIRST = "## Habits\nTest first.\n"  # self.md once the first proposal is approved


def _patch(habit: str, base: str = EMPTY_SHA256) -> dict[str, Any]:
    return {
        "name": "self_md_patch",
        "arguments": {
            "section": "Habits",
            "op": "append",
            "content": habit,
            "base_sha256": base[:12],
            "rationale": "a lesson of this task",
        },
    }


SCRIPT = [
    {"contains": ["Phase SELF_IMPROVE (entry", "tests"], "tool_calls": [_patch("Test first.")]},
    {
        "contains": ["Phase SELF_IMPROVE (entry", "docs"],
        "tool_calls": [_patch("Docs too.", sha256_hex(FIRST))],
    },
    {"role": "tool", "contains": "PROPOSED", "tool_calls": [_end("END")]},
    {"contains": "Phase PLAN (entry", "tool_calls": [_end("END")]},
]


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    team = proj / ".minds" / "team.yaml"
    team.write_text(team.read_text() + "loop:\n  self_md: {require_approval: true}\n")
    write_script(proj, SCRIPT)
    return proj


def test_a_task_done_with_an_open_self_md_proposal_exits_0_and_approve_applies_it(
    tmp_path: Path,
) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    out = ml("run", TASK, "-m", "learn about tests", *c, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert "task tasks/example.tsk: done" in out.stdout
    [item] = json.loads(ml("questions", "--json", *c, cwd=tmp_path).stdout)
    aid = item["id"]
    assert item["kind"] == "approval" and item["tool"] == "self_md_patch", item
    shown = " ".join(out.stdout.split())
    assert f"approval {aid}" in shown and "proposes self_md_patch(" in shown
    assert "nothing waits for it" in shown and f"mindloop approve -C {proj} {aid}" in shown
    as_json = ml("run", TASK, "--json", *c, cwd=tmp_path)  # again: still done, exit 0
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["outcome"] == "done"
    path = sm.self_md_path(proj, "dev")
    assert not path.exists()  # proposed only

    done = ml("approve", aid, *c, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert f"approved {aid}" in done.stdout and "proposal #1 applied as #2" in done.stdout
    assert path.read_text() == FIRST
    assert json.loads(ml("questions", "--json", *c, cwd=tmp_path).stdout) == []
    again = ml("approve", aid, *c, cwd=tmp_path)
    assert again.returncode == 1 and "already closed" in again.stderr

    # a later pass proposes another change, which the human rejects
    out = ml("run", TASK, "-m", "now the docs", *c, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    [item] = json.loads(ml("questions", "--json", *c, cwd=tmp_path).stdout)
    done = ml("reject", item["id"], "--reason", "not needed", *c, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert path.read_text() == FIRST

    history = json.loads(ml("self", "history", "--json", *c, cwd=tmp_path).stdout)
    assert [(e["seq"], e["status"], e["proposal_seq"]) for e in history] == [
        (1, "proposed", None),
        (2, "applied", 1),
        (3, "proposed", None),
        (4, "rejected", 3),
    ]
    table = ml("self", "history", *c, cwd=tmp_path).stdout
    assert "proposed" in table and "rejected" in table
