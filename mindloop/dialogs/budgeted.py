"""Budgeted requests: the seam between a turn policy and memory compilation.

A policy that wants its requests compiled from budgeted sections (the work loop's
phases) calls `BudgetedRequests.compile_request` from its own `compile_request`:

    class DoPhase(DefaultPolicy):
        def compile_request(self, live, parts, tools):
            return self.memory.compile_request(
                live, parts, tools, sections=self.sections(live), phase="DO"
            ).request

It builds the recent history and the last step's results from the dialog's history
(unless the policy passes its own), the dialog summary from the dialog's newest
compaction, measures the Taskdoc (which the system prompt carries whole), compiles
within B (`memory.MemoryCompiler`) and publishes what it trimmed (`ContextTrimmed`).
When the dialog's own tokens reach 80 % of the model's window it is compacted first
(`memory.compaction`): mechanically at once, and the LLM summary of what was dropped is
left for `run_summaries`, which the loop awaits off the request path.

Dialogs whose policy never calls it pay nothing: no state, no query, no event. A policy
that does pays, per step, a walk over its last K turns and one compile; the store is read
once per drive (the dialog's newest compaction) and written only when it compacts.
Token counts are calibrated from the provider's reported usage: the estimate of each
request is kept until its `GenerationEnded` event comes back (`attach`).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.policy import PolicyError
from mindloop.dialogs.request import RequestBuilder, with_reminders
from mindloop.events.bus import EventBus
from mindloop.events.types import ContextCompacted, ContextTrimmed, Event, GenerationEnded
from mindloop.i18n import Lang
from mindloop.memory import (
    CompiledContext,
    DialogCompaction,
    MemoryCompiler,
    Section,
    SectionKind,
    Summarizer,
    SummaryRequest,
    compact,
    compaction_due,
    summarize,
)
from mindloop.memory.compaction import Folds, VerdictOf, resummary_request
from mindloop.memory.tokens import message_tokens, request_tokens
from mindloop.memory.turns import Turn, TurnParts, history_sections, split_turns
from mindloop.providers.base import AssistantMessage, ChatMessage, GenerationRequest, ToolSpec
from mindloop.store import Store
from mindloop.store.summaries import Summaries, SummaryKind, SummaryRecord
from mindloop.tools.base import Tool

KEPT = 1024  # dialogs whose compaction state is remembered (a fixed amount of memory)
FOLDS_KEPT = 8192  # folded messages whose base count is kept (emptied when full)
RESUMMARY_MARGIN = 24  # tokens a dialog summary's headings take beside its texts


class SystemPromptOverCap(PolicyError):
    """The system prompt (without the Taskdoc) passed `loop.memory.system_prompt`: the
    request is not sent; the drive stops with this code and the sentence says what to
    shorten."""

    code = "ERR_SYSTEM_PROMPT_CAP"


@dataclass(frozen=True)
class BudgetedRequest:
    request: GenerationRequest
    compiled: CompiledContext
    compaction: DialogCompaction | None  # the dialog's compaction the request reflects


@dataclass
class _DialogState:
    """What one dialog's budgeted requests remember between steps of a drive."""

    history: object  # the History view it was computed over (a new drive: a new one)
    course: int
    compaction: DialogCompaction | None
    counted: int = -1  # messages tallied, the last excluded (-1: tally afresh)
    raw_tokens: int = 0  # their tokens (and the summary's) by the base counter
    # each message's tokens by the base counter, as it is (by index; the last excluded):
    # a tally after a compaction moved the start sums them again instead of counting
    counts: list[int] = field(default_factory=list)
    counts_from: int = 0  # the index of the message counts[0] is
    tried_at: int = -1  # messages when a compaction last changed nothing
    turns: TurnParts = field(default_factory=TurnParts)  # the last request's turn parts
    # the dialog summary section of `compaction` (in the compiler's language), and its
    # verdicts joined (what trigger 1 weighs)
    summary: tuple[DialogCompaction, Lang, Section] | None = None
    verdicts: tuple[DialogCompaction, str] | None = None
    # each message of the last request (by id) and its tokens by the base counter `raw_of`,
    # with its calls then (`_raw_request_tokens`)
    raw: dict[int, tuple[ChatMessage, int, int]] = field(default_factory=dict)
    raw_of: object = None


@dataclass
class _Selection:
    """A tool selection's specs (what `RequestBuilder.specs` made of it) and their tokens
    by the base counter (-1: not summed yet)."""

    parts: RequestBuilder
    tools: tuple[Tool, ...]
    specs: list[ToolSpec]
    tokens: int = -1


