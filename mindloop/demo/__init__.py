"""`mindloop demo`: one task carried through the whole work loop, offline, on the
scripted mock provider.

This package is the scenario's data: the team, the mock script, the prompt, the human's
answer, and the rtws they make (`prepare_demo_rtws`). `mindloop demo` runs it through the
use-case layer as `mindloop run TASK -m …` would (see `script.py` for the story: a
question answered, four nodes with dependencies, one dispatched to a teammate, a failed
check adjusted with an FBR round, a BENCH node run last, SELF_IMPROVE). Everything stays
on disk for the other commands to inspect.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from mindloop.demo.script import DEMO_PROMPT, DEMO_SCRIPT, DEMO_TEAM, HUMAN_ANSWER
from mindloop.errors import MindloopError
from mindloop.rtws import init_rtws
from mindloop.rtws.scaffold import MOCK_MODEL, dump_yaml

DEMO_TASK = "tasks/example.tsk"

__all__ = [
    "DEMO_PROMPT",
    "DEMO_TASK",
    "HUMAN_ANSWER",
    "prepare_demo_rtws",
]


def prepare_demo_rtws(directory: Path | None) -> Path:
    """A fresh rtws with the demo's team and script: in `directory` (which must be new or
    empty) or in a new temporary directory. Returns where."""
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="mindloop-demo-"))
    elif directory.exists() and any(directory.iterdir()):
        raise MindloopError(f"{directory} is not empty; the demo needs a fresh directory")
    init_rtws(directory, provider="mock")
    minds = directory / ".minds"
    (minds / "team.yaml").write_text(dump_yaml(DEMO_TEAM), "utf-8")
    (minds / "mock" / f"{MOCK_MODEL}.yaml").write_text(dump_yaml(DEMO_SCRIPT), "utf-8")
    persona = minds / "team" / "reviewer" / "persona.md"
    persona.parent.mkdir(parents=True, exist_ok=True)
    persona.write_text("You are Reviewer: precise, brief, kind.\n", "utf-8")
    return directory
