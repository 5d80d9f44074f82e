"""A dialog that stops on an error is reported on stderr, one line per dialog (issue 10
item 22: mock-script errors went to stdout); the whole error stays in the live transcript
on stdout, where a mock miss's entry can be copied from."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scenario_util import ml


def test_a_mock_miss_and_a_script_broken_later_are_one_line_each_on_stderr(
    tmp_path: Path,
) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    miss = ml("chat", "-C", str(proj), "-t", "tasks/example.tsk", "unscripted", cwd=tmp_path)
    assert miss.returncode == 1
    [dialog] = json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    assert miss.stderr.splitlines() == [
        f"error: dialog {dialog['id']} (@dev) stopped on error: 🤖 Mock Response Not Found"
    ]
    assert "Append this entry" in miss.stdout  # the full error, in the transcript

    script = proj / ".minds" / "mock" / "mock-model.yaml"
    script.write_text("responses:\n  - mtch: unscripted\n    response: yo\n")
    retried = ml("run", "--retry-errors", "-C", str(proj), cwd=tmp_path)
    assert retried.returncode == 1
    assert retried.stderr.splitlines() == [
        f"error: dialog {dialog['id']} (@dev) stopped on error: invalid mock script: {script.resolve()}:2: "
        "responses[0]: unknown key 'mtch' (did you mean 'match'?)"
    ]
