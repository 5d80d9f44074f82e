"""What compiled sections cost (`memory/render.py`): message parts' counts kept by the
part (`MessageCounts`) are the counts of their messages as they are now."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.memory import CalibratedCounter, CharCounter
from mindloop.memory.render import MessageCounts, part_cost, part_costs
from mindloop.memory.sections import Part, SectionKind
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

_TEXT = st.text(alphabet=st.sampled_from(["a", " ", "\n", "节", "{", '"']), max_size=90)
_CALL = st.builds(ToolCall, id=st.sampled_from(["c1", "c2"]), name=_TEXT, arguments=_TEXT)
_MESSAGE: st.SearchStrategy[ChatMessage] = st.one_of(
    st.builds(UserMessage, text=_TEXT),
    st.builds(AssistantMessage, text=_TEXT, tool_calls=st.lists(_CALL, max_size=3)),
    st.builds(ToolResultMessage, call_id=st.just("c1"), name=_TEXT, content=_TEXT),
)
_PART = st.builds(
    lambda i, msgs: Part(id=f"turn-{i}", messages=tuple(msgs), at=i),
    st.integers(0, 50),
    st.lists(_MESSAGE, min_size=1, max_size=4),
)


class _Words:
    """A counter that does not count by length (a tokenizer's stand-in)."""

    def count(self, text: str) -> int:
        return len(text.split())


@settings(max_examples=120, deadline=None)
@given(
    parts=st.lists(_PART, max_size=5),
    ratios=st.lists(st.sampled_from([1.0, 0.25, 0.2862345, 0.7303, 1.6, 3.9]), min_size=1),
    per=st.sampled_from([4.0, 3.0, 3.7]),
    words=st.booleans(),
    grow=st.lists(_CALL, max_size=2),
)
def test_a_message_part_costs_what_its_messages_count_now(
    parts: list[Part],
    ratios: list[float],
    per: float,
    words: bool,
    grow: list[ToolCall],
) -> None:
    """At any ratio, over any base counter: a part's kept counts give `part_costs`, and
    after an assistant message gains tool calls in place (as `History` stores a
    generation's calls) the part is counted again, never from what was kept."""
    base = _Words() if words else CharCounter(per)
    counts = MessageCounts(base)
    kind = SectionKind.RECENT_HISTORY
    for ratio in ratios:
        counter = CalibratedCounter(base, ratio)
        assert counts.ratio_of(counter) == ratio
        assert counts.costs(parts, ratio) == part_costs(kind, parts, counter)
    assert [counts.total(p) for p in parts] == [part_cost(kind, p, base) for p in parts]
    assert counts.ratio_of(base) == 1.0 and counts.ratio_of(CharCounter(per)) is None
    grown = [m for p in parts for m in p.messages if isinstance(m, AssistantMessage)]
    if grown and grow:
        grown[-1].tool_calls.extend(grow)
        for ratio in ratios:
            counter = CalibratedCounter(base, ratio)
            assert counts.costs(parts, ratio) == part_costs(kind, parts, counter)
        assert [counts.total(p) for p in parts] == [part_cost(kind, p, base) for p in parts]
