"""Durations in config files: `30s`, `10m`, `48h`, `7d`, or a plain number of seconds.

The loop's timeouts span seconds to days (a retry backoff of 1 s, a reminder every 72 h);
a person reads `72h` at once and `259200` not at all. Validated values are seconds
(`float`), so code never converts units. A separate module so that every `loop:` area
model can use it without importing the composition in `loop.py`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from mindloop.config.problems import render_value

UNIT_SECONDS: dict[str, float] = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$"
_DURATION = re.compile(_PATTERN)


def parse_duration(value: Any) -> float:
    """Seconds from a duration as written; a clear error for anything else (bools,
    negative numbers, unknown units)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, str):
        found = _DURATION.match(value)
        if found:
            return float(found.group(1)) * UNIT_SECONDS[found.group(2)]
    raise PydanticCustomError(
        "duration",
        "must be a duration such as 30s, 10m, 48h or 7d (or a number of seconds), got {got}",
        {"got": render_value(value)},
    )


def format_duration(seconds: float) -> str:
    """The largest unit that divides `seconds` evenly (`172800` -> `48h`)."""
    for unit in ("d", "h", "m"):
        size = UNIT_SECONDS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": _PATTERN},
            ],
            "description": "A duration: 30s, 10m, 48h, 7d, or a number of seconds.",
        }
    ),
]
