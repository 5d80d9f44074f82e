"""A third identical failing call is refused (agent-loop §8.2, L1), in every dialog.

After a call of one tool with the same arguments (compared canonically: the same JSON,
whatever its key order or spacing) failed twice with the same error, the next identical
call does not run: its result is a refusal asking to change something — the arguments,
the approach or the tool. A success of that call, or a different error, resets it.

Cheap by construction: a dialog whose calls succeed pays one truthiness test per call;
arguments are canonicalised and errors digested only when a call fails, or when some
call of the drive is already failing. The record lives in the drive's live view
(`LiveDialog.repeats`), so a new drive starts afresh — at worst one more identical
error before the refusal.

`normalized_digest` is also the loop's evidence digest (agent-loop §8.3): paths, times,
numbers and ids masked, whitespace collapsed, so the same failure hashes the same.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from mindloop.dialogs.policy import Refusal

REPEATED_FAILING_CALL = "REPEATED_FAILING_CALL"

_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    # ISO dates and times, then clock times
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"),
        "<time>",
    ),
    (re.compile(r"\b\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\b"), "<time>"),
    # uuids and long hex ids (hashes, object ids, addresses)
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b(0x[0-9a-f]+|(?=[0-9]*[a-f])[0-9a-f]{7,})\b", re.I), "<id>"),
    # absolute and temporary paths (POSIX and Windows)
    (re.compile(r"(?<![\w.])(/[\w.@+-]+)+/?"), "<path>"),
    (re.compile(r"\b[A-Za-z]:\\[^\s'\"]+"), "<path>"),
    # remaining numbers (durations, pids, line numbers of generated code, counts)
    (re.compile(r"\d+(\.\d+)?"), "<n>"),
)
_SPACE = re.compile(r"\s+")


def normalized(text: str) -> str:
    """`text` with what differs between two runs of the same failure masked."""
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return _SPACE.sub(" ", text).strip()


def normalized_digest(text: str) -> str:
    """sha256 of `normalized(text)`."""
    return hashlib.sha256(normalized(text).encode("utf-8")).hexdigest()


def canonical_args(arguments: str) -> str:
    """A call's arguments in one spelling: JSON with sorted keys and no spacing (the raw
    text, trimmed, when it is not JSON)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments.strip()
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass
class RepeatGuard:
    """Identical failing calls of one dialog's drive."""

    # (tool, canonical arguments) -> (digest of its last error, how many times in a row)
    failing: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)

    def refusal(self, name: str, arguments: str, limit: int) -> Refusal | None:
        """A refusal if this exact call already failed `limit` times the same way."""
        if not self.failing:
            return None
        found = self.failing.get((name, canonical_args(arguments)))
        if found is None or found[1] < limit:
            return None
        return Refusal(
            REPEATED_FAILING_CALL,
            f"{name} with these exact arguments failed {found[1]} times with the same "
            "error; it was not run again. Change something first: the arguments, the "
            "approach, or the tool.",
        )

    def record(self, name: str, arguments: str, text: str, is_error: bool) -> None:
        """Note a call's result (refusals by this guard are not noted)."""
        if not is_error and not self.failing:
            return
        key = (name, canonical_args(arguments))
        if not is_error:
            self.failing.pop(key, None)
            return
        digest = normalized_digest(text)
        last = self.failing.get(key)
        count = last[1] + 1 if last is not None and last[0] == digest else 1
        self.failing[key] = (digest, count)
