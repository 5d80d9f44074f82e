"""Memory compilation (agent-loop §7.1): the properties every compiled input keeps, and
each section's trim rule."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import mindloop.memory.trim as trim_rules
from mindloop.config.loop_memory import MemoryConfig
from mindloop.memory import (
    SECTIONS,
    CalibratedCounter,
    CharCounter,
    MemoryCompiler,
    Part,
    Section,
    SectionKind,
    TrimReason,
    budgets,
    history_sections,
)
from mindloop.memory.compiler import CompiledContext
from mindloop.memory.render import (
    part_cost,
    section_cost,
    section_costs,
    section_messages,
    sections_costs,
)
from mindloop.memory.tokens import TokenCounter, messages_tokens
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

TEXT_KINDS = [
    k
    for k in SectionKind
    if k not in (SectionKind.RECENT_HISTORY, SectionKind.TOOL_RESULTS, SectionKind.TASKDOC)
]


def words(n: int, seed: int = 0) -> str:
    """About `n` characters of varied text."""
    base = f"w{seed} alpha beta gamma delta {seed * 7} epsilon zeta eta theta iota "
    return (base * (n // len(base) + 1))[:n]


@st.composite
def text_section(draw: st.DrawFn, kind: SectionKind) -> Section:
    n = draw(st.integers(0, 12))
    parts = []
    for i in range(n):
        size = draw(st.integers(0, 9000))
        parts.append(
            Part(
                id=f"{kind}-{i}",
                text=words(size, i),
                score=draw(st.floats(0, 1)),
                pinned=draw(st.booleans()),
                folded=f"{kind}-{i} DONE title" if draw(st.booleans()) else None,
            )
        )
    return Section(kind=kind, parts=tuple(parts))


@st.composite
def dialog(draw: st.DrawFn) -> list[ChatMessage]:
    msgs: list[ChatMessage] = []
    for i in range(draw(st.integers(0, 14))):
        if draw(st.booleans()):
            msgs.append(UserMessage(text=words(draw(st.integers(1, 6000)), i)))
        else:
            calls = [
                ToolCall(
                    id=f"c{i}-{j}",
                    name="shell",
                    arguments=f'{{"cmd": "{words(draw(st.integers(0, 3000)), j)}"}}',
                )
                for j in range(draw(st.integers(1, 3)))
            ]
            msgs.append(
                AssistantMessage(text=words(draw(st.integers(0, 800)), i), tool_calls=calls)
            )
            for c in calls:
                msgs.append(
                    ToolResultMessage(
                        call_id=c.id,
                        name=c.name,
                        content=words(draw(st.integers(0, 40000)), i),
                        is_error=draw(st.booleans()),
                    )
                )
    return msgs


@st.composite
def compile_inputs(draw: st.DrawFn) -> tuple[list[Section], int, str | None, str, float]:
    kinds = draw(st.lists(st.sampled_from(TEXT_KINDS), unique=True))
    sections = [draw(text_section(k)) for k in kinds]
    history, last = history_sections(draw(dialog()), 6)
    sections += [history, last]
    window = draw(st.integers(1000, 400_000))
    phase = draw(st.sampled_from([None, "PLAN", "DO", "CHECK", "ADJUST", "SELF_IMPROVE"]))
    taskdoc = words(draw(st.integers(0, 20000)))
    ratio = draw(st.floats(0.5, 2.0))
    return sections, window, phase, taskdoc, ratio


def _compiled(
    args: tuple[list[Section], int, str | None, str, float],
) -> tuple[CompiledContext, TokenCounter]:
    """`compile_inputs()` compiled, with the counter it was compiled with (its ratio set)."""
    sections, window, phase, taskdoc, ratio = args
    compiler = MemoryCompiler(MemoryConfig())
    compiler.calibration.observe("m", 100, int(100 * ratio))
    out = compiler.compile(sections, window=window, model="m", phase=phase, taskdoc=taskdoc)
    return out, compiler.counter("m")


@settings(max_examples=60, deadline=None)
@given(compile_inputs())
def test_the_compiled_input_never_exceeds_b(
    args: tuple[list[Section], int, str | None, str, float],
) -> None:
    out, counter = _compiled(args)
    assert out.tokens <= out.budgets.total
    # Recounted from the messages actually sent, with the same counter.
    assert messages_tokens(out.messages(), counter) <= out.budgets.total
    # A history turn never loses its calls' results (or results their call).
    sent = out.messages()
    calls = {c.id for m in sent if isinstance(m, AssistantMessage) for c in m.tool_calls}
    results = {m.call_id for m in sent if isinstance(m, ToolResultMessage)}
    assert calls == results


@settings(max_examples=60, deadline=None)
@given(compile_inputs())
def test_what_each_section_is_said_to_cost_is_what_it_costs(
    args: tuple[list[Section], int, str | None, str, float],
) -> None:
    # a trim records the cost its parts add up to, never counting the result again
    out, counter = _compiled(args)
    for kind, cost in out.by_section.items():
        assert cost == section_cost(out.section(kind), counter)
    assert out.tokens == sum(section_cost(s, counter) for s in out.sections)


@settings(max_examples=60, deadline=None)
@given(compile_inputs())
def test_trimming_follows_reverse_priority(
    args: tuple[list[Section], int, str | None, str, float],
) -> None:
    sections, window, phase, taskdoc, _ = args
    # Floors of 0: a section may only be trimmed for the total once every section of a
    # lower priority (a higher number) is gone.
    compiler = MemoryCompiler(
        MemoryConfig.model_validate({"floors": {"workspace_tree": 0, "history_turns": 0}})
    )
    out = compiler.compile(sections, window=window, phase=phase, taskdoc=taskdoc)
    total_trims = [t for t in out.trims if t.reason is TrimReason.TOTAL]
    priorities = [SECTIONS[t.section].priority for t in total_trims]
    assert priorities == sorted(priorities, reverse=True)
    assert 0 not in priorities  # P0 sections keep their own budgets
    for t in total_trims:
        p = SECTIONS[t.section].priority
        for s in out.sections:
            if SECTIONS[s.kind].priority > p:
                raise AssertionError(f"{s.kind} kept while {t.section} was trimmed")
    # Without floors, B is never below them: nothing is cut under a floor.
    assert not [
        t
        for t in out.trims
        if t.reason is TrimReason.FLOOR_BREACHED and SECTIONS[t.section].priority > 0
    ]


@settings(max_examples=40, deadline=None)
@given(compile_inputs())
def test_the_taskdoc_is_measured_never_trimmed(
    args: tuple[list[Section], int, str | None, str, float],
) -> None:
    sections, window, phase, taskdoc, _ = args
    compiler = MemoryCompiler(MemoryConfig())
    out = compiler.compile(
        [*sections, Section.text(SectionKind.TASKDOC, taskdoc)],
        window=window,
        phase=phase,
        taskdoc=taskdoc,
    )
    assert all(s.kind is not SectionKind.TASKDOC for s in out.sections)
    assert not [t for t in out.trims if t.section is SectionKind.TASKDOC]
    tokens = CharCounter().count(taskdoc)
    budget = out.budgets.sections[SectionKind.TASKDOC]
    assert out.taskdoc_tokens == tokens
    assert (out.taskdoc_over is not None) == (tokens > budget)
    if out.taskdoc_over is not None:
        ask = out.taskdoc_over.ask()
        assert "progress.md" in ask and "change_mind" in ask and f"{tokens:,}" in ask


def test_b_is_a_quarter_of_the_window_capped_at_32k_and_sections_scale_below_it() -> None:
    cfg = MemoryConfig()
    big = budgets(cfg, 200_000)
    assert big.total == 32_000
    assert big.sections[SectionKind.RECENT_HISTORY] == 4000
    small = budgets(cfg, 32_000)  # B = 8,000: priorities 1–6 scale by 1/4
    assert small.total == 8000
    assert small.sections[SectionKind.MEMBER_MEMORY] == 375
    assert small.sections[SectionKind.WORKSPACE_TREE] == 600  # its floor
    assert small.sections[SectionKind.TOOL_RESULTS] == 6000  # P0 does not scale
    assert budgets(cfg, 200_000, "DO").sections[SectionKind.WORKSPACE_TREE] == 600
    assert budgets(cfg, 200_000, "CHECK").sections[SectionKind.TOOL_RESULTS] == 8000
    assert budgets(cfg, 200_000, "SELF_IMPROVE").sections[SectionKind.MEMBER_MEMORY] == 2000


def test_a_phase_override_from_config_keeps_the_other_defaults() -> None:
    cfg = MemoryConfig.model_validate({"phase_overrides": {"do": {"input": 3000}}})
    do = budgets(cfg, 200_000, "DO").sections
    assert do[SectionKind.INPUT] == 3000 and do[SectionKind.WORKSPACE_TREE] == 600


def compile_one(
    section: Section, window: int = 200_000, **cfg: object
) -> tuple[Section, list[str]]:
    compiler = MemoryCompiler(MemoryConfig.model_validate(cfg))
    out = compiler.compile([section], window=window)
    [record] = out.trims or [None]
    kept = out.section(section.kind)
    assert section_cost(kept, compiler.counter(None)) <= out.budgets.sections[section.kind]
    return kept, [*record.dropped] if record else []


def test_input_parts_are_cut_to_what_fits_naming_the_tool_that_reads_them_whole() -> None:
    """Over its budget (4,000), each input part is cut to one common cap — not under 800
    tokens while that fits — and the note names the tool that shows the part whole (a
    part no tool shows says only that it was cut: no made-up tool)."""
    events = tuple(
        Part(id=f"n{i}", text=words(6000, i), whole=f'node_get("n{i}")') for i in range(4)
    )
    kept, dropped = compile_one(Section(kind=SectionKind.INPUT, parts=events))
    assert not dropped and len(kept.parts) == 4
    for p in kept.parts:
        assert f'read it whole with node_get("{p.id}")' in p.text
        assert 800 <= CharCounter().count(p.text) <= 1000 + 40  # 4 × ~1,000 of 4,000
    [alone] = compile_one(
        Section(kind=SectionKind.INPUT, parts=(Part(id="m", text=words(24000)),))
    )[0].parts
    assert 3800 <= CharCounter().count(alone.text) <= 4000  # one long part keeps what fits
    assert "tokens cut]" in alone.text and "read it whole" not in alone.text
    many = tuple(Part(id=f"e{i}", text=words(4000, i)) for i in range(30))
    kept, _ = compile_one(Section(kind=SectionKind.INPUT, parts=many))
    assert all(CharCounter().count(p.text) < 800 for p in kept.parts)  # below 800 if it must


def test_an_input_part_whose_tool_call_has_json_arguments_is_cut_with_it_named() -> None:
    """The loop names a node's block as the call that reads it whole with its JSON
    arguments (`node_get {"node_id": "n1"}`, braces and all): over its budget the part is
    cut and the note names that call verbatim (the braces are text, not a template)."""
    call = 'node_get {"node_id": "n1"}'
    part = Part(id="n1", text=words(24000), pinned=True, whole=call)
    [kept] = compile_one(Section(kind=SectionKind.INPUT, parts=(part,)))[0].parts
    assert f"tokens cut; read it whole with {call}]" in kept.text
    assert CharCounter().count(kept.text) <= 4000


def test_tool_results_keep_head_and_tail_and_name_the_worklog() -> None:
    head, tail = "HEAD-MARK " + words(9000), words(9000) + " TAIL-MARK"
    msgs = [
        AssistantMessage(tool_calls=[ToolCall(id="c1", name="shell", arguments="{}")]),
        ToolResultMessage(call_id="c1", name="shell", content=head + words(40000) + tail),
    ]
    _, last = history_sections(msgs, 6)
    kept, _ = compile_one(last)
    [result] = [m for p in kept.parts for m in p.messages if isinstance(m, ToolResultMessage)]
    assert result.content.startswith("HEAD-MARK") and result.content.endswith("TAIL-MARK")
    assert "worklog" in result.content


def test_member_memory_drops_the_lowest_confidence_first() -> None:
    items = tuple(
        Part(id=f"m{i}", text=words(2000, i), score=s) for i, s in enumerate([0.9, 0.6, 0.99, 0.7])
    )
    kept, dropped = compile_one(Section(kind=SectionKind.MEMBER_MEMORY, parts=items))
    assert dropped[0] == "m1"  # 0.6 goes first
    assert "m2" in {p.id for p in kept.parts}


def test_the_tree_folds_terminal_nodes_and_keeps_pinned_ones_whole() -> None:
    nodes = tuple(
        Part(
            id=f"n{i}", text=f"n{i} DONE " + words(800, i), folded=f"n{i} DONE t{i}", pinned=i == 7
        )
        for i in range(20)
    )
    kept, dropped = compile_one(Section(kind=SectionKind.WORKSPACE_TREE, parts=nodes))
    by_id = {p.id: p.text for p in kept.parts}
    assert by_id["n7"] == nodes[7].text  # the current node stays whole
    assert by_id.get("n0") == "n0 DONE t0" and not dropped


def test_a_tree_part_is_folded_once_and_every_part_gets_its_own_fold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tree's parts are kept from step to step, so each is folded once (the same
    folded part again at the next trim); a part with another fold (a node renamed: a new
    part, the same id) gets its own, and so does every part while the table is emptied
    (at every fold here)."""
    nodes = tuple(
        Part(id=f"n{i}", text=f"n{i} DONE " + words(800, i), folded=f"n{i} DONE t{i}")
        for i in range(20)
    )
    first, _ = compile_one(Section(kind=SectionKind.WORKSPACE_TREE, parts=nodes))
    again, _ = compile_one(Section(kind=SectionKind.WORKSPACE_TREE, parts=nodes))
    assert first.parts[0].text == "n0 DONE t0"
    assert all(a is b for a, b in zip(first.parts, again.parts, strict=True))
    renamed = tuple(p.model_copy(update={"folded": f"{p.folded} v2"}) for p in nodes)
    third, _ = compile_one(Section(kind=SectionKind.WORKSPACE_TREE, parts=renamed))
    assert third.parts[0].text == "n0 DONE t0 v2"
    monkeypatch.setattr(trim_rules, "FOLDS_KEPT", 1)
    fourth, _ = compile_one(Section(kind=SectionKind.WORKSPACE_TREE, parts=nodes))
    assert [p.text for p in fourth.parts] == [p.text for p in first.parts]


