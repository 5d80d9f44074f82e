"""`mindloop demo` runs an FBR round of 3, and `mindloop dialogs tree` / `dialogs show`
present it as such: three tool-less FBR side dialogs of the asking member, three marked
FBR answers in the caller's transcript, before the caller goes on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from mindloop.dialogs.formats import FBR_RESPONSE_HEADER


def ml(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mindloop.cli.app", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(home)},
    )


def test_demo_fbr_round_of_three_is_shown_as_fbr(tmp_path: Path) -> None:
    rtws = tmp_path / "demo"
    demo = ml("demo", "--dir", str(rtws), home=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert demo.stdout.count("FBR side dialog (tool-less)") == 3

    tree = ml("dialogs", "tree", "-C", str(rtws), "tasks/example.tsk", home=tmp_path)
    assert tree.returncode == 0, tree.stderr
    root = re.search(r"^(\S+) root @dev", tree.stdout, re.M)
    assert root is not None, tree.stdout
    fbr_lines = [line for line in tree.stdout.splitlines() if "FBR side (tool-less)" in line]
    assert len(fbr_lines) == 3 and all("@dev" in line for line in fbr_lines)

    show = ml("dialogs", "show", "-C", str(rtws), root.group(1), home=tmp_path)
    assert show.returncode == 0, show.stderr
    transcript = show.stdout
    # the answers as delivered (SELF_IMPROVE's review quotes them again later, in its input)
    reply = f"\nreply: {FBR_RESPONSE_HEADER}"
    assert transcript.count(reply) == 3
    # The caller speaks again only after the third FBR answer.
    first_fbr, last_fbr = (transcript.index(reply), transcript.rindex(reply))
    assert "\nassistant:" not in transcript[first_fbr:last_fbr]
    assert "\nassistant:" in transcript[last_fbr:]

    side = fbr_lines[0].split("└─", 1)[1].split()[0]
    sample = ml("dialogs", "show", "-C", str(rtws), side, home=tmp_path)
    assert sample.returncode == 0, sample.stderr
    assert "· fbr · @dev ·" in sample.stdout
    assert "# @self Fresh Boots Reasoning (FBR) request" in sample.stdout
    assert "Use only this text as context." in sample.stdout
    assert "⚙" not in sample.stdout and "tool_call" not in sample.stdout