class BudgetedRequests:
    """One per runtime (or per loop): compiles budgeted requests for the policies that
    ask, and compacts their dialogs."""

    def __init__(
        self,
        compiler: MemoryCompiler,
        store: Store,
        bus: EventBus,
        *,
        verdict_of: VerdictOf | None = None,
    ) -> None:
        self.compiler = compiler
        self.store = store
        self.summaries = Summaries(store)
        self.bus = bus
        self.verdict_of = verdict_of
        self._states: OrderedDict[str, _DialogState] = OrderedDict()
        self._estimates: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._tool_tokens: dict[str, int] = {}
        # the tool specs of each tool selection asked for (a phase's, a member's)
        self._spec_lists: dict[tuple[int, int], _Selection] = {}
        # (message id, index, fold settings) -> (the message, its tokens folded)
        self._fold_counts: dict[tuple[int, int, int, int], tuple[ChatMessage, int]] = {}
        # old messages as compaction folds them: for a compaction, the tally after it,
        # and the turns a request shows before a compaction's `fold_before`
        self._folds = Folds()
        # Dropped turns awaiting their LLM summary, by dialog (the newest only).
        self.pending: dict[str, tuple[DialogCompaction, SummaryRequest]] = {}

    def attach(self) -> Callable[[], None]:
        """Listen for generations' usage on the bus (calibration); returns the detach."""
        return self.bus.subscribe(self._on_event)

    # ------------------------------------------------------------------ compile

    def compile_request(
        self,
        live: LiveDialog,
        parts: RequestBuilder,
        tools: Sequence[Tool],
        *,
        sections: Sequence[Section] = (),
        phase: str | None = None,
        system: str | None = None,
        skip: int | None = None,
        since: int = 0,
        taskdoc: str | None = None,
    ) -> BudgetedRequest:
        """A request whose messages are compiled within B. `sections` are the policy's
        own (input, last step summary, tree, summaries, memory, retrieved); a history or
        tool-results section given here replaces the one built from the dialog; the
        history built leaves out the message at index `skip` — the input section shows
        it, at that place among the turns (-1: before them all) — and the turns before
        index `since`. `system` replaces the default system prompt
        (persona, rules, Taskdoc), which must then still carry the Taskdoc whole; without
        the Taskdoc it may not pass `loop.memory.system_prompt` tokens
        (`SystemPromptOverCap`). `taskdoc`: the effective Taskdoc when the caller has
        just rendered it (`RequestBuilder.taskdoc`; rendered here otherwise)."""
        member = live.member
        model = parts.model_name(member)
        window = parts.model_info(member).context_length
        state = self._state(live)
        self._maybe_compact(live, state, window, model)
        given = {s.kind for s in sections}
        own: list[Section] = []
        if SectionKind.RECENT_HISTORY not in given or SectionKind.TOOL_RESULTS not in given:
            history, last = self._history(
                live.history.messages, state.compaction, skip, since, state.turns
            )
            own += [s for s in (history, last) if s.kind not in given]
        if SectionKind.DIALOG_SUMMARY not in given and state.compaction is not None:
            own.append(self._summary(state, state.compaction))
        if taskdoc is None:
            taskdoc = parts.taskdoc(live)
        compiled = self.compiler.compile(
            [*sections, *own],
            window=window,
            model=model,
            phase=phase,
            taskdoc=taskdoc,
            anchor=skip,
        )
        self._maybe_resummarize(live.id, compiled, state, model)
        system_text = parts.system_prompt(live, taskdoc=taskdoc) if system is None else system
        self._check_system(system_text, compiled.taskdoc_tokens, model, live)
        messages = with_reminders(compiled.messages(), live.reminders)  # not budgeted
        selection = self._selection(parts, tools)
        req = GenerationRequest.model_construct(
            model=model,
            system=system_text,
            messages=messages,
            tools=list(selection.specs),
            params=parts.params(member, fbr=False),
            member=member.id,
        )
        raw = self._raw_request_tokens(req, state) + self._tools_tokens(selection)
        self._remember_estimate(live.id, model, raw)
        if compiled.trims or compiled.taskdoc_over is not None:
            self.bus.publish(
                ContextTrimmed(
                    dialog_id=live.id,
                    budget=compiled.budgets.total,
                    tokens=compiled.tokens,
                    trims=tuple(t.model_dump(mode="json") for t in compiled.trims),
                    taskdoc_tokens=compiled.taskdoc_tokens,
                    taskdoc_over=compiled.taskdoc_over is not None,
                )
            )
        return BudgetedRequest(request=req, compiled=compiled, compaction=state.compaction)

    def _selection(self, parts: RequestBuilder, tools: Sequence[Tool]) -> _Selection:
        """`parts.specs(tools)`, kept by the selection (a policy offers the same list at
        every step of a phase: found by its identity, used while it holds the very same
        tools); the request gets a list of its own."""
        key = (id(parts), id(tools))
        held = self._spec_lists.get(key)
        if held is None or held.parts is not parts or held.tools != tuple(tools):
            if len(self._spec_lists) >= KEPT:
                self._spec_lists.clear()
            held = self._spec_lists[key] = _Selection(parts, tuple(tools), parts.specs(tools))
        return held

    def _tools_tokens(self, selection: _Selection) -> int:
        """The selection's tool specs by the base counter (each name counted once), summed
        once per selection (the names' counts never change)."""
        if selection.tokens < 0:
            total = 0
            for spec in selection.specs:
                known = self._tool_tokens.get(spec.name)
                if known is None:
                    base = self.compiler.base_counter
                    known = self._tool_tokens[spec.name] = request_tokens("", (), (spec,), base)
                total += known
            selection.tokens = total
        return selection.tokens

    def _summary(self, state: _DialogState, c: DialogCompaction) -> Section:
        """The dialog summary section of compaction `c`, built once per compaction (its
        DONE verdicts grow with the task: a 200-node task's join 90 KB of them) and
        shown at every step until the next compaction or summary replaces it."""
        held = state.summary
        lang = self.compiler.lang
        if held is None or held[0] is not c or held[1] != lang:
            parts = tuple(c.summary_parts(lang))
            held = state.summary = (c, lang, Section(kind=SectionKind.DIALOG_SUMMARY, parts=parts))
        return held[2]

    def _maybe_resummarize(
        self, did: str, compiled: CompiledContext, state: _DialogState, model: str
    ) -> None:
        """Compaction trigger 1 for the dialog summary: it overflowed its section, so the
        model rewrites the narrative to fit beside the verdicts (only while the narrative
        alone is longer than what is left for it; a summary already asked for is asked
        to fit as well)."""
        c = state.compaction
        if c is None or SectionKind.DIALOG_SUMMARY not in compiled.compact:
            return
        counter = self.compiler.counter(model)
        budget = compiled.budgets.sections[SectionKind.DIALOG_SUMMARY]
        held = state.verdicts
        if held is None or held[0] is not c:  # joined once per compaction
            held = state.verdicts = (c, "\n".join(c.verdicts))
        target = budget - counter.count(held[1]) - RESUMMARY_MARGIN
        if target <= 0:
            return
        waiting = self.pending.get(did)
        if waiting is not None:  # a summary is already asked for: make it fit too
            if waiting[0] is c and waiting[1].target_tokens > target:
                self.pending[did] = (c, waiting[1].model_copy(update={"target_tokens": target}))
        elif counter.count(c.narrative) > target:
            self.pending[did] = (c, resummary_request(c, target))

    def _check_system(self, text: str, taskdoc_tokens: int, model: str, live: LiveDialog) -> None:
        """The system prompt without the Taskdoc (which is sent whole, DESIGN.md §8.4)
        within `loop.memory.system_prompt` tokens (agent-loop §7.1)."""
        cap = self.compiler.config.system_prompt
        counter = self.compiler.counter(model)
        own = counter.count(text) - taskdoc_tokens
        if own > cap:
            raise SystemPromptOverCap(
                f"the system prompt of @{live.member.id} is {own:,} tokens without the "
                f"Taskdoc, over loop.memory.system_prompt ({cap:,}) in team.yaml: shorten "
                "the member's persona, self.md or the task's rules, or raise the cap"
            )

    def _history(
        self,
        messages: Sequence[ChatMessage],
        compaction: DialogCompaction | None,
        skip: int | None = None,
        since: int = 0,
        kept: TurnParts | None = None,
    ) -> tuple[Section, Section]:
        """The recent turns and the last step, from the end of the (compacted) dialog,
        without the message at `skip` and the turns before `since` (`kept`: the parts of
        the dialog's last request, reused for unchanged turns)."""
        k = self.compiler.config.history_turns
        if compaction is None:
            return history_sections(messages, k, since, skip=skip, kept=kept)
        start = max(compaction.upto, since)
        return history_sections(
            messages, k, start, lambda t: self._folded(t, compaction), skip=skip, kept=kept
        )

    def _folded(self, turn: Turn, c: DialogCompaction) -> Turn:
        if turn.start >= c.fold_before:
            return turn
        lang, fold = self.compiler.lang, self._folds.fold
        msgs = tuple(
            fold(m, i, c.fold_tokens, c.long_tokens, lang) if i < c.fold_before else m
            for i, m in zip(range(turn.start, turn.end), turn.messages, strict=True)
        )
        return Turn(turn.start, msgs)

    # ------------------------------------------------------------------ compaction

    def _state(self, live: LiveDialog) -> _DialogState:
        """The dialog's state, loaded (one query) when its history view is new: a new
        drive, or a new course."""
        state = self._states.get(live.id)
        if state is not None and state.history is live.history:
            self._states.move_to_end(live.id)
            return state
        course = live.record.course
        found = self.summaries.latest(SummaryKind.DIALOG, dialog_id=live.id, course=course)
        compaction = None
        if found is not None and found.data:
            compaction = DialogCompaction.model_validate(found.data)
        state = _DialogState(history=live.history, course=course, compaction=compaction)
        self._states[live.id] = state
        if len(self._states) > KEPT:
            self._states.popitem(last=False)
        return state

    def dialog_tokens(self, live: LiveDialog, model: str) -> int:
        """The dialog's tokens as compacted so far (summary and the messages after it),
        tallied incrementally: each message is counted once per drive."""
        return self._tally(live.history.messages, self._state(live), model)

    def _tally(self, messages: Sequence[ChatMessage], state: _DialogState, model: str) -> int:
        base = self.compiler.base_counter
        c = state.compaction
        start = c.upto if c else 0
        if state.counted < start:  # afresh (-1), or the compaction moved the start
            state.counted, state.raw_tokens = start, 0
            if c is not None:
                state.raw_tokens = base.count(c.summary_text(self.compiler.lang))
        end = len(messages) - 1  # the last message may still grow (merged user texts)
        counts = state.counts  # each message as it is, counted once (only the last changes)
        if not counts or start < state.counts_from:  # from the start (a compaction's upto)
            counts.clear()
            state.counts_from = start
        elif start > state.counts_from:  # what a compaction dropped is not summed again
            del counts[: start - state.counts_from]
            state.counts_from = start
        first = state.counts_from
        for i in range(first + len(counts), end):
            counts.append(message_tokens(messages[i], base))
        lo, hi = state.counted, max(end, state.counted)
        if hi > lo:
            folded_to = lo
            if c is not None:  # before fold_before: as the compaction folds them
                folded_to = min(max(c.fold_before, lo), hi)
                for i in range(lo, folded_to):
                    state.raw_tokens += self._folded_tokens(messages[i], i, c)
            state.raw_tokens += sum(counts[folded_to - first : hi - first])
        state.counted = hi
        raw = state.raw_tokens
        if end >= start:
            raw += message_tokens(messages[end], base)
        return int(raw * self.compiler.calibration.ratio(model))

    def _folded_tokens(self, msg: ChatMessage, index: int, c: DialogCompaction) -> int:
        """`message_tokens` (by the base counter) of `msg` as compaction `c` folds it (at
        `index`), kept by the message and the fold: a dialog tallied again after a
        compaction moved its start folds the messages the compaction before folded alike
        (an old message no longer changes)."""
        key = (id(msg), index, c.fold_tokens, c.long_tokens)
        held = self._fold_counts.get(key)
        if held is not None and held[0] is msg:
            return held[1]
        folded = self._folds.fold(msg, index, c.fold_tokens, c.long_tokens, self.compiler.lang)
        n = message_tokens(folded, self.compiler.base_counter)
        if len(self._fold_counts) >= FOLDS_KEPT:
            self._fold_counts.clear()
        self._fold_counts[key] = (msg, n)
        return n

    def _maybe_compact(
        self, live: LiveDialog, state: _DialogState, window: int, model: str
    ) -> None:
        """Compaction trigger 2: at 80 % of the window, compact to 50 % (mechanically
        now; the LLM summary of dropped turns later, in `run_summaries`)."""
        messages = live.history.messages
        spec = self.compiler.config.compaction
        tokens = self._tally(messages, state, model)
        if tokens < spec.trigger * window:
            return
        prior = state.compaction
        if state.tried_at >= 0 and len(messages) - state.tried_at < 2:
            return  # the last try could not shrink it; wait for new turns
        since = None
        if prior is not None:
            since = len(split_turns(messages, min(prior.messages_at, len(messages))))
        if not compaction_due(tokens, window, since, spec):
            return
        result, request = compact(
            messages,
            dialog_id=live.id,
            course=live.record.course,
            window=window,
            spec=spec,
            keep_turns=self.compiler.config.history_turns,
            counter=self.compiler.counter(model),
            prior=prior,
            verdict_of=self.verdict_of,
            lang=self.compiler.lang,
            folds=self._folds,
        )
        if prior is not None and (result.upto, result.fold_before) == (
            prior.upto,
            prior.fold_before,
        ):
            state.tried_at = len(messages)  # only the newest turns are left: nothing to do
            return
        state.tried_at = -1
        self._save(live, result, "compaction")
        state.compaction = result
        state.counted = -1  # re-tally from the new start
        if request is not None:
            self.pending[live.id] = (result, request)
        self.bus.publish(
            ContextCompacted(
                dialog_id=live.id,
                method=str(result.method),
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                replaced=result.replaced,
                llm_pending=result.llm_pending,
            )
        )

    def _save(self, live: LiveDialog, c: DialogCompaction, writer: str) -> None:
        """Append the compaction (lazy: a lost one is simply made again)."""
        rec = SummaryRecord(
            task_path=live.record.task_path,
            dialog_id=live.id,
            kind=SummaryKind.DIALOG,
            course=c.course,
            writer=writer,
            text=c.summary_text(self.compiler.lang),
            data=c.model_dump(mode="json"),
        )
        with self.store.tx(durable=False):
            self.summaries.add(rec)

    async def run_summaries(self, summarizer: Summarizer) -> int:
        """Ask the model for the summaries compactions left pending; each replaces its
        compaction's digest (verdicts stay verbatim). Returns how many were written. A
        failing summary keeps the digest and stays pending for the next call."""
        done = 0
        for did, (c, request) in list(self.pending.items()):
            try:
                new = await summarize(c, request, summarizer, lang=self.compiler.lang)
            except Exception:  # the digest stands; tried again next time
                continue
            if self.pending.get(did, (None,))[0] is not c:
                continue  # a newer compaction replaced it meanwhile
            del self.pending[did]
            if new is c:
                continue
            with contextlib.suppress(KeyError):
                state = self._states[did]
                if state.compaction is c:
                    state.compaction = new
                    state.counted = -1
            rec = SummaryRecord(
                task_path=self._task_of(did),
                dialog_id=did,
                kind=SummaryKind.DIALOG,
                course=new.course,
                writer="compaction",
                text=new.summary_text(self.compiler.lang),
                data=new.model_dump(mode="json"),
            )
            with self.store.tx(durable=False):
                self.summaries.add(rec)
            done += 1
        return done

    def _task_of(self, dialog_id: str) -> str:
        return self.store.get_dialog(dialog_id).task_path

    # ------------------------------------------------------------------ calibration

    def _raw_request_tokens(self, req: GenerationRequest, state: _DialogState) -> int:
        """The request's system prompt and messages by the base counter (its tools are
        counted once per selection: `_tools_tokens`). A request holds most of its
        dialog's last request's messages, the very objects (the history's turns, the
        sections shown again): each is counted once and kept while requests show it (an
        assistant message with the calls it had then: the history adds a generation's
        calls to its message in place)."""
        base = self.compiler.base_counter
        held = state.raw if state.raw_of is base else {}
        now: dict[int, tuple[ChatMessage, int, int]] = {}
        total = base.count(req.system)
        for m in req.messages:
            key = id(m)
            calls = len(m.tool_calls) if type(m) is AssistantMessage else 0
            found = held.get(key)
            if found is None or found[0] is not m or found[2] != calls:
                found = (m, message_tokens(m, base), calls)
            now[key] = found
            total += found[1]
        state.raw, state.raw_of = now, base
        return total

    def _remember_estimate(self, dialog_id: str, model: str, estimate: int) -> None:
        self._estimates[dialog_id] = (model, estimate)
        self._estimates.move_to_end(dialog_id)
        if len(self._estimates) > KEPT:
            self._estimates.popitem(last=False)

    def _on_event(self, event: Event) -> None:
        if type(event) is not GenerationEnded or event.dialog_id is None:
            return
        found = self._estimates.pop(event.dialog_id, None)
        if found is not None:
            model, estimate = found
            self.compiler.calibration.observe(model, estimate, event.input_tokens)
