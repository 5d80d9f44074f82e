"""Working on one dialog tree: `run --retry-errors --dialog ID` retries only that tree, and
`dialogs delete` archives and deletes a whole tree (never a side dialog alone, never
without confirmation)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.scenario_util import ml, write_script

TASK = "tasks/example.tsk"


def _dialogs(proj: Path, cwd: Path) -> list[dict[str, Any]]:
    return list(json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=cwd).stdout))


def test_retry_errors_for_one_dialog_leaves_the_others_stopped(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(proj, [{"match": "never", "response": "-"}])
    for msg in ("first", "second"):
        miss = ml("chat", "-C", str(proj), "-t", TASK, msg, cwd=tmp_path)
        assert miss.returncode == 1  # no script entry: both stop on an error
    first, second = _dialogs(proj, tmp_path)
    write_script(proj, [{"default": True, "response": "fixed"}])

    refused = ml("run", "--dialog", first["id"], "-C", str(proj), cwd=tmp_path)
    assert refused.returncode == 1 and "add --retry-errors" in refused.stderr

    out = ml("run", "--retry-errors", "--dialog", first["id"][:8], "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "retrying 1 dialog(s)" in out.stdout and "@dev: fixed" in out.stdout
    statuses = {d["id"]: d["status"] for d in _dialogs(proj, tmp_path)}
    assert statuses == {first["id"]: "idle", second["id"]: "error"}


def _tree_project(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    team = proj / ".minds" / "team.yaml"
    team.write_text(team.read_text() + "  qa: {}\n")
    write_script(
        proj,
        [
            {"match": "go", "member": "dev", "response": "!?@qa check it\n"},
            {"member": "qa", "role": "user", "response": "checked"},
            {"member": "dev", "role": "user", "contains": "checked", "response": "all good"},
            {"match": "other", "response": "other done"},
        ],
    )
    assert ml("chat", "-C", str(proj), "-t", TASK, "go", cwd=tmp_path).returncode == 0
    assert ml("chat", "-C", str(proj), "-t", TASK, "other", cwd=tmp_path).returncode == 0
    return proj, _dialogs(proj, tmp_path)


def test_delete_a_tree_with_its_archive(tmp_path: Path) -> None:
    proj, dialogs = _tree_project(tmp_path)
    root, side, other = dialogs
    assert (root["kind"], side["kind"], side["root_id"]) == ("root", "side", root["id"])
    c = ("-C", str(proj))

    no_yes = ml("dialogs", "delete", *c, root["id"], cwd=tmp_path)  # stdin is no terminal
    assert no_yes.returncode == 1 and "needs confirmation: add --yes" in no_yes.stderr
    assert "1 side dialog(s)" in no_yes.stderr
    side_only = ml("dialogs", "delete", *c, side["id"], "--yes", cwd=tmp_path)
    assert side_only.returncode == 1
    assert f"delete the whole tree with its root: {root['id']}" in side_only.stderr
    assert len(_dialogs(proj, tmp_path)) == 3

    archive = tmp_path / "archive" / "tree.json"
    archive.parent.mkdir()
    out = ml("dialogs", "delete", *c, root["id"][:8], "--yes", "--archive", str(archive))
    assert out.returncode == 0, out.stderr
    assert f"deleted dialog {root['id']} and 1 side dialog(s)" in out.stdout
    assert [d["id"] for d in _dialogs(proj, tmp_path)] == [other["id"]]
    saved = json.loads(archive.read_text())
    assert [d["dialog"]["id"] for d in saved["dialogs"]] == [root["id"], side["id"]]
    texts = [m["data"].get("text") for m in saved["dialogs"][0]["messages"]]
    assert texts[0] == "go" and texts[-1] == "all good"
    gone = ml("dialogs", "show", *c, root["id"], cwd=tmp_path)
    assert gone.returncode == 1 and "no dialog" in gone.stderr


def test_delete_asks_on_a_terminal_and_an_unwritable_archive_deletes_nothing(
    tmp_path: Path,
) -> None:
    proj, dialogs = _tree_project(tmp_path)
    root = dialogs[0]
    bad = ml("dialogs", "delete", "-C", str(proj), root["id"], "--yes", "--archive", "/proc/x.json")
    assert bad.returncode == 1 and "nothing was deleted" in bad.stderr
    assert len(_dialogs(proj, tmp_path)) == 3
    # On a terminal it asks: "n" aborts (exit 130), "y" deletes. The child takes its stdin
    # for a terminal.
    code = (
        "import sys; sys.stdin.isatty = lambda: True; "
        "from mindloop.cli.app import main; "
        f"main(['dialogs', 'delete', '-C', {str(proj)!r}, {root['id']!r}])"
    )
    asked = subprocess.run(
        [sys.executable, "-c", code], input="n\n", capture_output=True, text=True, timeout=60
    )
    assert "Delete dialog" in asked.stdout and asked.returncode == 130
    assert len(_dialogs(proj, tmp_path)) == 3
    yes = subprocess.run(
        [sys.executable, "-c", code], input="y\n", capture_output=True, text=True, timeout=60
    )
    assert yes.returncode == 0, yes.stderr
    assert len(_dialogs(proj, tmp_path)) == 1
