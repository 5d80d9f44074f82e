"""A process's first runtime moves what is alive by then to the collector's permanent
generation (full collections of a long drive then skip it); later runtimes change nothing.
Run in a fresh interpreter: the test process has built runtimes before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import gc, sys
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.rtws import init_rtws
root = sys.argv[1]
init_rtws(root, provider="mock")
before = gc.get_freeze_count()
first = DialogRuntime(root)
frozen = gc.get_freeze_count()
second = DialogRuntime(root)
print(before, frozen, gc.get_freeze_count())
first.store.close(); second.store.close()
"""


def test_the_first_runtime_freezes_the_start_heap_once(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "proj")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    before, frozen, after = (int(x) for x in out)
    assert before == 0
    assert frozen > 10_000  # the modules, schemas and config of the start
    # the second runtime froze nothing more (the count may drift by a few objects the
    # interpreter re-tracks; a second freeze would add the thousands it allocated)
    assert after - frozen < 100
