"""A side dialog of a task's tree that stops at the per-drive step limit (issue 12: "run
… exit codes: 3 a cap reached"): `run TASK` ends with exit 3 naming it — it used to wait
for its reply forever — and the next `run TASK` drives it on. An answer goes on with the
step limit of the run that asked: `run TASK --max-steps N` records N for the task's tree,
and `answer` drives the tree with it, as the workers do, not with a new process's
default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_cli_loop import TASK, _create, _end
from tests.scenario_util import ml, write_script, write_team

PLAN = [
    {"member": "lead", "contains": "Phase PLAN (entry", "tool_calls": [_create("count")]},
    {"member": "lead", "role": "tool", "contains": "created n1", "tool_calls": [_end("DO")]},
]
# the worker lists the directory again and again: more steps than a run allows
WORKER = {
    "member": "worker",
    "default": True,
    "tool_calls": [{"name": "list_dir", "arguments": {}}],
}


def _project(tmp_path: Path, script: list[dict[str, Any]]) -> tuple[str, str]:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_team(proj, {"lead": {"toolsets": ["fs"]}, "worker": {"toolsets": ["fs"]}})
    write_script(proj, [*PLAN, *script, WORKER])
    return "-C", str(proj)


def _worker_drives(summary: dict[str, Any], c: tuple[str, str], tmp_path: Path) -> list[Any]:
    dialogs = json.loads(ml("dialogs", "list", "--json", *c, cwd=tmp_path).stdout)
    [side] = [d for d in dialogs if d["member"] == "worker"]
    return [
        (d["reason"], d["steps"])
        for d in summary["report"]["drives"]
        if d["dialog_id"] == side["id"]
    ]


def test_a_side_dialog_at_the_step_limit_ends_the_run_with_exit_3(tmp_path: Path) -> None:
    c = _project(
        tmp_path,
        [{"member": "lead", "contains": "Phase DO (entry", "response": "!?@worker Count them.\n"}],
    )
    out = ml("run", TASK, "-m", "count the files", "--max-steps", "3", "--json", *c, cwd=tmp_path)
    assert out.returncode == 3, out.stdout[-3000:] + out.stderr
    summary = json.loads(out.stdout)
    assert summary["outcome"] == "step_limit"
    assert _worker_drives(summary, c, tmp_path) == [("step_limit", 3)]
    again = ml("run", TASK, "--max-steps", "2", "--json", *c, cwd=tmp_path)
    assert again.returncode == 3, again.stdout[-3000:] + again.stderr
    assert _worker_drives(json.loads(again.stdout), c, tmp_path) == [("step_limit", 2)]


def test_the_answer_drives_on_with_the_step_limit_of_the_run(tmp_path: Path) -> None:
    c = _project(
        tmp_path,
        [
            {"member": "lead", "contains": "Phase DO (entry", "response": "!?@human Which?\n"},
            {"member": "lead", "contains": "answer from the human", "response": "!?@worker Go.\n"},
        ],
    )
    out = ml("run", TASK, "-m", "count the files", "--max-steps", "3", *c, cwd=tmp_path)
    assert out.returncode == 4, out.stdout[-3000:] + out.stderr
    [q] = json.loads(ml("questions", "--json", *c, cwd=tmp_path).stdout)
    answered = ml("answer", q["id"], "all of them", "--json", *c, cwd=tmp_path)
    assert answered.returncode == 3, answered.stdout[-3000:] + answered.stderr
    summary = json.loads(answered.stdout)
    assert summary["report"]["max_steps"] == 3
    assert _worker_drives(summary, c, tmp_path) == [("step_limit", 3)]
