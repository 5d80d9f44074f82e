"""Budgeted requests through a turn policy (issue 12, part 5): what a loop phase's
request compilation calls. Flat input tokens over a long drive, the Taskdoc whole in the
system prompt and flagged when too long, the trim log, calibration from reported usage,
and a compaction that keeps DONE verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mindloop import DefaultPolicy, DialogRuntime, Scheduler
from mindloop.config.loop_memory import MemoryConfig
from mindloop.dialogs.budgeted import RESUMMARY_MARGIN, BudgetedRequest, BudgetedRequests
from mindloop.dialogs.history import History
from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.request import RequestBuilder
from mindloop.events.types import ContextCompacted, ContextTrimmed, Event, GenerationEnded
from mindloop.memory import (
    CharCounter,
    CompactionMethod,
    DialogCompaction,
    MemoryCompiler,
    Part,
    Section,
    SectionKind,
    request_tokens,
    verdicts_by_tool,
)
from mindloop.memory.tokens import MESSAGE_OVERHEAD, message_tokens, messages_tokens
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    GenerationRequest,
    ToolCall,
    ToolResultMessage,
)
from mindloop.store import DialogRecord
from mindloop.store.summaries import Summaries, SummaryKind, SummaryRecord
from mindloop.testing import FunctionModel, Turn, call
from mindloop.tools.base import Tool
from tests.scenario_util import write_team

TASK = "tasks/example.tsk"


class Budgeted(DefaultPolicy):
    """A phase-like policy: its requests are compiled from budgeted sections."""

    def __init__(self, sections: Sequence[Section] = ()) -> None:
        self.memory: BudgetedRequests | None = None
        self.sections = sections
        self.compiled: list[BudgetedRequest] = []

    def compile_request(
        self, live: LiveDialog, parts: RequestBuilder, tools: Sequence[Tool]
    ) -> GenerationRequest:
        assert self.memory is not None
        out = self.memory.compile_request(live, parts, tools, sections=self.sections, phase="DO")
        self.compiled.append(out)
        return out.request


def set_window(rtws: Path, tokens: int) -> None:
    llm = rtws / ".minds" / "llm.yaml"
    llm.write_text(
        llm.read_text().replace("context_length: 128000", f"context_length: {tokens}", 1)
    )


def runtime(
    rtws: Path, model: FunctionModel, policy: Budgeted, **kw: object
) -> tuple[DialogRuntime, list[Event]]:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})

    def policies(rec: DialogRecord) -> Budgeted | None:
        return policy if rec.kind == "root" else None

    rt = DialogRuntime(rtws, providers={"mock": model}, policies=policies, max_steps=400)
    compiler = MemoryCompiler(MemoryConfig(), **kw)  # type: ignore[arg-type]
    policy.memory = BudgetedRequests(
        compiler, rt.store, rt.bus, verdict_of=verdicts_by_tool(frozenset({"list_dir"}))
    )
    policy.memory.attach()
    events: list[Event] = []
    rt.bus.subscribe(events.append)
    return rt, events


def live_dev(
    rt: DialogRuntime, record: DialogRecord, policy: Budgeted, history: History
) -> LiveDialog:
    """`dev`'s root dialog as a drive holds it, with `history` as its view."""
    return LiveDialog(
        record=record,
        member=rt.config.member("dev"),
        policy=policy,
        root_member="dev",
        history=history,
    )


def reader(steps: int, *, input_factor: float | None = None) -> FunctionModel:
    """Reads big.txt `steps` times, then answers; reports input tokens as `input_factor`
    × the request's characters / 4 when given."""
    count = 0

    def turn(req: GenerationRequest) -> Turn:
        nonlocal count
        count += 1
        usage = None
        if input_factor is not None:
            usage = round(
                input_factor * request_tokens(req.system, req.messages, req.tools, CharCounter())
            )
        if count > steps:
            return Turn(text="done", input_tokens=usage, output_tokens=5)
        return Turn(
            tool_calls=[call("read_file", path="big.txt")], input_tokens=usage, output_tokens=5
        )

    return FunctionModel(turn)


