"""The event bus: what is published while it holds is kept, in order, and delivered
only when the holder publishes it; afterwards publishing delivers again."""

from __future__ import annotations

import pytest

from mindloop.events.bus import EventBus
from mindloop.events.types import Event, NoteAdded


def _note(text: str) -> NoteAdded:
    return NoteAdded(dialog_id="d1", text=text)


def test_a_holding_bus_keeps_events_until_they_are_published() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    with bus.holding() as held:
        bus.publish(_note("a"))
        bus.publish(_note("b"))
        assert seen == []
    assert [e.text for e in held] == ["a", "b"]  # type: ignore[attr-defined]
    bus.publish(_note("c"))
    assert [e.text for e in seen] == ["c"]  # type: ignore[attr-defined]


def test_a_block_that_raises_still_lets_the_bus_deliver_again() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    with pytest.raises(RuntimeError), bus.holding():
        bus.publish(_note("lost with the rollback"))
        raise RuntimeError("rolled back")
    bus.publish(_note("after"))
    assert [e.text for e in seen] == ["after"]  # type: ignore[attr-defined]
