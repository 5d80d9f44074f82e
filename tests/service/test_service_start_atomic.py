"""A new root dialog and its first message commit together (issue 10 item 8).

A real `mindloop chat` process is SIGKILLed at the instant its first message is written,
i.e. after the root dialog's row went to the store: with create-and-post in one
transaction the kill leaves no trace at all, never a root without its message (which
`run` would ignore, losing what the user said).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from mindloop.store import Store
from tests.scenario_util import ml

# The child: `mindloop chat …` whose process dies the moment the user's message is written.
_KILLED_AT_POST = """
import os, signal, sys
from mindloop.store import Store

original = Store.append_message

def append_message(self, dialog_id, kind, *args, **kwargs):
    if kind == "user":
        os.kill(os.getpid(), signal.SIGKILL)
    return original(self, dialog_id, kind, *args, **kwargs)

Store.append_message = append_message
from mindloop.cli.app import main
main(sys.argv[1:])
"""


def test_a_kill_between_creating_a_root_and_posting_leaves_no_empty_root(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    assert ml("init", str(proj), cwd=tmp_path).returncode == 0
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILLED_AT_POST,
            "chat",
            "-C",
            str(proj),
            "-t",
            "tasks/example.tsk",
            "list the files and summarise README.md",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    store = Store.for_rtws(proj)
    try:
        empty_roots = [d.id for d in store.list_dialogs() if store.count_messages(d.id) == 0]
        assert empty_roots == []
        assert store.list_dialogs() == []  # the uncommitted root went with the process
    finally:
        store.close()
    # The user simply says it again; nothing half-made is in the way.
    again = ml(
        "chat",
        "-C",
        str(proj),
        "-t",
        "tasks/example.tsk",
        "list the files and summarise README.md",
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    [dialog] = json.loads(ml("dialogs", "list", "--json", "-C", str(proj), cwd=tmp_path).stdout)
    assert dialog["messages"] > 1