async def test_input_tokens_stay_within_b_over_a_long_drive(rtws: Path) -> None:
    (rtws / "big.txt").write_text("line of output\n" * 4000, "utf-8")  # ~15k tokens a read
    model = reader(60)
    policy = Budgeted()
    rt, _ = runtime(rtws, model, policy)
    rt.start_root_dialog(TASK, "read it again and again", "dev")
    await Scheduler(rt).run()
    counter = CharCounter()
    sizes = [messages_tokens(r.messages, counter) for r in model.requests]
    budget = policy.compiled[0].compiled.budgets.total
    assert len(sizes) == 61 and budget == 32_000
    assert max(sizes) <= budget
    assert sizes[60] <= 1.2 * sizes[10]  # flat: the history does not grow the request
    await rt.aclose()


async def test_the_taskdoc_stays_whole_in_the_system_prompt_and_is_flagged(rtws: Path) -> None:
    progress = "".join(f"- step {i}: did something worth remembering\n" for i in range(400))
    (rtws / TASK / "progress.md").write_text(progress, "utf-8")
    model = reader(1)
    policy = Budgeted()
    rt, events = runtime(rtws, model, policy)
    rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    for req in model.requests:
        assert progress.strip() in req.system  # whole, never trimmed
    over = policy.compiled[0].compiled.taskdoc_over
    assert over is not None and over.tokens > over.budget == 2000
    assert "change_mind" in over.ask()
    trimmed = [e for e in events if isinstance(e, ContextTrimmed)]
    assert trimmed and trimmed[0].taskdoc_over
    await rt.aclose()


async def test_trims_are_logged_with_what_they_dropped(rtws: Path) -> None:
    (rtws / "big.txt").write_text("x" * 80_000, "utf-8")  # 20k tokens: over the 6k results
    tree = Section(
        kind=SectionKind.WORKSPACE_TREE,
        parts=tuple(
            Part(id=f"n{i}", text=f"n{i} DONE " + "detail " * 200, folded=f"n{i} DONE")
            for i in range(30)
        ),
    )
    policy = Budgeted(sections=[tree])
    rt, events = runtime(rtws, reader(1), policy)
    rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    trims = [t for e in events if isinstance(e, ContextTrimmed) for t in e.trims]
    sections = {t["section"] for t in trims}
    assert {"tool_results", "workspace_tree"} <= sections
    tree_trim = next(t for t in trims if t["section"] == "workspace_tree")
    assert tree_trim["folded"] and tree_trim["tokens_after"] <= 600  # DO's tree budget
    await rt.aclose()


async def test_token_counts_are_calibrated_by_reported_usage(rtws: Path) -> None:
    (rtws / "big.txt").write_text("small\n", "utf-8")
    policy = Budgeted()
    rt, _ = runtime(rtws, reader(8, input_factor=1.6), policy)
    rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    assert policy.memory is not None
    ratio = policy.memory.compiler.calibration.ratio("mock-model")
    assert abs(ratio - 1.6) < 0.05
    await rt.aclose()


async def test_estimates_follow_every_message_of_the_requests(rtws: Path) -> None:
    """A dialog's messages are counted once and kept for the next requests' estimates:
    a model that reports exactly twice each request's size keeps the ratio at exactly 2
    over a drive whose turns make several calls each (an estimate off by one token, from
    a count kept too long, would move it)."""
    (rtws / "big.txt").write_text("line\n" * 50, "utf-8")
    count = 0

    def turn(req: GenerationRequest) -> Turn:
        nonlocal count
        count += 1
        usage = 2 * request_tokens(req.system, req.messages, req.tools, CharCounter())
        if count > 6:
            return Turn(text="done", input_tokens=usage, output_tokens=5)
        calls = [call("read_file", path="big.txt"), call("list_dir", path=".")][: 1 + count % 2]
        return Turn(tool_calls=calls, input_tokens=usage, output_tokens=5)

    policy = Budgeted()
    rt, _ = runtime(rtws, FunctionModel(turn), policy)
    rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    assert policy.memory is not None and count == 7
    assert policy.memory.compiler.calibration.ratio("mock-model") == 2.0
    await rt.aclose()


