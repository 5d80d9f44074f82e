"""Unique tokens without a system call each: a workspace write's stamp (`repo.write`), a
projection file's temp name (`projection._replace`).

64 random bits are drawn once per process, then a counter follows them: as unique as 128
random bits a token (no two processes share a prefix but by a 2^-64 chance; within one,
the counter never repeats), where `os.urandom` per token is a `getrandom` call (a node's
writes make about five, a run's files one each). A forked child draws its own prefix, so
it never repeats its parent's next tokens.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator


def _source() -> Iterator[str]:
    prefix = os.urandom(8).hex()
    return (f"{prefix}{n:016x}" for n in itertools.count())


_tokens = _source()


def token() -> str:
    """32 hex digits, never the same twice."""
    return next(_tokens)


def _reseed() -> None:
    global _tokens
    _tokens = _source()


os.register_at_fork(after_in_child=_reseed)
