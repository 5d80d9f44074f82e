"""Values a module keeps beside a store, per key, between its reads.

The loop keeps a few things per task or root dialog that only this process built and
that stay valid as long as their own checks say (a task's rendered tree, the rows a
SELF_IMPROVE pass read, the ref a CHECK entry showed). They belong to one store (a
process may open several) and go with it; per store at most `kept` keys are held, the
one used least recently going first, so a process that runs many tasks holds no more
than one that ran a few.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Generic, TypeVar

from mindloop.store.store import Store

V = TypeVar("V")


class PerStore(Generic[V]):
    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._maps: weakref.WeakKeyDictionary[Store, OrderedDict[str, V]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, store: Store, key: str) -> V | None:
        held = self._maps.get(store)
        found = held.get(key) if held is not None else None
        if found is not None:
            held.move_to_end(key)  # type: ignore[union-attr]
        return found

    def put(self, store: Store, key: str, value: V) -> None:
        held = self._maps.get(store)
        if held is None:
            held = self._maps[store] = OrderedDict()
        held[key] = value
        held.move_to_end(key)
        if len(held) > self.kept:
            held.popitem(last=False)