def _dialog_with_a_call(
    rtws: Path, result: dict[str, object] | None = None
) -> tuple[Budgeted, DialogRuntime, History, LiveDialog]:
    """A root dialog of the budgeted policy whose history (in hand, not stored) is the
    user's message and one `list_dir` call of generation 7 (and its `result`, if given)."""
    policy = Budgeted()
    rt, _ = runtime(rtws, reader(0), policy)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    history = History()
    history.add_row(1, "user", {"text": "go"}, None)
    history.add_row(2, "tool_call", {"id": "c1", "name": "list_dir", "arguments": "{}"}, 7)
    if result is not None:
        history.add_row(3, "tool_result", result, 7)
    return policy, rt, history, live_dev(rt, rt.store.get_dialog(root.id), policy, history)


async def test_a_message_that_grows_in_place_is_counted_again(rtws: Path) -> None:
    """An assistant message gains its tool calls in place while its generation is stored
    (`History`): the dialog's tokens count it again with the calls it has now."""
    policy, rt, history, live = _dialog_with_a_call(rtws)
    assert policy.memory is not None

    def counted() -> int:
        return sum(message_tokens(m, CharCounter()) for m in history.messages)

    assert policy.memory.dialog_tokens(live, "mock-model") == counted()
    args = '{"path": "' + "a" * 400 + '.txt"}'
    history.add_row(3, "tool_call", {"id": "c2", "name": "read_file", "arguments": args}, 7)
    assert len(history.messages) == 2  # the same assistant message, one call more
    assert policy.memory.dialog_tokens(live, "mock-model") == counted()
    await rt.aclose()


async def test_a_requests_estimate_counts_a_message_again_when_its_calls_grew(
    rtws: Path,
) -> None:
    """A request's estimate (what calibration weighs the reported usage against) counts
    each message once and keeps it for the next request that shows it, unless it gained
    calls in place since: a model reporting exactly twice each request's size then
    keeps the ratio at exactly 2."""
    result: dict[str, object] = {"call_id": "c1", "name": "list_dir", "content": "x"}
    policy, rt, history, live = _dialog_with_a_call(rtws, result)
    memory = policy.memory
    assert memory is not None
    for step in range(3):
        req = memory.compile_request(live, rt.parts, ()).request
        exact = request_tokens(req.system, req.messages, req.tools, CharCounter())
        rt.bus.publish(
            GenerationEnded(dialog_id=live.id, finish_reason="stop", input_tokens=2 * exact)
        )
        assert memory.compiler.calibration.ratio("mock-model") == 2.0
        first = history.messages[1]
        assert isinstance(first, AssistantMessage)
        first.tool_calls.append(  # (as a generation's calls are stored, in place)
            ToolCall(id=f"x{step}", name="read_file", arguments='{"path": "' + "b" * 90 + '"}')
        )
    await rt.aclose()


