"""`mindloop approve` / `reject` and approvals in `questions`, as a user runs them: a call
that needs approval stops `chat` with exit 4 (like a question), `questions` lists it with
its tool and arguments, `answer` refuses it (pointing to approve / reject), `approve` runs
exactly the approved call and drives on, `reject --reason` gives the model the reason."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scenario_util import ml, write_script, write_team

TASK = "tasks/example.tsk"
WRITE = [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hello\n"}}]


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_team(proj, {"dev": {"toolsets": ["fs"], "approval_required": ["write_file"]}})
    write_script(
        proj,
        [
            {"match": "write it", "response": "Writing.", "tool_calls": WRITE},
            {"match": "ask first", "response": "!?@human Which file?\n"},
            {"contains": "answer from the human", "response": "Writing.", "tool_calls": WRITE},
            {"contains": "The human approved", "response": "written"},
            {"contains": "The human rejected", "response": "not written"},
        ],
    )
    return proj


def test_approve_runs_the_call_and_reject_gives_the_reason(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    asked = ml("chat", *c, "-t", TASK, "write it", cwd=tmp_path)
    assert asked.returncode == 4, asked.stdout + asked.stderr
    assert "approve with: mindloop approve" in asked.stdout
    assert not (proj / "out.txt").exists()

    listed = ml("questions", *c, "--json", cwd=tmp_path)
    [item] = json.loads(listed.stdout)
    assert (item["kind"], item["member"], item["tool"]) == ("approval", "dev", "write_file")
    assert json.loads(item["arguments"]) == {"path": "out.txt", "content": "hello\n"}
    apv = item["id"]
    table = ml("questions", *c, cwd=tmp_path)
    assert apv in table.stdout and "approval" in table.stdout and "write_file" in table.stdout

    answered = ml("answer", *c, apv, "yes", cwd=tmp_path)
    assert answered.returncode == 1
    assert f"mindloop approve {apv}" in answered.stderr and "reject" in answered.stderr
    ran = ml("run", *c, "--json", cwd=tmp_path)
    assert ran.returncode == 4  # nothing to drive: the approval still waits
    assert [a["id"] for a in json.loads(ran.stdout)["report"]["approvals"]] == [apv]
    wrong = ml("approve", *c, apv, "--digest", "0" * 64, cwd=tmp_path)
    assert wrong.returncode == 1 and "nothing was decided" in wrong.stderr

    approved = ml("approve", *c, apv, "--json", cwd=tmp_path)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    summary = json.loads(approved.stdout)
    assert summary["decided"]["decision"] == "approve" and summary["answer"] == "written"
    assert (proj / "out.txt").read_text() == "hello\n"
    again = ml("approve", *c, apv, cwd=tmp_path)
    assert again.returncode == 1 and "already closed" in again.stderr

    asked = ml("chat", *c, "-t", TASK, "write it", cwd=tmp_path)
    assert asked.returncode == 4
    [item] = json.loads(ml("questions", *c, "--json", cwd=tmp_path).stdout)
    no_reason = ml("reject", *c, item["id"], cwd=tmp_path)
    assert no_reason.returncode == 2  # --reason is required
    rejected = ml("reject", *c, item["id"], "--reason", "not now", cwd=tmp_path)
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    assert "@dev: not written" in rejected.stdout
    assert json.loads(ml("questions", *c, "--json", cwd=tmp_path).stdout) == []


def test_an_unknown_approval_and_a_bad_approval_name_are_clear_errors(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    out = ml("approve", "-C", str(proj), "apv-nothing", cwd=tmp_path)
    assert out.returncode == 1 and "no approval with id 'apv-nothing'" in out.stderr
    write_team(proj, {"dev": {"toolsets": ["fs"], "approval_required": ["write_fiel"]}})
    out = ml("chat", "-C", str(proj), "-t", TASK, "write it", cwd=tmp_path)
    assert out.returncode == 1
    assert ".minds/team.yaml:10: members.dev.approval_required.0: unknown tool or toolset " in (
        out.stderr
    )
    assert "did you mean write_file?" in out.stderr


def test_answer_exits_4_when_the_dialog_then_waits_on_an_approval(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    asked = ml("chat", *c, "-t", TASK, "ask first", cwd=tmp_path)
    assert asked.returncode == 4
    [q] = json.loads(ml("questions", *c, "--json", cwd=tmp_path).stdout)
    assert q["kind"] == "question"
    answered = ml("answer", *c, q["id"], "out.txt", cwd=tmp_path)
    assert answered.returncode == 4, answered.stdout + answered.stderr
    assert "approval apv-" in answered.stdout and "reject with:" in answered.stdout
    [a] = json.loads(ml("questions", *c, "--json", cwd=tmp_path).stdout)
    assert a["kind"] == "approval" and a["tool"] == "write_file"
