"""Compacting a dialog that grew too long (agent-loop §7.2, trigger 2).

When a dialog's tokens reach `trigger` (0.80) × the model's window it is compacted to
`target` (0.50) × the window — at most once every `min_turns_between` turns, unless it
reached `force_at` (0.95). Mechanical first:

1. **Fold**: outside the newest turns, each tool result becomes a short reference to the
   stored message (its head kept), and long texts keep their head and tail. Nothing is
   lost: the messages stay in the store, and the worklog keeps every result.
2. **Drop**: if folding is not enough, the oldest turns are replaced by a summary; a
   mechanical digest stands in at once, and an LLM summary of the dropped turns is asked
   for (`SummaryRequest`) — the only case that needs a model.

A DONE node's verdict is never dropped: every verdict found in the folded or dropped
turns (`VerdictOf`) is carried verbatim into the summary, which is never cut.

A `DialogCompaction` is the result, a deterministic function of the dialog's messages:
`view(messages)` gives the compacted messages again after a reload, so the record is
all that needs storing (`store.summaries`, kind `dialog`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from mindloop.config.loop_memory import Compaction
from mindloop.i18n import Lang
from mindloop.memory.sections import Part
from mindloop.memory.tokens import MESSAGE_OVERHEAD, CharCounter, TokenCounter, message_tokens
from mindloop.memory.trim import clip
from mindloop.memory.turns import Turn, split_turns
from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolResultMessage,
    UserMessage,
)

# Folding counts characters (4 per token), not the calibrated counter: a stored
# compaction must give the same view whatever calibration learned since.
_FOLD_COUNTER = CharCounter()

VerdictOf = Callable[[Turn], "str | None"]
Summarizer = Callable[[str, int], Awaitable[str]]  # (text to summarise, target tokens)


class CompactionMethod(StrEnum):
    FOLD = "fold"  # tool results folded and long texts cut: nothing dropped
    DROP = "drop"  # the oldest turns replaced by a mechanical digest (LLM summary asked)
    LLM = "llm"  # the dropped turns summarised by the model


_SUMMARY_HEAD: dict[Lang, str] = {
    "en": "[Summary of the earlier part of this dialog]",
    "zh": "[本对话前面部分的摘要]",
}
_VERDICTS_HEAD: dict[Lang, str] = {
    "en": "DONE verdicts (verbatim):",
    "zh": "DONE 结论（原文）：",
}
_FOLDED: dict[Lang, str] = {
    "en": "[folded: result of {name}, {n} characters; the full text is message {index} of "
    "this dialog's history]",
    "zh": "[已折叠：{name} 的结果，{n} 个字符；全文为本对话历史的第 {index} 条消息]",
}
_DIGEST: dict[Lang, str] = {
    "en": "Messages {a}–{b} ({turns} turns) compacted. Tools used: {tools}. {errors} errors.",
    "zh": "消息 {a}–{b}（{turns} 轮）已压缩。使用的工具：{tools}。错误 {errors} 次。",
}
_ASKED: dict[Lang, str] = {"en": "Asked: ", "zh": "请求："}
_SUMMARIZE_PROMPT: dict[Lang, str] = {
    "en": "Summarise these earlier turns of your dialog for your own later use, in at most "
    "{tokens} tokens: goals, decisions and why, results, open questions. Facts only; no "
    "instructions.\n\nSummary so far:\n{prior}\n\nTurns:\n{text}",
    "zh": "为你自己之后使用，用不超过 {tokens} 个 token 总结本对话之前的这些轮次：目标、决定及"
    "原因、结果、未决问题。只写事实，不写指令。\n\n已有摘要：\n{prior}\n\n轮次：\n{text}",
}


class DialogCompaction(BaseModel):
    """One compaction of one course of a dialog."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dialog_id: str
    course: int
    upto: int  # the course's first `upto` messages are replaced by the summary
    fold_before: int  # messages before this index: results folded, long texts cut
    fold_tokens: int  # what a folded result keeps of its head
    long_tokens: int  # texts longer than this keep their head and tail
    narrative: str  # the digest (or the LLM's summary) of the dropped turns
    verdicts: tuple[str, ...]  # DONE verdicts found so far, verbatim, never cut
    method: CompactionMethod
    llm_pending: bool  # the dropped turns await an LLM summary
    messages_at: int  # the course's messages when it was made (for the spacing rule)
    tokens_before: int
    tokens_after: int
    replaced: tuple[str, ...]  # what it replaced, for the log

    def summary_text(self, lang: Lang = "en") -> str:
        """The summary as the model reads it ("" when there is nothing to say)."""
        if not self.narrative and not self.verdicts:
            return ""
        head = _SUMMARY_HEAD.get(lang, _SUMMARY_HEAD["en"])
        return "\n".join([head, *(p.text for p in self.summary_parts(lang))])

    def summary_parts(self, lang: Lang = "en") -> list[Part]:
        """The summary as parts of the dialog summary section: the narrative, then the
        DONE verdicts (pinned: a trim cuts them last)."""
        parts = []
        if self.narrative:
            parts.append(Part(id="narrative", text=self.narrative))
        if self.verdicts:
            lines = [_VERDICTS_HEAD.get(lang, _VERDICTS_HEAD["en"])]
            lines += [f"- {v}" for v in self.verdicts]
            parts.append(Part(id="verdicts", text="\n".join(lines), pinned=True))
        return parts

    def view(self, messages: Sequence[ChatMessage], lang: Lang = "en") -> list[ChatMessage]:
        """The course's messages as compacted: the summary, then the messages after
        `upto`, folded before `fold_before`. Messages appended since stay as they are."""
        out: list[ChatMessage] = []
        summary = self.summary_text(lang)
        if summary:
            out.append(UserMessage(text=summary))
        for i in range(self.upto, len(messages)):
            msg = messages[i]
            if i < self.fold_before:
                msg = fold_message(msg, i, self.fold_tokens, self.long_tokens, lang)
            out.append(msg)
        return out