async def test_a_long_dialog_is_compacted_and_keeps_its_done_verdicts(rtws: Path) -> None:
    set_window(rtws, 40_000)
    (rtws / "big.txt").write_text("log line\n" * 1200, "utf-8")  # ~2.7k tokens a read
    count = 0

    def turn(req: GenerationRequest) -> Turn:
        nonlocal count
        count += 1
        if count == 2:  # a DONE verdict early on (the verdict tool here: list_dir)
            return Turn(tool_calls=[call("list_dir", path=".")])
        if count > 40:
            return Turn(text="done")
        return Turn(tool_calls=[call("read_file", path="big.txt")])

    policy = Budgeted()
    rt, events = runtime(rtws, FunctionModel(turn), policy)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    assert compactions and compactions[0].tokens_after <= 0.5 * 40_000
    assert compactions[0].tokens_before >= 0.8 * 40_000
    stored = Summaries(rt.store).of_dialog(root.id)
    assert stored and all(s.kind is SummaryKind.DIALOG for s in stored)
    # The verdict (list_dir's result) is carried into every later request.
    listing = next(
        m.data["content"]
        for m in rt.store.load_history(root.id)
        if m.kind == "tool_result" and m.data["name"] == "list_dir"
    )
    last = policy.compiled[-1]
    assert last.compaction is not None and any(listing in v for v in last.compaction.verdicts)
    summary = last.compiled.section(SectionKind.DIALOG_SUMMARY)
    assert summary.parts and listing in summary.parts[0].text
    await rt.aclose()


async def test_the_dialog_tokens_are_its_compacted_view_whatever_the_fold(rtws: Path) -> None:
    """The dialog's tokens are tallied once per message and the counts kept (as it is, and
    as a compaction folds it at its place): after compactions with other fold settings
    they are still the tokens of the dialog as the newest compaction shows it."""
    set_window(rtws, 40_000)
    (rtws / "big.txt").write_text("log line\n" * 1200, "utf-8")  # ~2.7k tokens a read
    count, stop = 0, 24

    def turn(req: GenerationRequest) -> Turn:
        nonlocal count
        count += 1
        if count > stop:
            return Turn(text="done")
        return Turn(text="why " * 500, tool_calls=[call("read_file", path="big.txt")])

    policy = Budgeted()
    rt, _ = runtime(rtws, FunctionModel(turn), policy)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    memory = policy.memory
    assert memory is not None
    live = rt.live.load(root.id)

    def viewed() -> int:
        c = policy.compiled[-1].compaction
        assert c is not None
        view = c.view(live.history.messages)
        return sum(message_tokens(m, CharCounter()) for m in view) - MESSAGE_OVERHEAD

    assert memory.dialog_tokens(live, "mock-model") == viewed()
    config = memory.compiler.config
    folds = config.compaction.model_copy(
        update={"folded_result_tokens": 20, "long_text_tokens": 90}
    )
    memory.compiler.config = config.model_copy(update={"compaction": folds})
    stop += 24
    rt.post_user_message(root.id, "go on")
    await Scheduler(rt).run()
    newest = policy.compiled[-1].compaction
    assert newest is not None and newest.fold_tokens == 20
    assert memory.dialog_tokens(live, "mock-model") == viewed()
    await rt.aclose()


async def test_messages_folded_again_with_other_settings_are_counted_again(rtws: Path) -> None:
    """A message's count as a compaction folds it is kept by the message, its place and
    the fold settings: a newer compaction of the same messages that folds them otherwise
    (another `loop.memory.compaction`) is counted with its own folds."""
    policy = Budgeted()
    rt, _ = runtime(rtws, reader(0), policy)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    record = rt.store.get_dialog(root.id)
    msgs: list[ChatMessage] = []
    for i in range(6):
        msgs.append(
            AssistantMessage(text="why " * 300, tool_calls=[ToolCall(id=f"c{i}", name="x")])
        )
        msgs.append(ToolResultMessage(call_id=f"c{i}", name="x", content="log line\n" * 200))
    memory = policy.memory
    assert memory is not None

    def shown(c: DialogCompaction) -> int:
        """The dialog's tokens as `c` shows it (the drive's view of the same messages)."""
        with rt.store.tx():
            Summaries(rt.store).add(
                SummaryRecord(
                    task_path=TASK,
                    dialog_id=root.id,
                    kind=SummaryKind.DIALOG,
                    course=record.course,
                    writer="compaction",
                    text="",
                    data=c.model_dump(mode="json"),
                )
            )
        history = History()
        history.messages = msgs  # the very same messages, in a new drive's view
        live = live_dev(rt, record, policy, history)
        return memory.dialog_tokens(live, "mock-model")

    first = DialogCompaction(
        dialog_id=root.id,
        course=record.course,
        upto=0,
        fold_before=len(msgs) - 2,
        fold_tokens=60,
        long_tokens=400,
        narrative="",
        verdicts=(),
        method=CompactionMethod.FOLD,
        llm_pending=False,
        messages_at=len(msgs),
        tokens_before=0,
        tokens_after=0,
        replaced=(),
    )
    second = first.model_copy(update={"fold_tokens": 10, "long_tokens": 50})
    for c in (first, second):
        assert shown(c) == sum(message_tokens(m, CharCounter()) for m in c.view(msgs))
    await rt.aclose()


