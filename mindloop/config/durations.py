"""Durations as people write them in team.yaml: `48h`, `30m`, `1h30m`, `90s`, `2d`, or a
plain number of seconds.

A duration is a number of seconds (a float) once loaded. The text form is parsed strictly:
units in decreasing order, each at most once, no sign, nothing else on the line; every
refusal says what was expected. `format_duration` writes the shortest text that parses
back to the same number of whole seconds.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from mindloop.config.problems import render_value

# Units, largest first: the order they must be written in.
UNITS: dict[str, int] = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_EXPECTED = "a duration such as 48h, 30m, 1h30m, 90s or 2d, or a number of seconds"


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> float:
    """Seconds of `text` (`"1h30m"` -> 5400.0); DurationError if it is not a duration."""
    raw = text.strip()
    pos, total, last = 0, 0.0, -1
    order = list(UNITS)
    if not raw:
        raise DurationError(f"expected {_EXPECTED}, got an empty text")
    while pos < len(raw):
        m = _PART.match(raw, pos)
        if m is None:
            raise DurationError(f"expected {_EXPECTED}, got {text!r}")
        rank = order.index(m.group(2))
        if rank <= last:
            raise DurationError(
                f"{text!r}: write each unit once, largest first (d, h, m, s), e.g. 1h30m"
            )
        last = rank
        total += float(m.group(1)) * UNITS[m.group(2)]
        pos = m.end()
    return total


def format_duration(seconds: float) -> str:
    """The shortest text for a whole number of seconds (`5400` -> `"1h30m"`, `0` -> `"0s"`)."""
    left = round(seconds)
    parts = []
    for unit, size in UNITS.items():
        n, left = divmod(left, size)
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts) or "0s"


def _duration(value: object) -> float:
    """A positive duration in seconds, from a number or a duration text."""
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except DurationError as err:
            raise PydanticCustomError("duration", "{why}", {"why": str(err)}) from None
    else:
        seconds = None
    if seconds is None:
        raise PydanticCustomError(
            "duration",
            "expected {what}, got {got}",
            {"what": _EXPECTED, "got": render_value(value)},
        )
    if not seconds > 0:
        raise PydanticCustomError(
            "duration", "must be longer than 0 seconds, got {got}", {"got": render_value(value)}
        )
    return seconds


# A duration key of the config: loaded as positive seconds.
Duration = Annotated[float, BeforeValidator(_duration)]
