"""Every command that lists or shows has `--json` (stdout is then one JSON document and
nothing else), and the commands that drive dialogs exit as DESIGN §8.6 says: 0 done,
1 error, 3 step limit, 4 waiting on the human — `chat`, `run` and `answer` alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.scenario_util import ml, write_script

TASK = "tasks/example.tsk"


def _json(*args: str, cwd: Path, code: int = 0) -> Any:
    out = ml(*args, "--json", cwd=cwd)
    assert out.returncode == code, out.stdout[-2000:] + out.stderr
    return json.loads(out.stdout)  # the whole of stdout is the document


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(
        proj,
        [
            {"match": "hello", "response": "hi there"},
            {"match": "ask me", "response": "!?@human Which colour?\n!?Red or blue?\n"},
            {"match": "ask twice", "response": "!?@human First?\n"},
            {
                "contains": "answer from the human",
                "context_contains": ["ask twice"],
                "response": "!?@human Second?\n",
            },
            {"contains": "answer from the human", "response": "Blue it is."},
        ],
    )
    return proj


def test_chat_and_run_summaries_and_their_exit_codes(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    done = _json("chat", *c, "-t", TASK, "hello", cwd=tmp_path)
    assert done["outcome"] == "done" and done["exit_code"] == 0 and done["answer"] == "hi there"
    assert done["root_id"] and done["report"]["tree"][0]["id"] == done["root_id"]

    waiting = _json("chat", *c, "-t", TASK, "ask me", cwd=tmp_path, code=4)
    assert waiting["outcome"] == "waiting" and waiting["exit_code"] == 4
    [q] = waiting["report"]["questions"]
    assert q["headline"] == "@human Which colour?"
    human = ml("chat", *c, "-t", TASK, "ask me", cwd=tmp_path)
    assert human.returncode == 4 and "answer with: mindloop answer" in human.stdout

    assert q["id"] in {x["id"] for x in _json("questions", *c, cwd=tmp_path)}
    ran = _json("run", *c, cwd=tmp_path, code=4)  # nothing to drive; questions still wait
    assert ran["outcome"] == "waiting" and len(ran["report"]["questions"]) == 2
    assert ml("run", *c, cwd=tmp_path).returncode == 4

    answered = _json("answer", *c, q["id"], "blue", cwd=tmp_path)
    assert answered["outcome"] == "done" and answered["answer"] == "Blue it is."
    assert answered["answered"]["question_id"] == q["id"]


def test_answer_exits_4_when_the_tree_asks_again(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    first = _json("chat", *c, "-t", TASK, "ask twice", cwd=tmp_path, code=4)
    [q] = first["report"]["questions"]
    again = ml("answer", *c, q["id"], "one", cwd=tmp_path)
    assert again.returncode == 4 and "Second?" in again.stdout


def test_tasks_tree_and_check_in_json(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    c = ("-C", str(proj))
    [task] = _json("tasks", *c, cwd=tmp_path)
    assert task["path"] == TASK and task["sections"] == ["goals", "constraints", "progress"]
    assert task["updated_by"] == "human/unknown"  # scaffolded files, no audit record yet
    root = _json("chat", *c, "-t", TASK, "hello", cwd=tmp_path)["root_id"]
    [[node]] = _json("dialogs", "tree", *c, TASK, cwd=tmp_path)
    assert node["dialog"]["id"] == root and node["depth"] == 0 and node["asks_human"] is False

    ok = _json("check", *c, cwd=tmp_path)
    assert ok == {"ok": True, "problems": [], "warnings": [], "servers": []}  # no mcp.yaml
    team = proj / ".minds" / "team.yaml"
    data = yaml.safe_load(team.read_text())
    data["members"]["dev"]["colour"] = "blue"
    team.write_text(yaml.safe_dump(data, sort_keys=False))
    bad = _json("check", *c, cwd=tmp_path, code=1)
    [problem] = [p for p in bad["problems"] if p.get("path") == "members.dev.colour"]
    assert problem["file"] == ".minds/team.yaml" and isinstance(problem["line"], int)
    assert problem["text"].startswith(f".minds/team.yaml:{problem['line']}: members.dev.colour")


def test_json_is_refused_where_it_cannot_be_given(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    out = ml("run", "--watch", "--json", "-C", str(proj), cwd=tmp_path)
    assert out.returncode == 1 and "--watch never ends" in out.stderr
