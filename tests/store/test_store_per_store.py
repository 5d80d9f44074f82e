"""`PerStore`: values kept per store and key, at most `kept` per store, the one used
least recently going first; another store has its own."""

from __future__ import annotations

from pathlib import Path

from mindloop.store.per_store import PerStore
from tests.store.stores import open_store


def test_at_most_kept_values_per_store_the_least_recently_used_going_first(
    tmp_path: Path,
) -> None:
    a, b = open_store(tmp_path / "a.sqlite", "sqlite"), open_store(tmp_path / "b.sqlite", "sqlite")
    try:
        kept: PerStore[int] = PerStore(2)
        kept.put(a, "x", 1)
        kept.put(a, "y", 2)
        assert kept.get(a, "x") == 1  # used: now the most recent
        kept.put(a, "z", 3)
        assert (kept.get(a, "x"), kept.get(a, "y"), kept.get(a, "z")) == (1, None, 3)
        assert kept.get(b, "x") is None  # another store's values are its own
        kept.put(b, "x", 9)
        assert (kept.get(a, "x"), kept.get(b, "x")) == (1, 9)
    finally:
        a.close()
        b.close()
