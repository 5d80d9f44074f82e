"""`chat` reports the step limit wherever in its tree a drive stopped at it (issue 10
item 4, the CLI side): exit 3 and a line naming the dialog, not exit 0 because the root
itself only waits."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scenario_util import ml, write_script, write_team

SCRIPT = [
    {"member": "lead", "match": "go", "response": "!?@worker Count the files.\n"},
    # The worker lists the directory again and again: three tool steps, more than allowed.
    {"member": "worker", "default": True, "tool_calls": [{"name": "list_dir", "arguments": {}}]},
]


def test_a_side_dialog_at_the_step_limit_makes_chat_exit_3(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_team(proj, {"lead": {"toolsets": ["fs"]}, "worker": {"toolsets": ["fs"]}})
    write_script(proj, SCRIPT)
    out = ml(
        "chat", "-C", str(proj), "-t", "tasks/example.tsk", "--max-steps", "2", "go", cwd=tmp_path
    )
    assert out.returncode == 3, out.stdout + out.stderr
    dialogs = json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    [side] = [d for d in dialogs if d["member"] == "worker"]
    assert f"dialog {side['id']} (@worker) stopped at the step limit (2)" in out.stdout
