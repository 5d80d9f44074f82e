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


# Scenario 6 (tokens stay flat): a tool whose result is a realistic few hundred characters,
# so a history that keeps every result grows by that much per step.
PROBE_TOOL = "probe"
PROBE_DESCRIPTION = "Probes the system and returns what it saw (benchmark tool)."
DEFAULT_RESULT_CHARS = 400  # about 100 tokens per result (characters / 4)
_OBSERVATION = (
    "status ok; 3 files changed, 12 tests passed, 0 failed; the build took 4.2 s; "
    "no warnings; next: look at the module the last test touched. "
)


def probe_result_text(n: int, chars: int = DEFAULT_RESULT_CHARS) -> str:
    """The probe's result for call `n`: unique per call, `chars` characters long (at least
    its header)."""
    head = f"probe {n}: "
    body = (_OBSERVATION * (chars // len(_OBSERVATION) + 1))[: max(0, chars - len(head))]
    return head + body


def token_marks(steps: int) -> list[int]:
    """The steps whose input tokens scenario 6 prints: 10, 100 and the last."""
    return [m for m in (10, 100) if m < steps] + [steps]


def estimate_tokens(chars: int) -> int:
    """The mock provider's estimate of input tokens (characters / 4, rounded up), which
    the peers' fake models report too, so the figures compare."""
    return (chars + 3) // 4


# Scenario 7 (loop overhead) on the peers: the same task shape as mindloop's — one PLAN
# call creating N items, then per item one DO call completing it and one CHECK call
# passing it — written the way each framework's users write a plan/do/check loop. The
# scripted model reads the phase from the last user input and calls that phase's tool.
LOOP_PLAN = "PLAN"
LOOP_DO = "DO"
LOOP_CHECK = "CHECK"
LOOP_PROMPT = "You are Dev. Work through the task's items: plan, do, check."


def loop_input(phase: str, item: str | None = None, nodes: int = 0) -> str:
    """The user input that starts one phase call."""
    if phase == LOOP_PLAN:
        return f"{LOOP_PLAN}: split the task into {nodes} items"
    return f"{phase}: item {item}"


def loop_calls(text: str) -> list[tuple[str, dict[str, str]]]:
    """What the scripted model calls for the phase input `text`: (tool, arguments)."""
    phase, _, rest = text.partition(": ")
    if phase == LOOP_PLAN:
        nodes = int(rest.split()[4])
        return [("todo_create", {"title": f"Item {k:04d}"}) for k in range(1, nodes + 1)]
    item = rest.removeprefix("item ")
    if phase == LOOP_DO:
        return [("todo_complete", {"item": item})]
    return [("todo_done", {"item": item})]
