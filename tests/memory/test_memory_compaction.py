"""Dialog compaction (agent-loop §7.2): when it fires, mechanical first, an LLM summary
only when turns had to be dropped, and DONE verdicts always kept."""

from __future__ import annotations

import asyncio
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.config.loop_memory import Compaction
from mindloop.memory import (
    CalibratedCounter,
    CharCounter,
    CompactionMethod,
    compact,
    compaction_due,
    message_tokens,
    summarize,
    verdicts_by_tool,
)
from mindloop.memory.compaction import Folds, fold_message
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

SPEC = Compaction()
COUNTER = CharCounter()
VERDICT_TOOL = "node_check"
verdict_of = verdicts_by_tool(frozenset({VERDICT_TOOL}))


def tokens(msgs: list[ChatMessage]) -> int:
    return sum(message_tokens(m, COUNTER) for m in msgs)


def step(i: int, result_chars: int, *, verdict: bool = False) -> list[ChatMessage]:
    name = VERDICT_TOOL if verdict else "shell"
    args = json.dumps({"node": f"n{i}", "status": "DONE"}) if verdict else '{"cmd": "make"}'
    content = (
        f"verdict n{i}: all criteria pass" if verdict else ("log line\n" * (result_chars // 9))
    )
    return [
        UserMessage(text=f"go on with part {i}"),
        AssistantMessage(
            text=f"working on {i}", tool_calls=[ToolCall(id=f"c{i}", name=name, arguments=args)]
        ),
        ToolResultMessage(call_id=f"c{i}", name=name, content=content),
    ]


def test_it_fires_at_80_percent_with_two_turns_between_unless_at_95() -> None:
    assert not compaction_due(7_999, 10_000, None, SPEC)
    assert compaction_due(8_000, 10_000, None, SPEC)
    assert not compaction_due(9_000, 10_000, 1, SPEC)  # one turn after the last one
    assert compaction_due(9_000, 10_000, 2, SPEC)
    assert compaction_due(9_500, 10_000, 0, SPEC)  # near the hard limit: no spacing


def test_folding_old_results_is_enough_and_asks_for_no_summary() -> None:
    msgs = [m for i in range(12) for m in step(i, 4000)]
    window = int(tokens(msgs) / 0.85)
    c, request = compact(
        msgs, dialog_id="d", course=1, window=window, spec=SPEC, keep_turns=6, counter=COUNTER
    )
    assert c.method is CompactionMethod.FOLD and request is None and c.upto == 0
    view = c.view(msgs)
    assert c.tokens_after == tokens(view) <= SPEC.target * window
    assert c.tokens_before == tokens(msgs)
    assert "folded: result of shell" in view[2].content  # type: ignore[union-attr]
    assert view[-6:] == msgs[-6:]  # the recent turns untouched
    assert c.replaced and "results folded" in c.replaced[0]


def test_when_folding_is_not_enough_old_turns_are_dropped_and_summarised_later() -> None:
    msgs = [m for i in range(40) for m in step(i, 200)]
    msgs += [UserMessage(text="now " + "x" * 6000)]
    window = int(tokens(msgs) / 0.85)
    c, request = compact(
        msgs, dialog_id="d", course=1, window=window, spec=SPEC, keep_turns=6, counter=COUNTER
    )
    assert c.method is CompactionMethod.DROP and c.llm_pending and request is not None
    assert c.tokens_after <= SPEC.target * window
    assert "compacted" in c.narrative and "shell×" in c.narrative
    assert request.upto == c.upto and "call shell" in request.text

    async def fake(prompt: str, target: int) -> str:
        assert str(target) in prompt and "call shell" in prompt
        return "The user asked for parts 0–30; each built with make."

    done = asyncio.run(summarize(c, request, fake))
    assert done.method is CompactionMethod.LLM and not done.llm_pending
    assert done.narrative.startswith("The user asked")
    assert done.view(msgs)[0].text.startswith("[Summary")  # type: ignore[union-attr]
    # A summary that arrives for an older compaction changes nothing.
    newer = c.model_copy(update={"upto": c.upto + 3})
    assert asyncio.run(summarize(newer, request, fake)) is newer


@st.composite
def dialogs(draw: st.DrawFn) -> tuple[list[ChatMessage], set[int]]:
    msgs: list[ChatMessage] = []
    verdicts = set()
    for i in range(draw(st.integers(1, 40))):
        v = draw(st.booleans()) and draw(st.booleans())
        if v:
            verdicts.add(i)
        msgs += step(i, draw(st.integers(0, 20000)), verdict=v)
    return msgs, verdicts


@settings(max_examples=80, deadline=None)
@given(dialogs(), st.floats(0.3, 1.2), st.integers(1, 8), st.integers(0, 3))
def test_done_verdicts_survive_every_compaction(
    dialog: tuple[list[ChatMessage], set[int]], size: float, keep: int, rounds: int
) -> None:
    msgs, verdicts = dialog
    window = max(1000, int(tokens(msgs) / size))
    prior = None
    for r in range(rounds + 1):
        c, _ = compact(
            msgs[: len(msgs) - 3 * (rounds - r)] if r < rounds else msgs,
            dialog_id="d",
            course=1,
            window=window,
            spec=SPEC,
            keep_turns=keep,
            counter=COUNTER,
            prior=prior,
            verdict_of=verdict_of,
        )
        prior = c
    assert prior is not None
    view_text = "\n".join(
        getattr(m, "text", "") or getattr(m, "content", "") for m in prior.view(msgs)
    )
    for i in verdicts:
        assert f"verdict n{i}: all criteria pass" in view_text
    # The view keeps every call with its result.
    view = prior.view(msgs)
    calls = {c.id for m in view if isinstance(m, AssistantMessage) for c in m.tool_calls}
    assert calls == {m.call_id for m in view if isinstance(m, ToolResultMessage)}


@settings(max_examples=60, deadline=None)
@given(
    dialogs(),
    st.floats(0.3, 1.2),
    st.integers(1, 8),
    st.lists(st.sampled_from([100, 200, 700]), min_size=1, max_size=3),
    st.floats(0.5, 2.0),
)
def test_what_a_compaction_says_it_costs_is_what_its_view_costs(
    dialog: tuple[list[ChatMessage], set[int]],
    size: float,
    keep: int,
    folds: list[int],
    ratio: float,
) -> None:
    """`tokens_before` / `tokens_after` are the tokens of the prior's view and of the
    result's (weighed by sums of per-message costs, not by viewing the dialog again),
    whatever the counter and however the fold settings changed between compactions."""
    msgs, _ = dialog
    counter = CalibratedCounter(COUNTER, ratio)
    window = max(1000, int(tokens(msgs) / size))
    prior = None
    for r, fold in enumerate(folds):
        upto = len(msgs) - 3 * (len(folds) - 1 - r)
        seen = msgs[: max(upto, 1)]
        spec = Compaction(folded_result_tokens=fold, long_text_tokens=2 * fold)
        c, _ = compact(
            seen,
            dialog_id="d",
            course=1,
            window=window,
            spec=spec,
            keep_turns=keep,
            counter=counter,
            prior=prior,
            verdict_of=verdict_of,
        )
        before = prior.view(seen) if prior is not None else seen
        assert c.tokens_before == sum(message_tokens(m, counter) for m in before)
        assert c.tokens_after == sum(message_tokens(m, counter) for m in c.view(seen))
        prior = c


def test_a_compaction_is_a_deterministic_view_of_the_stored_messages() -> None:
    msgs = [m for i in range(30) for m in step(i, 3000)]
    window = int(tokens(msgs) / 0.9)
    c, _ = compact(
        msgs, dialog_id="d", course=1, window=window, spec=SPEC, keep_turns=6, counter=COUNTER
    )
    again = type(c).model_validate(json.loads(c.model_dump_json()))
    more = [*msgs, UserMessage(text="next")]
    assert again.view(more) == c.view(more) and again.view(more)[-1] == more[-1]


def test_an_overflowing_dialog_summary_is_cut_before_its_verdicts() -> None:
    from mindloop.config.loop_memory import MemoryConfig
    from mindloop.memory import MemoryCompiler, Section, SectionKind
    from mindloop.memory.compaction import DialogCompaction

    c = DialogCompaction(
        dialog_id="d",
        course=1,
        upto=10,
        fold_before=10,
        fold_tokens=60,
        long_tokens=400,
        narrative="story " * 4000,
        verdicts=("n1 DONE: login works", "n2 DONE: tests pass"),
        method=CompactionMethod.DROP,
        llm_pending=True,
        messages_at=12,
        tokens_before=0,
        tokens_after=0,
        replaced=(),
    )
    section = Section(kind=SectionKind.DIALOG_SUMMARY, parts=tuple(c.summary_parts()))
    out = MemoryCompiler(MemoryConfig()).compile([section], window=200_000)
    kept = out.section(SectionKind.DIALOG_SUMMARY)
    assert kept.parts[1].text == section.parts[1].text  # the verdicts whole
    assert len(kept.parts[0].text) < len(section.parts[0].text)
    assert out.compact == (SectionKind.DIALOG_SUMMARY,)


@settings(max_examples=40, deadline=None)
@given(dialogs(), st.floats(0.3, 1.2), st.integers(1, 8), st.integers(1, 3))
def test_compactions_sharing_their_folds_are_the_compactions_without(
    dialog: tuple[list[ChatMessage], set[int]], size: float, keep: int, rounds: int
) -> None:
    """A dialog's old messages are folded once and the folds kept (`Folds`): each
    compaction of a growing dialog is the one that folds every message again."""
    msgs, _ = dialog
    window = max(1000, int(tokens(msgs) / size))
    folds = Folds()
    prior = kept = None
    for r in range(rounds + 1):
        seen = msgs[: max(1, len(msgs) - 3 * (rounds - r))]
        plain, shared = (
            compact(
                seen,
                dialog_id="d",
                course=1,
                window=window,
                spec=SPEC,
                keep_turns=keep,
                counter=COUNTER,
                prior=before,
                verdict_of=verdict_of,
                folds=given_folds,
            )
            for before, given_folds in ((prior, None), (kept, folds))
        )
        assert shared == plain
        prior, kept = plain[0], shared[0]


def test_a_fold_is_kept_for_the_very_message_at_its_place() -> None:
    folds = Folds()
    old = UserMessage(text="x" * 9000)
    first = folds.fold(old, 3, 60, 400, "en")
    assert first == fold_message(old, 3, 60, 400, "en") and first is not old
    assert folds.fold(old, 3, 60, 400, "en") is first  # folded once
    assert folds.fold(old, 3, 60, 800, "en") == fold_message(old, 3, 60, 800, "en")
    same_text = UserMessage(text="y" * 9000)  # another message at that place: its own fold
    assert folds.fold(same_text, 3, 60, 400, "en") == fold_message(same_text, 3, 60, 400, "en")
    result = ToolResultMessage(call_id="c", name="shell", content="z" * 3000)
    assert folds.fold(result, 5, 60, 400, "en") == fold_message(result, 5, 60, 400, "en")