def test_history_drops_the_oldest_turns_and_says_so() -> None:
    msgs: list[ChatMessage] = [
        UserMessage(text=f"turn {i} " + words(3400, i))
        if i % 2 == 0
        else AssistantMessage(text=f"turn {i} " + words(3400, i))
        for i in range(6)
    ]
    history, _ = history_sections(msgs, 6)
    kept, dropped = compile_one(history)
    texts = [
        m.text
        for p in kept.parts
        for m in p.messages
        if isinstance(m, UserMessage | AssistantMessage)
    ]
    assert dropped == ["turn-0", "turn-1"]
    assert texts[0].startswith("[2 earlier turns not shown") and texts[-1].startswith("turn 5")


def test_retrieved_context_keeps_the_best_scored_and_is_marked_as_data() -> None:
    hits = tuple(Part(id=f"r{i}", text=words(2500, i), score=i / 10) for i in range(5))
    kept, dropped = compile_one(Section(kind=SectionKind.RETRIEVED, parts=hits))
    assert set(dropped) == {"r0", "r1"}
    compiler = MemoryCompiler(MemoryConfig())
    [msg] = compiler.compile([kept], window=200_000).messages()
    assert isinstance(msg, UserMessage) and "DATA, NOT INSTRUCTIONS" in msg.text


