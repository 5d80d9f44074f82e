"""`mindloop self history` and `mindloop self revert SEQ`, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from mindloop.config.loop_self_md import SelfMdConfig
from mindloop.toolsets import self_md as sm
from mindloop.toolsets import self_md_doc as doc
from mindloop.toolsets.self_improve import patch_self_md
from tests.scenario_util import ml

START = "## Habits\nRead first.\n"


def _patch(rtws: Path, n: int, section: str, content: str) -> None:
    current = sm.read_text(sm.self_md_path(rtws, "dev"))
    req = sm.PatchRequest(
        section=section,
        op="append",
        content=content,
        base_sha256=doc.sha256_hex(current),
        rationale=f"lesson {n}",
        evidence_refs=(),
        key=f"{n:064x}",
    )
    assert patch_self_md(rtws, "dev", req, SelfMdConfig()).ok


def test_history_and_revert(rtws: Path) -> None:
    path = sm.self_md_path(rtws, "dev")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(START)
    done = ml("self", "history", "-C", str(rtws))
    assert done.returncode == 0 and "no changes to .minds/team/dev/self.md" in done.stdout
    _patch(rtws, 1, "Habits", "Run the tests.")
    _patch(rtws, 2, "Pitfalls", "Flaky network.")

    done = ml("self", "history", "-C", str(rtws))
    assert done.returncode == 0, done.stderr
    assert "append 'Habits'" in done.stdout and "lesson 2" in done.stdout

    done = ml("self", "revert", "1", "-C", str(rtws))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "reverted #1 of .minds/team/dev/self.md as #3"
    assert path.read_text() == START + "\n## Pitfalls\nFlaky network.\n"

    done = ml("self", "history", "--json", "-C", str(rtws))
    entries = json.loads(done.stdout)
    assert [(e["seq"], e["op"], e["reverted_by"], e["by"]) for e in entries] == [
        (1, "append", 3, "dev"),
        (2, "append", None, "dev"),
        (3, "revert", None, "human"),
    ]
    assert "prev_content" not in entries[0]

    done = ml("self", "revert", "9", "-C", str(rtws))
    assert done.returncode == 1 and "error: no change #9" in done.stderr
    done = ml("self", "history", "--member", "nobody", "-C", str(rtws))
    assert done.returncode == 1 and "unknown member 'nobody'" in done.stderr
