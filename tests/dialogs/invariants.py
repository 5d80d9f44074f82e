"""Scenario-independent invariants of a store, for the multi-process and crash-point tests.

`crash_scenario.check_always` / `check_done` know one scenario's expected tree; these
checks know none and hold for any rtws once everything settled. Each returns a list of
problems (empty when the store is consistent), so one assertion prints them all.

What "exactly once" means here, read from the store alone:

- A generation's *input* is the newest message of its dialog and course that no
  generation wrote (a user message, a tool result, a delivered reply, an answer, a
  runtime note) before the generation's first message. A generation is duplicated when
  two committed generations of one dialog answer the same input: a second driver ran the
  same request again. (A generation that a kill cut off commits nothing; the one that
  re-runs it is then the only one with that input.)
- A reply is delivered once when its `responses` row is marked delivered and its caller
  holds exactly one message naming that row (a `tellask_result`; or a `user` message for
  a session's further assignment or a post queued during a drive) — and no caller holds
  two results for one tellask (side dialog, call id).
- A tool call has exactly one result; a question is registered once per tellask and its
  answer injected once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from mindloop.store import GenerationRecord, QuestionRecord, Store, schema
from tests.dialogs.crash_scenario import Snapshot


@dataclass
class State(Snapshot):
    """A `Snapshot` plus every generation, every question (answered ones too) and the
    generations that were cut off (Ctrl-C, a cancelled drive), read in one transaction:
    a consistent view even while other processes write."""

    generations: dict[str, list[GenerationRecord]]
    all_questions: list[QuestionRecord]
    cancelled: list[dict[str, Any]]

    @classmethod
    def read(cls, rtws: Path) -> State:
        store = Store.for_rtws(rtws, durable=False)
        try:
            with store.tx(durable=False):  # holds the write lock: nothing changes meanwhile
                dialogs = store.list_dialogs()
                return cls(
                    dialogs=dialogs,
                    messages={d.id: store.load_history(d.id) for d in dialogs},
                    pending=store.all_pending(),
                    responses=store.all_responses(),
                    questions=store.open_questions(),
                    generations={d.id: store.generations(d.id) for d in dialogs},
                    all_questions=_all_questions(rtws),
                    cancelled=[e for e in store.events() if e["type"] == "generation_cancelled"],
                )
        finally:
            store.close()

    def who(self, dialog_id: str) -> str:
        rec = self.by_id().get(dialog_id)
        return f"@{rec.member}/{rec.kind}:{dialog_id}" if rec else dialog_id


def _all_questions(rtws: Path) -> list[QuestionRecord]:
    """Every row of the questions table (the store lists open ones only), read-only."""
    store = Store.for_rtws(rtws)
    try:
        query = sa.select(schema.questions).order_by(schema.questions.c.asked_at)
        return store._records(QuestionRecord, query)
    finally:
        store.close()


def generation_inputs(state: State) -> dict[str, Counter[tuple[int, int]]]:
    """Per dialog: how many committed generations answered each input (course, message id)."""
    found: dict[str, Counter[tuple[int, int]]] = {}
    for did, msgs in state.messages.items():
        seen: Counter[tuple[int, int]] = Counter()
        last_input: dict[int, int] = {}
        counted: set[int] = set()
        for m in sorted(msgs, key=lambda m: m.id):
            if m.generation_id is None:
                last_input[m.course] = m.id
            elif m.generation_id not in counted:
                counted.add(m.generation_id)
                seen[(m.course, last_input.get(m.course, 0))] += 1
        found[did] = seen
    return found


def generation_problems(state: State) -> list[str]:
    problems: list[str] = []
    for did, seen in generation_inputs(state).items():
        texts = {m.id: m.data.get("text", m.kind) for m in state.messages[did]}
        for (course, mid), n in seen.items():
            if n > 1:
                what = str(texts.get(mid, "the dialog's start"))[:60]
                problems.append(
                    f"{state.who(did)}: {n} generations answered the same input "
                    f"(course {course}, message {mid}: {what!r})"
                )
        with_turns = {m.generation_id for m in state.messages[did] if m.generation_id}
        for g in state.generations[did]:
            if g.finish_reason != "cancelled" and g.error is None and g.id not in with_turns:
                problems.append(f"{state.who(did)}: generation {g.id} committed without a turn")
    return problems


def reply_problems(state: State, *, settled: bool = True) -> list[str]:
    """With `settled=False` a reply may still be queued (stored, not delivered yet)."""
    problems: list[str] = []
    ids = state.by_id()
    keys = Counter((r.caller_id, r.side_id, r.call_id) for r in state.responses)
    problems += [f"reply {k} stored {n} times" for k, n in keys.items() if n > 1]
    for r in state.responses:
        if r.caller_id not in ids or r.side_id not in ids:
            problems.append(f"reply {r.id} points at a missing dialog")
            continue
        injected = sum(
            str(m.data.get("response_id")) == str(r.id) for m in state.messages[r.caller_id]
        )
        if (r.delivered, injected) != (True, 1) and (settled or r.delivered or injected):
            problems.append(
                f"reply {r.id} of {state.who(r.side_id)} to {state.who(r.caller_id)}: "
                f"delivered={r.delivered}, injected {injected} times"
            )
    known = {str(r.id) for r in state.responses}
    for did, msgs in state.messages.items():
        results = Counter(
            (m.data.get("side_id"), m.data.get("call_id"))
            for m in msgs
            if m.kind == "tellask_result" and "response_id" in m.data
        )
        problems += [
            f"{state.who(did)}: the answer of {state.who(str(k[0]))} to tellask {k[1]} "
            f"appears {n} times"
            for k, n in results.items()
            if n > 1
        ]
        problems += [
            f"{state.who(did)}: tellask result names unknown reply {m.data['response_id']}"
            for m in msgs
            if "response_id" in m.data and str(m.data["response_id"]) not in known
        ]
    return problems


def tool_problems(state: State) -> list[str]:
    problems: list[str] = []
    for did, msgs in state.messages.items():
        calls = Counter(m.data["id"] for m in msgs if m.kind == "tool_call")
        results = Counter(m.data["call_id"] for m in msgs if m.kind == "tool_result")
        problems += [
            f"{state.who(did)}: tool call id {c} used {n} times" for c, n in calls.items() if n > 1
        ]
        problems += [
            f"{state.who(did)}: tool call {c} has {results[c]} results"
            for c in calls
            if results[c] != 1
        ]
        problems += [
            f"{state.who(did)}: result for unknown call {c}" for c in results if c not in calls
        ]
    return problems


def question_problems(state: State) -> list[str]:
    problems: list[str] = []
    asked = Counter((q.dialog_id, q.call_id) for q in state.all_questions)
    problems += [
        f"question for tellask {k} registered {n} times" for k, n in asked.items() if n > 1
    ]
    for q in state.all_questions:
        injected = sum(
            m.data.get("question_id") == q.id for m in state.messages.get(q.dialog_id, [])
        )
        expected = 1 if q.status == "answered" else 0
        if injected != expected:
            problems.append(
                f"question {q.id} is {q.status}; its answer was injected {injected} times"
            )
    return problems


def consistent(state: State) -> list[str]:
    """What must hold at every instant, settled or not (e.g. right after a kill)."""
    return (
        generation_problems(state) + reply_problems(state, settled=False) + question_problems(state)
    )


def settled_problems(state: State) -> list[str]:
    """Everything done: nothing running, claimed, marked to drive, pending or open; every
    root's last message an answer; every tool call answered; every reply delivered."""
    problems = generation_problems(state) + reply_problems(state) + tool_problems(state)
    problems += question_problems(state)
    for d in state.dialogs:
        if d.status in ("running", "interrupted") or d.needs_drive or d.claim_owner:
            problems.append(
                f"{state.who(d.id)} left {d.status}, needs_drive={d.needs_drive}, "
                f"claim={d.claim_owner}"
            )
    problems += [f"pending tellask {p.caller_id} -> {p.side_id} remains" for p in state.pending]
    problems += [
        f"question {q.id} is still open" for q in state.all_questions if q.status == "open"
    ]
    for d in state.dialogs:
        msgs = state.messages[d.id]
        last: Any = msgs[-1] if msgs else None
        if last is None or last.kind != "assistant":
            problems.append(f"{state.who(d.id)} ends with {last.kind if last else 'nothing'}")
    return problems
