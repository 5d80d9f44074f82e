"""The store's one error type, apart from the modules that raise it so that every dialect
can raise it without importing the store body."""

from __future__ import annotations

from mindloop.errors import MindloopError


class StoreError(MindloopError):
    """The state database cannot be used as asked: damaged, foreign, newer, read-only.
    The text is one line that names the file (or database) and what is wrong with it."""
