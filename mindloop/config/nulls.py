"""Explicit `null`s in config files: refused wherever null is not a value.

The as-written models type their keys `X | None = None` so that a key may be left out:
the None is "not written", and the resolved config fills in the default. pydantic cannot
tell that apart from a user writing `fbr-effort: null` (or `fbr-effort:` with nothing
after it), so it accepted the null and the default quietly replaced it. That hides a
mistake (seed 002: a non-integer `fbr-effort` is an error), so this walk runs beside
validation over the data as written and names each such key (file:line via the caller).

The rule, read from the models (no list of keys to keep in step):
- a model field: null is refused when its type admits None (Optional, or `Any`); a field
  whose type does not admit None is left to pydantic, which already rejects it;
- a mapping value or list item is nullable exactly when its type admits None —
  `members: {alice: }` is a member with no keys of its own.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from mindloop.config.problems import KeyPath, field_keys

NULL_MESSAGE = "must not be null: write a value, or leave the key out to get its default"


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _admits_none(annotation: Any) -> bool:
    annotation = _unwrap(annotation)
    if annotation is Any or annotation is None or annotation is type(None):
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_admits_none(arg) for arg in get_args(annotation))
    return False


def null_keys(model: type[BaseModel], data: Any) -> list[KeyPath]:
    """Key paths (relative to `data`) where `data` writes null for a key of `model`, at
    any depth, that may be left out but is not nullable. Unknown keys and values of the
    wrong shape are skipped: validation reports those."""
    found: list[KeyPath] = []
    _model(model, data, (), found)
    return found


def _model(model: type[BaseModel], data: Any, path: KeyPath, found: list[KeyPath]) -> None:
    if not isinstance(data, dict):
        return
    keys = field_keys(model)
    for key, value in data.items():
        name = keys.get(str(key))
        if name is None:
            continue
        annotation = model.model_fields[name].annotation
        if value is None:
            if _admits_none(annotation):
                found.append((*path, key))
            continue
        _value(annotation, value, (*path, key), found)


def _value(annotation: Any, value: Any, path: KeyPath, found: list[KeyPath]) -> None:
    """Descend into `value` as typed by `annotation` (the branch of a union that fits)."""
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        _model(annotation, value, path, found)
        return
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (Union, types.UnionType):
        for arg in args:
            if _fits(arg, value):
                _value(arg, value, path, found)
                return
    elif origin is dict and isinstance(value, dict) and len(args) == 2:
        for key, item in value.items():
            if item is not None:
                _value(args[1], item, (*path, key), found)
    elif origin is list and isinstance(value, list) and args:
        for i, item in enumerate(value):
            if item is not None:
                _value(args[0], item, (*path, i), found)


def _fits(annotation: Any, value: Any) -> bool:
    """Whether a union branch has the shape of `value` (only containers matter here)."""
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return isinstance(value, dict)
    origin = get_origin(annotation)
    if origin is dict:
        return isinstance(value, dict)
    if origin is list:
        return isinstance(value, list)
    return False