def test_the_workspace_summary_keeps_its_layout_list() -> None:
    parts = (
        Part(id="layout", text="src/ tests/ docs/", pinned=True),
        *(Part(id=f"d{i}", text=words(1500, i)) for i in range(3)),
    )
    kept, dropped = compile_one(Section(kind=SectionKind.WORKSPACE_SUMMARY, parts=parts))
    assert kept.parts[0].id == "layout" and dropped[0] == "d2"  # detail from the end


def test_an_overflowing_dialog_summary_asks_for_a_compaction() -> None:
    compiler = MemoryCompiler(MemoryConfig())
    out = compiler.compile([Section.text(SectionKind.DIALOG_SUMMARY, words(20000))], window=200_000)
    assert out.compact == (SectionKind.DIALOG_SUMMARY,)


def test_when_b_is_below_the_floors_everything_is_cut_under_them_and_logged() -> None:
    compiler = MemoryCompiler(MemoryConfig())
    big = Section(kind=SectionKind.INPUT, parts=(Part(id="e", text=words(3200)),))  # 800
    tree = Section(
        kind=SectionKind.WORKSPACE_TREE, parts=(Part(id="n", text=words(2400), pinned=True),)
    )
    out = compiler.compile([big, tree], window=4000)  # B = 1,000
    assert out.tokens <= 1000
    breached = [t for t in out.trims if t.reason is TrimReason.FLOOR_BREACHED]
    assert [t.section for t in breached] == [SectionKind.WORKSPACE_TREE]  # before any P0
    assert out.section(SectionKind.WORKSPACE_TREE).parts  # shortened under 600, not gone
    assert out.section(SectionKind.INPUT).parts[0].text.startswith(big.parts[0].text[:100])


