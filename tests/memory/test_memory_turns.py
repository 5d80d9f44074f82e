"""A dialog's messages as turns: the recent-history and last-step sections keep every turn
they should (agent-loop §7.1: the last K turns, the last step on its own)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.memory import history_sections, split_turns
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def _turn(i: int, step: bool) -> list[ChatMessage]:
    if not step:
        return [UserMessage(text=f"user {i}")]
    call = ToolCall(id=f"c{i}", name="read_file", arguments="{}")
    return [
        AssistantMessage(text=f"step {i}", tool_calls=[call]),
        ToolResultMessage(call_id=call.id, name=call.name, content=f"result {i}"),
    ]


@settings(max_examples=200, deadline=None)
@given(
    kinds=st.lists(st.booleans(), min_size=1, max_size=8),
    k=st.integers(1, 8),
    start=st.integers(0, 3),
)
def test_history_keeps_the_last_k_turns_however_few_there_are(
    kinds: list[bool], k: int, start: int
) -> None:
    """With n turns after `start`, the sections hold the newest min(n, K) turns before the
    last step (and the step itself when the newest turn is one), none lost, none twice."""
    msgs: list[ChatMessage] = []
    for i, step in enumerate(kinds):
        msgs += _turn(i, step)
    start = min(start, len(split_turns(msgs)) - 1)
    begin = split_turns(msgs)[start].start
    turns = split_turns(msgs, begin)
    history, last = history_sections(msgs, k, begin)
    has_step = kinds[-1]
    expected_last = turns[-1:] if has_step else []
    before = turns[:-1] if has_step else turns
    expected_recent = before[max(0, len(before) - k) :]
    assert [p.messages for p in last.parts] == [t.messages for t in expected_last]
    assert [p.messages for p in history.parts] == [t.messages for t in expected_recent]


def test_four_turns_and_k_six_keep_all_four() -> None:
    msgs: list[ChatMessage] = [UserMessage(text="u0")]
    for i in range(1, 4):
        msgs += _turn(i, step=False) if i % 2 == 0 else [AssistantMessage(text=f"a{i}")]
    history, last = history_sections(msgs, 6)
    assert len(history.parts) == 4 and not last.parts


@settings(max_examples=200, deadline=None)
@given(
    kinds=st.lists(st.booleans(), min_size=1, max_size=8),
    k=st.integers(1, 8),
    pick=st.integers(0, 7),
)
def test_a_skipped_message_leaves_the_history_and_the_turns_before_it_move_up(
    kinds: list[bool], k: int, pick: int
) -> None:
    """The loop's phase input is a section of its own: its message is left out of the
    history, and the K turns kept are the K newest others."""
    msgs: list[ChatMessage] = []
    for i, step in enumerate(kinds):
        msgs += _turn(i, step)
    users = [t for t in split_turns(msgs) if isinstance(t.messages[0], UserMessage)]
    skip = users[pick % len(users)].start if users else None
    turns = [t for t in split_turns(msgs) if t.start != skip]
    history, last = history_sections(msgs, k, skip=skip)
    has_step = bool(turns) and turns[-1].is_step  # the newest turn left, once it is out
    expected_last = turns[-1:] if has_step else []
    before = turns[:-1] if has_step else turns
    assert [p.messages for p in last.parts] == [t.messages for t in expected_last]
    assert [p.messages for p in history.parts] == [
        t.messages for t in before[max(0, len(before) - k) :]
    ]