async def test_pending_summaries_are_written_by_the_model(rtws: Path) -> None:
    set_window(rtws, 40_000)
    (rtws / "big.txt").write_text("L" * 30_000, "utf-8")  # a huge result each step
    count = 0

    def turn(req: GenerationRequest) -> Turn:
        nonlocal count
        count += 1
        if count > 12:
            return Turn(text="done")
        return Turn(
            text="x" * 9000 if count < 6 else "", tool_calls=[call("read_file", path="big.txt")]
        )

    policy = Budgeted()
    rt, _ = runtime(rtws, FunctionModel(turn), policy)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    assert policy.memory is not None and policy.memory.pending

    async def summarizer(prompt: str, target: int) -> str:
        return "SUMMARY: read big.txt many times"

    before = policy.compiled[-1].compiled.section(SectionKind.DIALOG_SUMMARY)
    assert before.parts and "SUMMARY" not in before.parts[0].text  # the digest stood in
    assert await policy.memory.run_summaries(summarizer) == 1
    assert not policy.memory.pending
    newest = Summaries(rt.store).latest(SummaryKind.DIALOG, dialog_id=root.id)
    assert newest is not None and newest.text.splitlines()[1] == "SUMMARY: read big.txt many times"
    # The next request shows the model's summary (the section is kept per compaction).
    rt.post_user_message(root.id, "one more thing")
    await Scheduler(rt).run()
    after = policy.compiled[-1].compiled.section(SectionKind.DIALOG_SUMMARY)
    assert after.parts[0].text.startswith("SUMMARY: read big.txt many times")
    await rt.aclose()


async def test_dialogs_of_other_policies_cost_nothing(rtws: Path) -> None:
    (rtws / "big.txt").write_text("x" * 80_000, "utf-8")
    model = reader(3)
    policy = Budgeted()
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    rt = DialogRuntime(rtws, providers={"mock": model})  # the default policy everywhere
    memory = BudgetedRequests(MemoryCompiler(MemoryConfig()), rt.store, rt.bus)
    memory.attach()
    policy.memory = memory
    statements = rt.store.stats.statements
    rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    assert not memory._states and not memory._estimates and not memory.pending
    assert rt.store.stats.statements > statements  # the drive ran, untouched by memory
    await rt.aclose()


async def test_an_overflowing_dialog_summary_is_rewritten_shorter_by_the_model(rtws: Path) -> None:
    set_window(rtws, 16_000)  # B = 4,000: the dialog summary's budget scales to 150
    (rtws / "big.txt").write_text("L" * 8_000, "utf-8")
    count = 0

    def turn(req: GenerationRequest) -> Turn:
        nonlocal count
        count += 1
        if count > 30:
            return Turn(text="done")
        return Turn(
            text=f"step {count} " + "why " * 300, tool_calls=[call("read_file", path="big.txt")]
        )

    policy = Budgeted()
    rt, _ = runtime(rtws, FunctionModel(turn), policy)
    rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    assert policy.memory is not None
    assert any(SectionKind.DIALOG_SUMMARY in b.compiled.compact for b in policy.compiled)
    asked: list[int] = []

    async def summarizer(prompt: str, target: int) -> str:
        asked.append(target)
        return "short"

    assert await policy.memory.run_summaries(summarizer) == 1
    assert asked and asked[0] < 150
    [state] = policy.memory._states.values()
    assert state.compaction is not None and state.compaction.narrative == "short"