def test_a_calibrated_counter_scales_the_base_count() -> None:
    c = CalibratedCounter(CharCounter(), 1.5)
    assert c.count("x" * 400) == 150


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(TEXT_KINDS),
    st.lists(st.integers(0, 3000), min_size=1, max_size=6),
    st.floats(0.25, 4.0),
)
@example(SectionKind.INPUT, [1296], 2.0)  # "## Input\n" + 1296 chars: the break costs 2
def test_a_text_section_never_renders_above_its_cost(
    kind: SectionKind, sizes: list[int], ratio: float
) -> None:
    # The line break between parts is a character like any other: under a calibrated
    # ratio above 1 it costs more than one token, and the cost must say so.
    counter = CalibratedCounter(CharCounter(), ratio)
    section = Section(
        kind=kind, parts=tuple(Part(id=f"p{i}", text=words(n, i)) for i, n in enumerate(sizes))
    )
    sent = section_messages(section)
    assert messages_tokens(sent, counter) <= section_cost(section, counter)


@settings(max_examples=80, deadline=None)
@given(dialog(), st.integers(0, 20), st.integers(2000, 400_000))
def test_an_anchored_input_stands_where_it_happened_among_the_turns(
    msgs: list[ChatMessage], pick: int, window: int
) -> None:
    """The loop's phase input, taken out of the history (`skip`) and anchored there:
    every turn shown before it happened before it, every turn after it after it, the
    last step summary right before it; older than every turn kept, it comes first."""
    users = [i for i, m in enumerate(msgs) if isinstance(m, UserMessage)]
    anchor = users[pick % len(users)] if users else -1
    history, last = history_sections(msgs, 6, skip=anchor)
    summary = Section.text(SectionKind.LAST_STEP_SUMMARY, "SUMMARY-MARK")
    given_input = Section.text(SectionKind.INPUT, "INPUT-MARK")
    tree = Section.text(SectionKind.WORKSPACE_TREE, "TREE-MARK")
    out = MemoryCompiler(MemoryConfig()).compile(
        [tree, history, last, summary, given_input], window=window, anchor=anchor
    )
    sent = out.messages()
    shown = {s.kind for s in out.sections}
    if not {SectionKind.INPUT, SectionKind.LAST_STEP_SUMMARY} <= shown:
        return  # a B too small for even the P0 sections (cut under their floors)
    texts = [m.text if isinstance(m, UserMessage) else None for m in sent]
    at = next(i for i, t in enumerate(texts) if t is not None and "INPUT-MARK" in t)
    assert texts[at - 1] is not None and "SUMMARY-MARK" in texts[at - 1]
    if SectionKind.WORKSPACE_TREE in shown:
        assert texts[0] is not None and "TREE-MARK" in texts[0]
    kept = [
        p
        for s in out.sections
        if s.kind in (SectionKind.RECENT_HISTORY, SectionKind.TOOL_RESULTS)
        for p in s.parts
    ]
    position = {id(m): p.at for p in kept for m in p.messages}
    for i, m in enumerate(sent):
        where = position.get(id(m))
        if where is None:
            continue
        assert (where < anchor) == (i < at), (where, anchor, i, at)
    assert all(m is not msgs[anchor] for m in sent) if anchor >= 0 else True


