"""The text of the store's JSON columns on SQLite: orjson where it says what `json` says.

A step writes a few dozen JSON documents (a workspace node, the loop's state, the step's
messages; ~0.5 KB each) and `json.dumps` costs ~4 µs a document, orjson ~0.4 µs. What is
read back must not change, so orjson writes a document only when its text parses to the
same value `json.dumps`'s would; everything else goes to `json.dumps`, as before:

- orjson refuses dict keys that are not str, ints beyond 64 bits, lone surrogates, and
  types `json` refuses too (dataclasses and datetimes are passed through to that refusal):
  `json.dumps` writes the first three as it always did, and raises for the rest;
- orjson writes NaN and ±Infinity as `null` where `json.dumps` writes `NaN`/`Infinity`
  (read back as floats): a document whose orjson text has a `null` is asked whether it
  holds such a float (pydantic-core's serializer, which writes them as constants) and then
  written by `json.dumps`.

What orjson writes beyond `json` is Enum members of any value type and UUIDs (as their
value and their text): `json.dumps` would have refused those.

The text differs from `json.dumps`'s (no spaces, non-ASCII characters as they are, floats
in the shortest form): nothing compares stored JSON text, and old rows parse as before.
Reading goes through pydantic-core's parser (~2x `json.loads` on a long history), which
keeps big ints and NaN/Infinity like `json.loads`; what it refuses (a lone surrogate's
escape) is parsed by `json.loads`.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pydantic_core

_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def dumps(value: Any) -> str:
    """JSON text of `value` that `loads` (or `json.loads`) reads back as `json.dumps`'s."""
    try:
        out = orjson.dumps(value, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: see the module doc
        return json.dumps(value)
    if b"null" in out and _non_finite(value):
        return json.dumps(value)
    return out.decode()


def _non_finite(value: Any) -> bool:
    """Whether `value` (which orjson wrote) holds a NaN or infinite float (also true when
    a string holds the word: then `json.dumps` writes it, which is never wrong)."""
    try:
        text = pydantic_core.to_json(value, inf_nan_mode="constants")
    except (TypeError, ValueError):
        return True
    return b"NaN" in text or b"Infinity" in text


def loads(text: str | bytes) -> Any:
    """The value of JSON text, as `json.loads` gives it."""
    try:
        return pydantic_core.from_json(text)
    except ValueError:
        return json.loads(text)
