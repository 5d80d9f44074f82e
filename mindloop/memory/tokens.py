"""Token counting: pluggable, cheap by default, calibrated by what providers report.

Budgets are only as good as the counts they are checked against, and no tokenizer ships
for every model a team may use. So the default counter is characters / 4 (agent-loop
§7.1), and each model's real ratio is learned from its generations: the engine reports
how many input tokens the provider counted for a request whose size we estimated, and
`Calibration` keeps a per-model factor (an exponential moving average of reported /
estimated) that `CalibratedCounter` multiplies in. A counter is a plain object with
`count(text) -> int`; any tokenizer fits.

Messages are counted by `message_tokens`, the one definition every budget check uses:
text, tool names and arguments, results, plus a small overhead per message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

# Tokens a message costs beyond its text (role markers, separators), and a tool call
# beyond its name and arguments: what providers typically add.
MESSAGE_OVERHEAD = 4
CALL_OVERHEAD = 3


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class CharCounter:
    """`ceil(len(text) / chars_per_token)`: the default (4 characters per token)."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be > 0, got {chars_per_token}")
        self.chars_per_token = chars_per_token
        # how it counts, for code that counts inline (`Chars`); a subclass's own
        self.chars: Chars | None = (chars_per_token, None) if type(self) is CharCounter else None

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def count_length(self, size: int) -> int:
        """`count` of any text of `size` characters (`count_length`)."""
        return math.ceil(size / self.chars_per_token)


class ModelRatio(BaseModel):
    """What one model's usage taught: reported input tokens per estimated token."""

    model_config = ConfigDict(extra="forbid")

    model: str
    ratio: float = Field(gt=0)
    samples: int = Field(ge=0)


class Calibration:
    """Per-model ratios learned from provider-reported usage.

    `observe(model, estimated, reported)` folds one generation in: the first sample sets
    the ratio, later ones move it by `alpha` (an exponential moving average, so a model
    whose tokenizer differs from the estimate converges in a few generations and one odd
    request does not swing it). Ratios are clamped to [`low`, `high`]: a provider that
    reports nothing useful (0, or a cached-prefix discount) cannot make budgets absurd.
    """

    def __init__(self, *, alpha: float = 0.3, low: float = 0.25, high: float = 4.0) -> None:
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.alpha = alpha
        self.low = low
        self.high = high
        # model -> (ratio, samples): a `ModelRatio` each, made when a snapshot asks (one
        # generation's observation costs no model)
        self._ratios: dict[str, tuple[float, int]] = {}

    def ratio(self, model: str) -> float:
        found = self._ratios.get(model)
        return 1.0 if found is None else found[0]

    def observe(self, model: str, estimated: int, reported: int | None) -> float:
        """Learn from one generation: `estimated` tokens (by the base counter) of a request
        the provider counted as `reported` input tokens. Returns the model's new ratio;
        a sample without a usable report changes nothing."""
        if reported is None or reported <= 0 or estimated <= 0:
            return self.ratio(model)
        sample = min(max(reported / estimated, self.low), self.high)
        found = self._ratios.get(model)
        if found is None:
            ratio, samples = sample, 1
        else:
            ratio = found[0] + self.alpha * (sample - found[0])
            samples = found[1] + 1
        if not ratio > 0:  # (clamps at or under 0): refused as the model refuses it
            ModelRatio(model=model, ratio=ratio, samples=samples)
        self._ratios[model] = (ratio, samples)
        return ratio

    def snapshot(self) -> list[ModelRatio]:
        return [ModelRatio(model=m, ratio=r, samples=n) for m, (r, n) in self._ratios.items()]

    def restore(self, ratios: Iterable[ModelRatio]) -> None:
        for r in ratios:
            self._ratios[r.model] = (r.ratio, r.samples)


class CalibratedCounter:
    """A base counter scaled by one model's learned ratio, read at construction: a
    compilation counts with one fixed ratio, so its budget checks agree with each other.

    A compilation counts every text of the request (a hundred or more), so over the
    default counter the two steps are fused into one function, and with a ratio of
    exactly 1 the base count is the count (`ceil(n * 1.0) == n`)."""

    def __init__(self, base: TokenCounter, ratio: float) -> None:
        self.base = base
        self.ratio = ratio
        # what a text of a given length counts, when that is all the count depends on
        self.count_length: Callable[[int], int] | None = None
        # (characters per token, the ratio or None for 1) over the default counter
        self.chars: Chars | None = None
        if type(base) is CharCounter:
            self.chars = (base.chars_per_token, None if ratio == 1.0 else ratio)
        if ratio == 1.0:
            self.count = base.count  # type: ignore[method-assign]
            self.count_length = count_length(base)
        elif type(base) is CharCounter:
            per, ceil = base.chars_per_token, math.ceil

            def count(text: str) -> int:
                return ceil(ceil(len(text) / per) * ratio)

            def of_length(size: int) -> int:
                return ceil(ceil(size / per) * ratio)

            self.count = count  # type: ignore[method-assign]
            self.count_length = of_length

    def count(self, text: str) -> int:
        return math.ceil(self.base.count(text) * self.ratio)


# How the default counter and its calibrated form count: (characters per token, the
# ratio, None for exactly 1): a count is `ceil(len(text) / per)`, scaled as
# `ceil(count * ratio)`. Code that counts many texts counts them inline (`chars`), where
# a call of `count` per text is most of the work.
Chars = tuple[float, float | None]