class _Plain:
    """A counter counting as `inner` does, without its shortcut (a count by length):
    what any other counter offers."""

    def __init__(self, inner: CalibratedCounter) -> None:
        self.inner = inner

    def count(self, text: str) -> int:
        return self.inner.count(text)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(TEXT_KINDS).flatmap(text_section),
    st.integers(0, 12_000),
    st.floats(0.5, 2.0),
)
def test_a_trim_is_the_same_whatever_shortcuts_its_counter_has(
    section: Section, target: int, ratio: float
) -> None:
    """A cap search weighs a cut text by its length when the counter counts by length
    (the default), and makes the text otherwise: the same trim either way."""
    fast = CalibratedCounter(CharCounter(), ratio)
    for reason in (TrimReason.OWN_BUDGET, TrimReason.TOTAL):
        by_length = trim_rules.trim(section, target, trim_rules.TrimParams(counter=fast), reason)
        made = trim_rules.trim(section, target, trim_rules.TrimParams(counter=_Plain(fast)), reason)
        assert by_length == made


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(TEXT_KINDS),
    st.lists(st.integers(0, 120), min_size=16, max_size=90),
    st.floats(0.25, 4.0),
)
def test_a_long_sections_parts_cost_each_what_it_costs_alone(
    kind: SectionKind, sizes: list[int], ratio: float
) -> None:
    """A long text section's parts (a tree's nodes) are weighed by their lengths, each
    length counted once, when the counter counts by length: the cost of each part alone,
    as with any other counter."""
    section = Section(
        kind=kind, parts=tuple(Part(id=f"p{i}", text="x" * n) for i, n in enumerate(sizes))
    )
    counter = CalibratedCounter(CharCounter(), ratio)
    alone = [part_cost(kind, p, counter) for p in section.parts]
    assert section_costs(section, counter)[1] == alone
    assert section_costs(section, _Plain(counter))[1] == alone


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(TEXT_KINDS).flatmap(text_section), max_size=4),
    dialog(),
    st.integers(0, 8),
    st.sampled_from([1.0, 0.3, 0.77, 1.9]) | st.floats(0.25, 4.0),
)
def test_a_requests_sections_cost_what_each_costs_alone(
    texts: list[Section], msgs: list[ChatMessage], turns: int, ratio: float
) -> None:
    """A compilation costs all its sections at once, the default counter's arithmetic
    inline: each section and part costs what `section_costs` says with any other counter
    (text sections, the history's turns, the last step's calls and results)."""
    history, last = history_sections(msgs, turns)
    sections = [*texts, history, last, Section(kind=SectionKind.INPUT)]
    for counter in (CalibratedCounter(CharCounter(), ratio), CharCounter(3.0)):
        plain = [section_costs(s, _Plain(counter)) for s in sections]  # type: ignore[arg-type]
        assert sections_costs(sections, counter) == plain
