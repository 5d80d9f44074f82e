"""Issue 3 as a user sees it: a team scenario through real `mindloop` processes — the tree
live and nested in `chat`, `dialogs tree`, `questions`, `answer`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.scenario_util import ml, state_env, write_script, write_team

ROOT_REPLY = (
    "Let me get help.\n"
    "!?@reviewer Please review src/app.py for bugs.\n"
    "!?Focus on error handling; reply with a list.\n"
    "\n"
    "!?@human Which database should we target?\n"
    "!?Postgres or SQLite?\n"
)

SCRIPT = [
    {"member": "dev", "match": "go", "response": ROOT_REPLY},
    {
        "member": "reviewer",
        "contains": "Please review src/app.py",
        "response": "Asking the tester.\n!?@tester !tellaskSession perf run the perf suite\n"
        "!?quickly\n",
    },
    {
        "member": "tester",
        "contains": "run the perf suite",
        "response": "!?@tellasker which suite?\n",
    },
    {"member": "reviewer", "contains": "TellaskBack", "response": "the one in bench/"},
    {"member": "tester", "contains": "answered your TellaskBack", "response": "perf ok"},
    {"member": "reviewer", "contains": "perf ok", "response": "- no bugs found"},
    {"member": "dev", "contains": "answer from the human", "response": "All done; SQLite it is."},
]


def test_team_scenario_live_tree_questions_and_answer(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_team(proj, {"dev": {"toolsets": ["*"]}, "reviewer": {"toolsets": ["fs"]}, "tester": {}})
    write_script(proj, SCRIPT)
    assert ml("check", "-C", str(proj), cwd=tmp_path).returncode == 0

    chat = ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "go", cwd=tmp_path)
    assert chat.returncode == 4, chat.stdout + chat.stderr  # waits on the human
    out = chat.stdout.splitlines()
    # Nested live: each side dialog indented under its caller, its tellask lines too.
    assert any(line.startswith("  ↳ side dialog ") and "@reviewer" in line for line in out)
    assert "  @reviewer: Asking the tester." in out
    assert "  !?@tester !tellaskSession perf run the perf suite" in out
    assert any(
        line.startswith("    ↳ side dialog ") and "session tester!perf" in line for line in out
    )
    assert "    @tester: !?@tellasker which suite?" in out
    assert any(line.startswith("    ← answer from @reviewer ") for line in out)
    assert any(line.startswith("  ← reply from @tester ") for line in out)
    assert any(line.startswith("← reply from @reviewer ") for line in out)
    assert "mindloop answer -C" in chat.stdout  # the open question, with how to answer it

    tree = ml("dialogs", "tree", "-C", str(proj), "tasks/example.tsk", cwd=tmp_path).stdout
    rows = tree.splitlines()
    assert len(rows) == 3
    assert rows[0].endswith("root @dev [waiting] (waiting for the human)")
    assert rows[1].startswith("  └─ ") and "side @reviewer [idle]" in rows[1]
    assert rows[2].startswith("    └─ ") and "side @tester [idle] (session tester!perf)" in rows[2]

    [q] = json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    assert (q["headline"], q["body"]) == (
        "@human Which database should we target?",
        "Postgres or SQLite?",
    )
    by_task = ml(
        "questions", "--json", "--task", "./tasks/example.tsk/", "-C", str(proj), cwd=tmp_path
    )
    assert [x["id"] for x in json.loads(by_task.stdout)] == [q["id"]]
    other = ml("questions", "--json", "--task", "tasks/other.tsk", "-C", str(proj), cwd=tmp_path)
    assert json.loads(other.stdout) == []

    unknown = ml("answer", "-C", str(proj), "q4h-nope", "SQLite", cwd=tmp_path)
    assert unknown.returncode == 1 and "no question with id 'q4h-nope'" in unknown.stderr
    ans = ml("answer", "-C", str(proj), q["id"], "SQLite", cwd=tmp_path)
    assert ans.returncode == 0 and "@dev: All done; SQLite it is." in ans.stdout
    again = ml("answer", "-C", str(proj), q["id"], "Postgres", cwd=tmp_path)
    assert again.returncode == 1 and "is answered, not open" in again.stderr
    assert json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout) == []
    root = json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout)[0]
    shown = json.loads(
        ml("dialogs", "show", root["id"], "--json", "-C", str(proj), cwd=tmp_path).stdout
    )
    texts = [m["data"].get("text", "") for m in shown["messages"]]
    assert texts[-1] == "All done; SQLite it is."
    assert [t for t in texts if "answer from the human" in t and "SQLite" in t]


def test_run_watch_drives_an_answer_recorded_by_another_process(tmp_path: Path) -> None:
    import signal
    import time

    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    write_script(
        proj,
        [
            {"match": "go", "response": "!?@human Which?\n!?A or B\n"},
            {"contains": "answer from the human", "response": "B it is"},
        ],
    )
    assert (
        ml("chat", "-C", str(proj), "--task", "tasks/example.tsk", "go", cwd=tmp_path).returncode
        == 4  # waits on the human
    )
    [q] = json.loads(ml("questions", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    watch = subprocess.Popen(
        [sys.executable, "-m", "mindloop.cli.app", "run", "--watch", "-C", str(proj)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(tmp_path), **state_env()},
    )
    try:
        recorded = ml("answer", "--no-drive", "-C", str(proj), q["id"], "B", cwd=tmp_path)
        assert recorded.returncode == 0 and "B it is" not in recorded.stdout
        deadline = time.monotonic() + 60
        last = ""
        while time.monotonic() < deadline and last != "B it is":
            time.sleep(0.3)
            shown = ml("dialogs", "show", q["dialog_id"], "--json", "-C", str(proj), cwd=tmp_path)
            last = json.loads(shown.stdout)["messages"][-1]["data"].get("text", "")
        assert last == "B it is"
    finally:
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=60)
    assert watch.returncode == 130 and "Traceback" not in err
    assert "@dev: B it is" in out