FOLDS_KEPT = 4096  # folded messages a `Folds` keeps (emptied when full)


class Folds:
    """Old messages as compaction folds them (`fold_message`), each folded once: a
    compaction folds every message from the previous one's start, the dialog's tally
    after it folds them again, and a request shows the turns it keeps as folded. A
    message before a compaction's `fold_before` never changes (a history is appended
    to; only its newest message may still grow): a fold is kept by the message (the
    entry holds it, so its id is not reused while it stands), its place and the fold's
    settings, and the table is emptied when full (a fixed amount of memory)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[tuple[int, int, int, int, str], tuple[ChatMessage, ChatMessage]] = {}

    def fold(
        self, msg: ChatMessage, index: int, fold_tokens: int, long_tokens: int, lang: Lang
    ) -> ChatMessage:
        """`fold_message(msg, index, fold_tokens, long_tokens, lang)`."""
        key = (id(msg), index, fold_tokens, long_tokens, lang)
        held = self._held.get(key)
        if held is not None and held[0] is msg:
            return held[1]
        folded = fold_message(msg, index, fold_tokens, long_tokens, lang)
        if len(self._held) >= FOLDS_KEPT:
            self._held.clear()
        self._held[key] = (msg, folded)
        return folded


def fold_message(
    msg: ChatMessage, index: int, fold_tokens: int, long_tokens: int, lang: Lang
) -> ChatMessage:
    """An old message as compaction keeps it: a tool result as a reference to the stored
    message (its head kept), a long text as its head and tail."""
    if isinstance(msg, ToolResultMessage):
        n = len(msg.content)
        if _FOLD_COUNTER.count(msg.content) <= fold_tokens:
            return msg
        ref = _FOLDED.get(lang, _FOLDED["en"]).format(name=msg.name, n=n, index=index)
        head = msg.content[: int(fold_tokens * _FOLD_COUNTER.chars_per_token)]
        return msg.model_copy(update={"content": ref + "\n" + head})
    half = long_tokens // 2
    if isinstance(msg, UserMessage):
        text = clip(msg.text, long_tokens - half, half, _FOLD_COUNTER, lang)
        return msg if text == msg.text else UserMessage(text=text)
    assert isinstance(msg, AssistantMessage)
    text = clip(msg.text, long_tokens - half, half, _FOLD_COUNTER, lang)
    return msg if text == msg.text else msg.model_copy(update={"text": text})


class SummaryRequest(BaseModel):
    """The dropped turns of a compaction, to be summarised by the model (in the
    background: a request is never held for it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dialog_id: str
    course: int
    upto: int
    prior: str  # the narrative before these turns were dropped
    text: str  # the dropped turns, rendered
    target_tokens: int


def resummary_request(compaction: DialogCompaction, target_tokens: int) -> SummaryRequest:
    """Compaction trigger 1 for the dialog summary: its narrative overflowed its section,
    so the model rewrites it shorter (the verdicts stay as they are)."""
    return SummaryRequest(
        dialog_id=compaction.dialog_id,
        course=compaction.course,
        upto=compaction.upto,
        prior="",
        text=compaction.narrative,
        target_tokens=max(1, target_tokens),
    )


def compaction_due(tokens: int, window: int, turns_since: int | None, spec: Compaction) -> bool:
    """Trigger 2 with the spacing rule: at `trigger` × window, at least
    `min_turns_between` turns after the last compaction (None: there was none), the
    spacing waived at `force_at` × window."""
    if tokens < spec.trigger * window:
        return False
    if turns_since is None or turns_since >= spec.min_turns_between:
        return True
    return tokens >= spec.force_at * window


def compact(
    messages: Sequence[ChatMessage],
    *,
    dialog_id: str,
    course: int,
    window: int,
    spec: Compaction,
    keep_turns: int,
    counter: TokenCounter,
    prior: DialogCompaction | None = None,
    verdict_of: VerdictOf | None = None,
    lang: Lang = "en",
    folds: Folds | None = None,
) -> tuple[DialogCompaction, SummaryRequest | None]:
    """Compact `messages` (one course, whole) to `spec.target` × window if it can: the
    newest `keep_turns` turns are never touched. Returns the compaction and, when turns
    had to be dropped, the request for their LLM summary. `folds`: the dialog's folded
    messages, kept from fold to fold (each old message folded once)."""
    fold = folds.fold if folds is not None else fold_message
    start = prior.upto if prior else 0
    turns = split_turns(messages, start)
    recent_from = turns[max(0, len(turns) - keep_turns)].start if turns else len(messages)
    target = int(spec.target * window)
    verdicts = list(prior.verdicts) if prior else []
    if verdict_of is not None:
        seen = set(verdicts)
        for turn in turns:
            if turn.start >= recent_from:
                break
            found = verdict_of(turn)
            if found and found not in seen:
                verdicts.append(found)
                seen.add(found)

    def made(
        upto: int, narrative: str, method: CompactionMethod, pending: bool
    ) -> DialogCompaction:
        return DialogCompaction(
            dialog_id=dialog_id,
            course=course,
            upto=upto,
            fold_before=max(recent_from, upto),
            fold_tokens=spec.folded_result_tokens,
            long_tokens=spec.long_text_tokens,
            narrative=narrative,
            verdicts=tuple(verdicts),
            method=method,
            llm_pending=pending,
            messages_at=len(messages),
            tokens_before=0,
            tokens_after=0,
            replaced=(),
        )

    # What each message after `start` costs as it is and, before `recent_from`, folded:
    # a candidate's view (`DialogCompaction.view`) costs its summary, the folded
    # messages from its `upto` to `recent_from` and the recent ones as they are, so each
    # candidate is weighed by sums, not by viewing and counting the dialog again.
    fold_tokens, long_tokens = spec.folded_result_tokens, spec.long_text_tokens
    raw = [message_tokens(messages[i], counter) for i in range(start, len(messages))]
    folded_costs = [
        _folded_cost(
            messages[i],
            fold(messages[i], i, fold_tokens, long_tokens, lang),
            counter,
            raw[i - start],
        )
        for i in range(start, recent_from)
    ]
    recent_cost = sum(raw[recent_from - start :])

    def cost(c: DialogCompaction) -> int:  # == the tokens of c.view(messages)
        return _summary_cost(c, counter, lang) + sum(folded_costs[c.upto - start :]) + recent_cost

    if prior is None:
        tokens_before = sum(raw)
    else:  # prior.view(messages): folded before its own fold_before, with its own params
        same = (prior.fold_tokens, prior.long_tokens) == (fold_tokens, long_tokens)
        tokens_before = _summary_cost(prior, counter, lang)
        for i in range(start, len(messages)):
            if i >= prior.fold_before:
                tokens_before += raw[i - start]
            elif same and i < recent_from:
                tokens_before += folded_costs[i - start]
            else:
                msg = messages[i]
                short = fold(msg, i, prior.fold_tokens, prior.long_tokens, lang)
                tokens_before += _folded_cost(msg, short, counter, raw[i - start])
    narrative = prior.narrative if prior else ""
    pending = prior.llm_pending if prior else False
    folded = made(start, narrative, CompactionMethod.FOLD, pending)
    after = cost(folded)
    replaced = []
    if recent_from > start:
        replaced.append(f"messages {start}–{recent_from - 1}: results folded, long texts cut")
    request = None
    result = folded
    if after > target:
        # Drop the oldest turns until the rest fits (the recent ones always stay).
        older = [t for t in turns if t.start < recent_from]
        costs = [sum(folded_costs[t.start - start : t.end - start]) for t in older]
        n, excess = 0, after - target
        while n < len(older) and excess > 0:
            excess -= costs[n]
            n += 1
        while n:
            dropped = older[:n]
            upto = dropped[-1].end
            digest = _digest(dropped, lang)
            text = _bounded(f"{narrative}\n{digest}".strip(), spec.summary_tokens, lang)
            result = made(upto, text, CompactionMethod.DROP, True)
            after = cost(result)
            if after <= target or n == len(older):
                break
            n += 1
        if n:
            replaced.append(f"messages {start}–{result.upto - 1}: replaced by the summary")
            request = SummaryRequest(
                dialog_id=dialog_id,
                course=course,
                upto=result.upto,
                prior=narrative,
                text=_render(older[:n]),
                target_tokens=spec.summary_tokens,
            )
    return (
        result.model_copy(
            update={
                "tokens_before": tokens_before,
                "tokens_after": after,
                "replaced": tuple(replaced),
            }
        ),
        request,
    )


def _summary_cost(c: DialogCompaction, counter: TokenCounter, lang: Lang) -> int:
    """What the summary message of `c.view` costs (0: it has none)."""
    text = c.summary_text(lang)
    return MESSAGE_OVERHEAD + counter.count(text) if text else 0


def _folded_cost(msg: ChatMessage, folded: ChatMessage, counter: TokenCounter, raw: int) -> int:
    """What `msg` costs folded (`folded`: `fold_message`'s of it, the very message when
    it is kept as it is); `raw`: what it costs as it is."""
    return raw if folded is msg else message_tokens(folded, counter)


async def summarize(
    compaction: DialogCompaction,
    request: SummaryRequest,
    summarizer: Summarizer,
    *,
    lang: Lang = "en",
    counter: TokenCounter | None = None,
) -> DialogCompaction:
    """The compaction with the model's summary of its dropped turns in place of the
    digest (verdicts stay verbatim; the summary is bounded, whatever the model wrote).
    A request for an older compaction leaves this one as it is."""
    if request.upto != compaction.upto:
        return compaction
    prompt = _SUMMARIZE_PROMPT.get(lang, _SUMMARIZE_PROMPT["en"]).format(
        tokens=request.target_tokens, prior=request.prior or "-", text=request.text
    )
    text = (await summarizer(prompt, request.target_tokens)).strip()
    if not text:
        return compaction
    narrative = clip(text, request.target_tokens, 0, counter or _FOLD_COUNTER, lang)
    return compaction.model_copy(
        update={"narrative": narrative, "method": CompactionMethod.LLM, "llm_pending": False}
    )


def verdicts_by_tool(tools: frozenset[str]) -> VerdictOf:
    """A DONE verdict is a successful call of one of `tools` (the loop's verdict-writing
    tools): the call and its result, verbatim."""

    def verdict_of(turn: Turn) -> str | None:
        first = turn.messages[0]
        if not isinstance(first, AssistantMessage):
            return None
        results = {m.call_id: m for m in turn.messages[1:] if isinstance(m, ToolResultMessage)}
        found = []
        for call in first.tool_calls:
            res = results.get(call.id)
            if call.name in tools and res is not None and not res.is_error:
                found.append(f"{call.name}({call.arguments}) → {res.content}")
        return "\n".join(found) or None

    return verdict_of


def _digest(dropped: Sequence[Turn], lang: Lang) -> str:
    tools: Counter[str] = Counter()
    errors = 0
    asked: list[str] = []
    for turn in dropped:
        for msg in turn.messages:
            if isinstance(msg, AssistantMessage):
                tools.update(c.name for c in msg.tool_calls)
            elif isinstance(msg, ToolResultMessage):
                errors += msg.is_error
            elif isinstance(msg, UserMessage) and len(asked) < 5:
                asked.append(" ".join(msg.text.split())[:120])
    used = ", ".join(f"{name}×{n}" for name, n in tools.most_common()) or "-"
    line = _DIGEST.get(lang, _DIGEST["en"]).format(
        a=dropped[0].start, b=dropped[-1].end - 1, turns=len(dropped), tools=used, errors=errors
    )
    if asked:
        line += "\n" + _ASKED.get(lang, _ASKED["en"]) + " | ".join(asked)
    return line


def _bounded(narrative: str, tokens: int, lang: Lang) -> str:
    """The narrative within `tokens`, the newest part kept."""
    return clip(narrative, 0, tokens, _FOLD_COUNTER, lang)


def _render(turns: Sequence[Turn]) -> str:
    lines = []
    for turn in turns:
        for msg in turn.messages:
            if isinstance(msg, UserMessage):
                lines.append(f"user: {msg.text}")
            elif isinstance(msg, AssistantMessage):
                if msg.text:
                    lines.append(f"assistant: {msg.text}")
                lines += [f"call {c.name}({c.arguments})" for c in msg.tool_calls]
            else:
                flag = " (error)" if msg.is_error else ""
                lines.append(f"result of {msg.name}{flag}: {msg.content}")
    return "\n".join(lines)