def chars(counter: TokenCounter) -> Chars | None:
    """How `counter` counts, when it is the default counter or its calibrated form, else
    None (call its `count`)."""
    found = getattr(counter, "chars", None)
    return found if type(counter) in _CHAR_COUNTERS else None


def count_length(counter: TokenCounter) -> Callable[[int], int] | None:
    """What `counter` counts for a text of a given length, when its count depends on the
    length alone (the default counter and its calibrated form), else None: a trim weighs
    a cut text by its length without making it."""
    found = getattr(counter, "count_length", None)
    return found if callable(found) else None


_CHAR_COUNTERS = (CharCounter, CalibratedCounter)  # whose `chars` say how they count


def message_tokens(msg: ChatMessage, counter: TokenCounter) -> int:
    """What one message costs in a request."""
    kind = type(msg)
    way = getattr(counter, "chars", None)
    if way is not None and type(counter) in _CHAR_COUNTERS:
        # the default counter (or its calibrated form): its counts inline, the same
        # arithmetic as `CharCounter.count` and the ratio's scaling
        per, ratio = way
        ceil = math.ceil
        if kind is UserMessage:
            n = ceil(len(msg.text) / per)  # type: ignore[union-attr]
            return MESSAGE_OVERHEAD + (n if ratio is None else ceil(n * ratio))
        if kind is ToolResultMessage:
            n = ceil(len(msg.content) / per)  # type: ignore[union-attr]
            return MESSAGE_OVERHEAD + (n if ratio is None else ceil(n * ratio))
        if kind is AssistantMessage:
            calls = msg.tool_calls  # type: ignore[union-attr]
            text = msg.text  # type: ignore[union-attr]
            if ratio is None:
                total = MESSAGE_OVERHEAD + ceil(len(text) / per)
                for call in calls:
                    total += (
                        CALL_OVERHEAD + ceil(len(call.name) / per) + ceil(len(call.arguments) / per)
                    )
                return total
            total = MESSAGE_OVERHEAD + ceil(ceil(len(text) / per) * ratio)
            for call in calls:
                total += (
                    CALL_OVERHEAD
                    + ceil(ceil(len(call.name) / per) * ratio)
                    + ceil(ceil(len(call.arguments) / per) * ratio)
                )
            return total
    count = counter.count
    if kind is UserMessage:
        return MESSAGE_OVERHEAD + count(msg.text)  # type: ignore[union-attr]
    if kind is ToolResultMessage:
        return MESSAGE_OVERHEAD + count(msg.content)  # type: ignore[union-attr]
    if kind is not AssistantMessage:  # a subclass: the general checks
        if isinstance(msg, UserMessage):
            return MESSAGE_OVERHEAD + count(msg.text)
        if isinstance(msg, ToolResultMessage):
            return MESSAGE_OVERHEAD + count(msg.content)
    assert isinstance(msg, AssistantMessage)
    total = MESSAGE_OVERHEAD + count(msg.text)
    for call in msg.tool_calls:
        total += CALL_OVERHEAD + count(call.name) + count(call.arguments)
    return total


def messages_costs(groups: Iterable[Sequence[ChatMessage]], counter: TokenCounter) -> list[int]:
    """`message_tokens` summed over each group of messages (a section's turns): the
    default counter's arithmetic inline, its way looked up once for them all rather than
    once per message (a request costs its history's turns again at every step: the
    calibrated ratio moves with each generation)."""
    way = getattr(counter, "chars", None)
    if way is None or type(counter) not in _CHAR_COUNTERS:
        return [sum(message_tokens(m, counter) for m in g) for g in groups]
    per, ratio = way
    ceil = math.ceil
    out = []
    for group in groups:
        total = 0
        for m in group:
            kind = type(m)
            if kind is UserMessage:
                n = ceil(len(m.text) / per)  # type: ignore[union-attr]
            elif kind is ToolResultMessage:
                n = ceil(len(m.content) / per)  # type: ignore[union-attr]
            elif kind is AssistantMessage:
                n = ceil(len(m.text) / per)  # type: ignore[union-attr]
                for call in m.tool_calls:  # type: ignore[union-attr]
                    name = ceil(len(call.name) / per)
                    args = ceil(len(call.arguments) / per)
                    if ratio is not None:
                        name, args = ceil(name * ratio), ceil(args * ratio)
                    total += CALL_OVERHEAD + name + args
            else:  # a subclass: the definition
                total += message_tokens(m, counter)
                continue
            total += MESSAGE_OVERHEAD + (n if ratio is None else ceil(n * ratio))
        out.append(total)
    return out


def messages_tokens(msgs: Iterable[ChatMessage], counter: TokenCounter) -> int:
    return sum(message_tokens(m, counter) for m in msgs)


def request_tokens(
    system: str, msgs: Iterable[ChatMessage], tools: Iterable[ToolSpec], counter: TokenCounter
) -> int:
    """A whole request as the provider will count it (estimated): what calibration
    compares the provider's reported input tokens with."""
    total = counter.count(system) + messages_tokens(msgs, counter)
    for spec in tools:
        total += CALL_OVERHEAD + counter.count(spec.model_dump_json())
    return total
