"""Token counting: characters / 4 by default, calibrated per model by provider usage."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.memory import CalibratedCounter, Calibration, CharCounter, message_tokens
from mindloop.memory.tokens import (
    MESSAGE_OVERHEAD,
    ModelRatio,
    chars,
    count_length,
    request_tokens,
)
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)


def test_the_default_counts_four_characters_per_token() -> None:
    c = CharCounter()
    assert (c.count(""), c.count("abcd"), c.count("abcde")) == (0, 1, 2)
    with pytest.raises(ValueError, match="chars_per_token"):
        CharCounter(0)


def test_messages_count_their_text_calls_and_overhead() -> None:
    c = CharCounter()
    assert message_tokens(UserMessage(text="x" * 40), c) == MESSAGE_OVERHEAD + 10
    call = ToolCall(id="1", name="shell", arguments='{"cmd":"ls"}')
    assert message_tokens(AssistantMessage(tool_calls=[call]), c) > MESSAGE_OVERHEAD + 3
    spec = ToolSpec(name="t", description="d", parameters={})
    assert request_tokens("s" * 8, [], [spec], c) > 2


@settings(max_examples=50, deadline=None)
@given(st.floats(0.3, 3.5), st.lists(st.integers(50, 50_000), min_size=8, max_size=30))
def test_calibration_learns_a_models_ratio_from_reported_usage(
    ratio: float, sizes: list[int]
) -> None:
    cal = Calibration()
    for est in sizes:
        cal.observe("m", est, round(est * ratio))
    assert cal.ratio("m") == pytest.approx(ratio, rel=0.02, abs=0.01)
    assert cal.ratio("other") == 1.0  # per model
    counter = CalibratedCounter(CharCounter(), cal.ratio("m"))
    assert counter.count("x" * 4000) == pytest.approx(1000 * ratio, rel=0.03)


def test_calibration_moves_gradually_and_ignores_useless_reports() -> None:
    cal = Calibration(alpha=0.5)
    assert cal.observe("m", 1000, 2000) == 2.0  # the first sample sets it
    assert cal.observe("m", 1000, 1000) == 1.5  # later ones move it halfway
    assert cal.observe("m", 1000, None) == 1.5
    assert cal.observe("m", 1000, 0) == 1.5
    assert cal.observe("m", 0, 500) == 1.5
    assert cal.observe("n", 1000, 100_000) == 4.0  # clamped
    snap = cal.snapshot()
    fresh = Calibration()
    fresh.restore(snap)
    assert fresh.ratio("m") == 1.5 and ModelRatio(model="n", ratio=4.0, samples=1) in snap


class _Words:
    """A counter that is not the default: one token per word (no count by length)."""

    def count(self, text: str) -> int:
        return len(text.split())


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from([1.0, 0.5, 0.7303, 1.6, 3.9]),
    st.sampled_from([4.0, 3.0, 3.7]),
    st.lists(st.text(max_size=300), max_size=12),
    st.booleans(),
)
def test_a_count_by_length_is_the_count(
    ratio: float, per: float, texts: list[str], words: bool
) -> None:
    """`count_length` is a shortcut of `count`: the same numbers for the default counter
    and its calibrated form at any ratio; any other counter has none."""
    base = _Words() if words else CharCounter(per)
    for counter in (base, CalibratedCounter(base, ratio)):
        by_length = count_length(counter)
        if words:
            assert by_length is None
        else:
            assert by_length is not None
            assert [by_length(len(t)) for t in texts] == [counter.count(t) for t in texts]


class _Plain:
    """A counter counting as `inner` does, with none of its shortcuts."""

    def __init__(self, inner: CharCounter | CalibratedCounter) -> None:
        self.inner = inner

    def count(self, text: str) -> int:
        return self.inner.count(text)


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from([1.0, 0.5, 0.7303, 1.6, 3.9, 0.59379]),
    st.sampled_from([4.0, 3.0, 3.7]),
    st.lists(
        st.one_of(
            st.builds(UserMessage, text=st.text(max_size=400)),
            st.builds(
                ToolResultMessage,
                call_id=st.just("c"),
                name=st.text(max_size=20),
                content=st.text(max_size=400),
            ),
            st.builds(
                AssistantMessage,
                text=st.text(max_size=200),
                tool_calls=st.lists(
                    st.builds(
                        ToolCall,
                        id=st.just("c"),
                        name=st.text(max_size=20),
                        arguments=st.text(max_size=300),
                    ),
                    max_size=3,
                ),
            ),
        ),
        max_size=8,
    ),
)
def test_a_message_costs_the_same_counted_inline(
    ratio: float, per: float, msgs: list[ChatMessage]
) -> None:
    """Over the default counter and its calibrated form a message's texts are counted
    inline (`tokens.chars`): the costs their `count` gives."""
    base = CharCounter(per)
    for counter in (base, CalibratedCounter(base, ratio)):
        assert chars(counter) is not None
        assert [message_tokens(m, counter) for m in msgs] == [
            message_tokens(m, _Plain(counter)) for m in msgs
        ]
    assert chars(_Plain(base)) is None
