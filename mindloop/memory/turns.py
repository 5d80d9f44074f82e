"""A dialog's messages as turns, and the two sections made of them.

A turn is the unit history is kept or dropped by, so a tool call never loses its result:
a user message on its own, or an assistant message with the tool results that follow it.
The last step — the newest turn, when it is an assistant's tool calls with all their
results — is the P0 section "tool results of the last step"; the K turns before it are
the "recent history" section.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeGuard

from mindloop.memory.sections import Part, Section, SectionKind
from mindloop.providers.base import AssistantMessage, ChatMessage, ToolResultMessage, UserMessage


class Turn(NamedTuple):  # (a tuple: a step builds a handful, cheaply)
    start: int  # index of its first message in the list it came from
    messages: tuple[ChatMessage, ...]

    @property
    def end(self) -> int:
        return self.start + len(self.messages)

    @property
    def is_step(self) -> bool:
        """An assistant's tool calls, each answered by a result in this turn."""
        first = self.messages[0]
        if not isinstance(first, AssistantMessage) or not first.tool_calls:
            return False
        answered = {m.call_id for m in self.messages[1:] if _is_result(m)}
        return all(c.id in answered for c in first.tool_calls)


_NOT_RESULTS = (UserMessage, AssistantMessage)


def _is_result(msg: ChatMessage) -> TypeGuard[ToolResultMessage]:
    """`isinstance(msg, ToolResultMessage)`, the exact message types told apart without
    the models' ABC check (a turn split looks at every message of a long dialog)."""
    kind = type(msg)
    return kind is ToolResultMessage or (
        kind not in _NOT_RESULTS and isinstance(msg, ToolResultMessage)
    )


def split_turns(messages: Sequence[ChatMessage], start: int = 0) -> list[Turn]:
    """`messages[start:]` as turns (a result with no call before it joins the turn before,
    or stands alone)."""
    out: list[Turn] = []
    current: list[ChatMessage] = []
    first = start
    for i in range(start, len(messages)):
        msg = messages[i]
        if current and _is_result(msg):
            current.append(msg)
            continue
        if current:
            out.append(Turn(first, tuple(current)))
        current, first = [msg], i
    if current:
        out.append(Turn(first, tuple(current)))
    return out


def tail_turns(
    messages: Sequence[ChatMessage], n: int, start: int = 0, skip: int | None = None
) -> list[Turn]:
    """The last `n` turns of `messages[start:]`, found from the end: what a step costs does
    not grow with the dialog's length. The message at `skip`, a turn of its own, is left
    out (a section shows it instead: the loop's phase input)."""
    out: list[Turn] = []
    end = len(messages)
    i = end - 1
    while i >= start and len(out) < n:
        kind = type(messages[i])  # `_is_result`, inline: the exact types first
        if i == start or (
            kind is not ToolResultMessage
            and (kind in _NOT_RESULTS or not isinstance(messages[i], ToolResultMessage))
        ):
            if i != skip or end != i + 1:
                out.append(Turn(i, tuple(messages[i:end])))
            end = i
        i -= 1
    out.reverse()
    return out


def turn_part(turn: Turn, prefix: str = "turn") -> Part:
    return Part(id=f"{prefix}-{turn.start}", messages=turn.messages, at=turn.start)


class TurnParts:
    """The parts of the turns a dialog's last request showed, kept for its next: a turn
    made of the very same messages (a history's messages are appended, never changed in
    place) gets the same part back, so a step builds parts only for its new turns."""

    __slots__ = ("_held", "_shown")

    def __init__(self) -> None:
        self._held: dict[tuple[str, int], Part] = {}
        self._shown: dict[tuple[str, int], Part] = {}

    def parts(self, turns: Sequence[Turn], prefix: str) -> tuple[Part, ...]:
        out = []
        for turn in turns:
            key = (prefix, turn.start)
            held = self._held.get(key)
            # a tuple compares its items by identity first: the same messages cost no
            # model comparison
            if held is None or held.messages != turn.messages:
                held = turn_part(turn, prefix)
            out.append(held)
            self._shown[key] = held
        return tuple(out)

    def keep(self) -> None:
        """Keep what this request showed (only that) for the next."""
        self._held, self._shown = self._shown, {}


def history_sections(
    messages: Sequence[ChatMessage],
    turns: int,
    start: int = 0,
    fold: Callable[[Turn], Turn] | None = None,
    skip: int | None = None,
    kept: TurnParts | None = None,
) -> tuple[Section, Section]:
    """(recent history: the `turns` turns before the last step, the last step's calls
    and results) of `messages[start:]` without the message at `skip` (see `tail_turns`),
    each turn passed through `fold` if given (a compaction's view of old messages);
    `kept`: the parts of the dialog's previous call, reused where a turn is unchanged."""
    all_turns = tail_turns(messages, turns + 1, start, skip)
    if fold is not None:
        all_turns = [fold(t) for t in all_turns]
    last: list[Turn] = []
    if all_turns and all_turns[-1].is_step:
        last = [all_turns.pop()]
    # fewer than `turns` may exist: a negative start would keep only the newest few
    recent = all_turns[max(0, len(all_turns) - turns) :] if turns > 0 else []
    if kept is None:
        history = tuple(turn_part(t) for t in recent)
        step = tuple(turn_part(t, "step") for t in last)
    else:
        history, step = kept.parts(recent, "turn"), kept.parts(last, "step")
        kept.keep()
    return (
        Section(kind=SectionKind.RECENT_HISTORY, parts=history),
        Section(kind=SectionKind.TOOL_RESULTS, parts=step),
    )
