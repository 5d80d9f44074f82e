"""The step boundary the engine puts around its two outside effects.

A drive's model call and each of its tool calls go through `Steps.run(kind, key, effect,
codec)`: `key` names the effect by what it is (the dialog, its course and the last message
its request was built from; a tool call's call key), not by its position in a run, so a
drive resumed from the store finds a completed effect again even though the resumed run
does not repeat the earlier one step by step. The codec turns the effect's result into
JSON and back (a recorded result is JSON, never a pickle).

The engine holds `None` when no durable backend is set (the default, SQLite or not) and
then calls the effect directly: the boundary costs nothing where it is not used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How one kind of effect's result is recorded (JSON) and read back."""

    encode: Callable[[T], JsonObject]
    decode: Callable[[JsonObject], T]


class Steps(Protocol):
    """Runs an effect once: a result recorded under `key` is returned without running it
    again."""

    async def run(
        self, kind: str, key: str, effect: Callable[[], Awaitable[T]], codec: Codec[T]
    ) -> T: ...

    def recorded(self, kind: str, key: str) -> JsonObject | None:
        """The result recorded under `key` (JSON) without running anything, or None."""
        ...


class InlineSteps:
    """No durable backend: every effect runs, nothing is recorded (for tests and tools
    that want a `Steps` object; the engine itself uses None)."""

    async def run(
        self, kind: str, key: str, effect: Callable[[], Awaitable[T]], codec: Codec[T]
    ) -> T:
        return await effect()

    def recorded(self, kind: str, key: str) -> JsonObject | None:
        return None