async def test_the_summary_asked_for_fits_beside_the_newest_verdicts(rtws: Path) -> None:
    """An overflowing dialog summary is asked to fit beside its DONE verdicts: at every
    step the target is what the section's budget leaves beside the verdicts of the
    compaction the request shows, however many verdicts the compactions since added."""
    set_window(rtws, 16_000)  # B = 4,000: the dialog summary's budget scales to 150
    (rtws / "big.txt").write_text("L" * 8_000, "utf-8")
    for i in range(12):
        (rtws / f"e{i}").mkdir()
    count = 0

    def turn(req: GenerationRequest) -> Turn:
        nonlocal count
        count += 1
        if count > 40:
            return Turn(text="done")
        if count % 3 == 0:  # a DONE verdict (the verdict tool here: list_dir)
            return Turn(tool_calls=[call("list_dir", path=f"e{count // 3}")])
        return Turn(
            text=f"step {count} " + "why " * 300, tool_calls=[call("read_file", path="big.txt")]
        )

    seen: list[tuple[BudgetedRequest, int | None]] = []

    class Watching(Budgeted):
        def compile_request(
            self, live: LiveDialog, parts: RequestBuilder, tools: Sequence[Tool]
        ) -> GenerationRequest:
            req = super().compile_request(live, parts, tools)
            assert self.memory is not None
            waiting = self.memory.pending.get(live.id)
            out = self.compiled[-1]
            asked = waiting[1].target_tokens if waiting and waiting[0] is out.compaction else None
            seen.append((out, asked))
            return req

    policy = Watching()
    rt, _ = runtime(rtws, FunctionModel(turn), policy)
    rt.start_root_dialog(TASK, "go", "dev")
    await Scheduler(rt).run()
    checked = set()
    for out, asked in seen:
        c = out.compaction
        if asked is None or c is None or SectionKind.DIALOG_SUMMARY not in out.compiled.compact:
            continue
        budget = out.compiled.budgets.sections[SectionKind.DIALOG_SUMMARY]
        assert asked == budget - CharCounter().count("\n".join(c.verdicts)) - RESUMMARY_MARGIN
        checked.add(c.verdicts)
    assert len(checked) >= 2  # compactions with other verdicts, each weighed by its own
    await rt.aclose()


async def test_each_request_offers_the_tools_it_was_given(rtws: Path) -> None:
    """The specs of a tool selection are kept by the selection: other selections, the
    same list changed in place, and a new list of other tools each get their own specs."""
    policy = Budgeted()
    rt, _ = runtime(rtws, reader(0), policy)
    root, _ = rt.start_root_dialog(TASK, "go", "dev")
    history = History()
    history.add_row(1, "user", {"text": "go"}, None)
    live = live_dev(rt, rt.store.get_dialog(root.id), policy, history)
    assert policy.memory is not None
    every = rt.parts.member_tools(live.member, is_root=True)
    assert len(every) >= 3
    offered = list(every[:2])
    for tools in (offered, every[1:3], offered, every, offered):
        req = policy.memory.compile_request(live, rt.parts, tools).request
        assert [s.name for s in req.tools] == [t.name for t in tools]
    offered[0] = every[2]  # changed in place
    req = policy.memory.compile_request(live, rt.parts, offered).request
    assert [s.name for s in req.tools] == [every[2].name, every[1].name]
    for i in range(3):  # new lists, whatever ids they get
        tools = [every[i]]
        req = policy.memory.compile_request(live, rt.parts, tools).request
        assert [s.name for s in req.tools] == [every[i].name]
    await rt.aclose()
