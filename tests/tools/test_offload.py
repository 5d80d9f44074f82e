"""`run_blocking`: a call runs in a worker thread until it is known to be quick, then
inline; a slow run sends the next one back to a thread."""

from __future__ import annotations

import asyncio
import threading
import time

from mindloop.tools.offload import INLINE_S, last_duration, run_blocking


def _where(pause: float = 0.0) -> int:
    time.sleep(pause)
    return threading.get_ident()


def test_a_quick_call_runs_inline_after_a_first_run_in_a_thread() -> None:
    key = ("quick", object())

    async def main() -> list[int]:
        return [await run_blocking(key, _where) for _ in range(3)]

    loop_thread = threading.get_ident()
    first, second, third = asyncio.run(main())
    assert first != loop_thread  # nothing known yet: off the loop
    assert second == third == loop_thread
    took = last_duration(key)
    assert took is not None and took < INLINE_S


def test_a_slow_run_sends_the_next_call_to_a_thread_until_it_is_quick_again() -> None:
    key = ("slow", object())
    pauses = [0.0, INLINE_S * 3, 0.0, 0.0]

    async def main() -> list[int]:
        return [await run_blocking(key, lambda p=p: _where(p)) for p in pauses]

    loop_thread = threading.get_ident()
    got = asyncio.run(main())
    assert got[1] == loop_thread  # the first run was quick: inline (and slow this time)
    assert got[2] != loop_thread  # after a slow run: a thread
    assert got[3] == loop_thread  # that one was quick: inline again


def test_an_error_propagates_and_the_duration_is_still_recorded() -> None:
    key = ("error", object())

    def boom() -> int:
        raise ValueError("no")

    async def main() -> None:
        await run_blocking(key, boom)

    try:
        asyncio.run(main())
    except ValueError as exc:
        assert str(exc) == "no"
    else:
        raise AssertionError("the error was swallowed")
    assert last_duration(key) is not None
