"""What this process keeps per store (the workspace values read and written, the
projection files staged), weakly keyed by the store.

A `weakref.WeakKeyDictionary` look-up makes a weak reference of its key each time; a work
loop reaches these tables about twenty times a node, always on the same store. So the
store used last is remembered (weakly) with its entry and found by identity.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from mindloop.store import Store

T = TypeVar("T")


class PerStore(Generic[T]):
    """A `T` per store, made by `make` on first use, dropped with the store."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._by: weakref.WeakKeyDictionary[Store, T] = weakref.WeakKeyDictionary()
        self._last: tuple[weakref.ref[Store], T] | None = None

    def of(self, store: Store) -> T:
        last = self._last
        if last is not None and last[0]() is store:
            return last[1]
        found = self._by.get(store)
        if found is None:
            found = self._by[store] = self._make()
        self._last = (weakref.ref(store), found)
        return found

    def get(self, store: Store) -> T | None:
        """The store's entry if it has one (none is made)."""
        last = self._last
        if last is not None and last[0]() is store:
            return last[1]
        return self._by.get(store)

    def items(self) -> Iterator[tuple[Store, T]]:
        return iter(list(self._by.items()))
