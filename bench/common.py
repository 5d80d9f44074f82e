"""What every benchmark case shares: the scripted tool chain, preloaded history, RSS.

The same workload is given to mindloop and to each peer so the figures compare: a model
that calls one trivial tool `noop(n)` a fixed number of times (the tool answers `ok <n>`)
and then answers, on top of a history of alternating user/assistant messages.
"""

from __future__ import annotations

import resource
import sys

TOOL_NAME = "noop"
TOOL_DESCRIPTION = "Does nothing and returns 'ok <n>' (benchmark tool)."
START_TEXT = "go"
FINAL_TEXT = "All steps are done."
DEFAULT_TOOL_CALLS = 20  # scenario 1: the model calls the tool 20 times, then answers

# Filler for preloaded messages: realistic-looking text of a stable length.
_FILLER = (
    "Discussed the module layout, the failing test and the next change to make; "
    "kept the notes short so the history stays readable for the next step."
)


def tool_result_text(n: int) -> str:
    return f"ok {n}"


def history_texts(count: int) -> list[tuple[str, str]]:
    """`count` messages as (role, text), alternating user/assistant, oldest first."""
    out = []
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        out.append((role, f"[{i}] {role} message. {_FILLER}"))
    return out


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (ru_maxrss: KiB on Linux, B on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)
