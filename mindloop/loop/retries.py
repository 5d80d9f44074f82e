"""What must change on every retry (agent-loop §8.3): retry records, fingerprints, and
the rules that reject a retry repeating an earlier one.

Every L2 self-repair attempt and every L3 ADJUST cycle proposes a `RetryProposal`: the
failure it answers (its output, digested with paths, times and ids masked), a short
reflection, what kind of change it makes and a fingerprint (L2: the workspace ref the
attempt starts from, after the failed self-check and before its change — the same one
twice means the attempt in between changed nothing, `self_repair`; L3: the normalised
fix plan). `RetryLedger.propose` checks it
against the node's earlier records, in order:

1. the ladder (`ladder.after_failure`): past its limit the rung is exhausted
   (L2 → CHECK_FAILED(DO_EXHAUSTED); L3 → FAILED, the user told) — no record;
2. the reflection's length (`loop.retries.reflection_tokens`), then rules (a)–(e): a proposal that breaks one is rejected with the rule's code, and the
   model must propose another — no record;
3. otherwise the record is appended in the caller's transaction (the step's).

`check_retry` is rules (a)–(e) as a pure function. Only a node's last `reflections` (3)
reflections go into the prompt (`reflections_for_prompt`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mindloop.config.loop_retries import RetriesConfig
from mindloop.dialogs.repeats import normalized, normalized_digest
from mindloop.loop.ladder import Exhausted, FailureClass, Level, after_failure
from mindloop.memory.tokens import CharCounter
from mindloop.store import Store
from mindloop.store.memo import MISS
from mindloop.store.retries import RetryRow, RetryRows
from mindloop.store.schema import retry_records as _retry_table

_REFLECTION_COUNTER = CharCounter()


class ChangeKind(StrEnum):
    PARAMS = "PARAMS"
    STRATEGY = "STRATEGY"
    TOOL = "TOOL"
    CONTEXT = "CONTEXT"
    DECOMPOSE = "DECOMPOSE"
    ASSIGNEE = "ASSIGNEE"
    ACCEPTANCE = "ACCEPTANCE"


# (c) reserved for ADJUST; (d) what makes the third L3 cycle structural.
ADJUST_ONLY = frozenset({ChangeKind.DECOMPOSE, ChangeKind.ASSIGNEE, ChangeKind.ACCEPTANCE})
STRUCTURAL = frozenset(
    {ChangeKind.STRATEGY, ChangeKind.DECOMPOSE, ChangeKind.ASSIGNEE, ChangeKind.CONTEXT}
)
RETRY_LEVELS = frozenset({Level.L2, Level.L3})


class RetryRule(StrEnum):
    """Why a retry is rejected (the codes the model is shown)."""

    FINGERPRINT_REPEATED = "RETRY_FINGERPRINT_REPEATED"  # (a)
    PARAMS_ALREADY_TRIED = "RETRY_PARAMS_ALREADY_TRIED"  # (b)
    RESERVED_FOR_ADJUST = "RETRY_RESERVED_FOR_ADJUST"  # (c)
    NOT_STRUCTURAL = "RETRY_NOT_STRUCTURAL"  # (d)
    RELAXED_WITHOUT_APPROVAL = "RETRY_RELAXED_WITHOUT_APPROVAL"  # (e)
    REFLECTION_TOO_LONG = "RETRY_REFLECTION_TOO_LONG"  # over loop.retries.reflection_tokens


class RetryProposal(BaseModel):
    """What a retry proposes (the model's part, plus the digests the runtime computed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_path: str
    todo_id: str
    level: Level
    entry: int = 0  # L2: which DO entry of the node (attempts are counted per entry)
    failure_class: FailureClass
    evidence_digest: str  # `evidence_digest(failing output)`
    evidence_refs: tuple[str, ...] = ()
    reflection: str = ""
    change_kind: ChangeKind
    change_summary: str = ""
    fingerprint: str  # L2: of the workspace ref it starts from (`retry_tool`); L3: of its plan
    relaxes_acceptance: bool = False  # an ACCEPTANCE change that weakens a criterion
    approval_id: str | None = None  # the WAIT_USER_APPROVAL approval that allows it

    @field_validator("level")
    @classmethod
    def _retry_level(cls, level: Level) -> Level:
        if level not in RETRY_LEVELS:
            raise ValueError(f"retry records are L2 or L3, not {level}")
        return level


class RetryRecord(RetryProposal):
    """An accepted retry, as stored (`store.retry_records`)."""

    id: int = 0
    attempt: int = Field(ge=1)  # L2: within its DO entry; L3: within the node
    created_at: float = 0.0

    def row(self) -> RetryRow:
        return RetryRow(
            task_path=self.task_path,
            todo_id=self.todo_id,
            level=self.level,
            entry=self.entry,
            attempt=self.attempt,
            failure_class=self.failure_class,
            evidence_digest=self.evidence_digest,
            evidence_refs=list(self.evidence_refs),
            reflection=self.reflection,
            change_kind=self.change_kind,
            change_summary=self.change_summary,
            fingerprint=self.fingerprint,
            relaxes_acceptance=self.relaxes_acceptance,
            approval_id=self.approval_id,
        )

    @classmethod
    def of_row(cls, row: RetryRow) -> RetryRecord:
        return cls.model_validate(row.model_dump() | {"evidence_refs": tuple(row.evidence_refs)})


class Rejected(BaseModel):
    """The retry breaks a rule: the model must propose another."""

    model_config = ConfigDict(frozen=True)

    rule: RetryRule
    message: str

    def text(self) -> str:
        return f"Error [{self.rule}]: {self.message}"


class Accepted(BaseModel):
    model_config = ConfigDict(frozen=True)

    record: RetryRecord


RetryVerdict = Accepted | Rejected | Exhausted


# ---------------------------------------------------------------- fingerprints


def evidence_digest(failing_output: str) -> str:
    """sha256 of the failing output, normalised (paths, times, numbers and ids masked)."""
    return normalized_digest(failing_output)


_DIFF_NOISE = re.compile(r"^(index [0-9a-f]+\.\.[0-9a-f]+.*|@@ .* @@.*)$", re.M)


def diff_fingerprint(diff: str) -> str:
    """An L2 attempt's fingerprint: its workspace diff without the parts that differ
    between two equal changes (index lines, hunk offsets, whitespace)."""
    text = _DIFF_NOISE.sub("", diff)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    body = "\n".join(line for line in lines if line)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


_WORD = re.compile(r"[\w<>]+")


def plan_fingerprint(plan: str) -> str:
    """An L3 cycle's fingerprint: its fix plan as lowercase words (numbers, paths and
    ids masked; punctuation, spacing and case ignored)."""
    words = _WORD.findall(normalized(plan).lower())
    return hashlib.sha256(" ".join(words).encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- rules (a)–(e)


def check_retry(
    new: RetryProposal,
    earlier: Sequence[RetryRecord],
    *,
    attempt: int,
    approved: Callable[[str], bool],
) -> Rejected | None:
    """Rules (a)–(e) of agent-loop §8.3 for `new`, the node's `attempt`-th retry at its
    level, given the node's `earlier` records (any level, oldest first)."""
    same_level = [r for r in earlier if r.level == new.level]
    # (a) the same change as an earlier attempt at this node and level
    for r in same_level:
        if r.fingerprint == new.fingerprint:
            then = f"attempt {r.attempt} ({r.change_kind}: {r.change_summary or 'no summary'})"
            if new.level is Level.L2:  # the workspace as an attempt starts from it
                message = (
                    f"the workspace is as it was when {then} was proposed: nothing "
                    "changed since; make that attempt's change (or another) and run the "
                    "self-check before proposing the next"
                )
            else:
                message = f"this {new.level} retry makes the same change as {then}; propose "
                message += "a different one"
            return Rejected(rule=RetryRule.FINGERPRINT_REPEATED, message=message)
    # (b) the failure did not change, and PARAMS was already tried against it
    if same_level and new.change_kind is ChangeKind.PARAMS:
        prev = same_level[-1]
        if prev.evidence_digest == new.evidence_digest and any(
            r.change_kind is ChangeKind.PARAMS and r.evidence_digest == new.evidence_digest
            for r in same_level
        ):
            return Rejected(
                rule=RetryRule.PARAMS_ALREADY_TRIED,
                message="the failure is the same as the previous attempt's and changing "
                "parameters was already tried against it; change the strategy, the tool "
                "or the context instead",
            )
    # (c) decompose / re-assign / change acceptance belong to ADJUST
    if new.level is Level.L2 and new.change_kind in ADJUST_ONLY:
        return Rejected(
            rule=RetryRule.RESERVED_FOR_ADJUST,
            message=f"{new.change_kind} changes are ADJUST's; a DO self-repair may change "
            "PARAMS, STRATEGY, TOOL or CONTEXT",
        )
    # (d) the third ADJUST cycle must change the structure
    if new.level is Level.L3 and attempt >= 3 and new.change_kind not in STRUCTURAL:
        kinds = ", ".join(sorted(STRUCTURAL))
        return Rejected(
            rule=RetryRule.NOT_STRUCTURAL,
            message=f"ADJUST cycle {attempt} must be structural ({kinds}), not {new.change_kind}",
        )
    # (e) relaxing an acceptance criterion needs the user's approval
    relaxes = new.change_kind is ChangeKind.ACCEPTANCE and new.relaxes_acceptance
    if relaxes and (new.approval_id is None or not approved(new.approval_id)):
        return Rejected(
            rule=RetryRule.RELAXED_WITHOUT_APPROVAL,
            message="relaxing an acceptance criterion needs the user's approval, and "
            f"{new.approval_id or 'none'} is not one they gave: propose it without "
            "approval_id and the runtime asks them (WAIT_USER_APPROVAL)",
        )
    return None


def reflections_for_prompt(records: Sequence[RetryRecord], config: RetriesConfig) -> list[str]:
    """The node's last `reflections_in_prompt` reflections, oldest first."""
    texts = [r.reflection for r in records if r.reflection]
    n = config.reflections_in_prompt
    return texts[len(texts) - n :] if n else []


# ---------------------------------------------------------------- the ledger


class RetryLedger:
    """Retry records of one store, under one `loop.retries` config."""

    def __init__(self, store: Store, config: RetriesConfig) -> None:
        self.store = store
        self.rows = RetryRows(store)
        self.config = config

    def records(self, task_path: str, todo_id: str) -> list[RetryRecord]:
        """A node's records, oldest first (of the task's, read once while nobody writes
        one: every DO and ADJUST entry asks, and records are rare)."""
        return [RetryRecord.of_row(r) for r in self._of_task(task_path) if r.todo_id == todo_id]

    def _of_task(self, task_path: str) -> tuple[RetryRow, ...]:
        key = (_retry_table.name, "task", task_path)  # kept until the table is written
        held = self.store.memo_get(key)
        if held is MISS:
            held = tuple(self.rows.of_task(task_path))
            self.store.memo_put(key, held)
        return held  # type: ignore[no-any-return]

    def propose(
        self, new: RetryProposal, *, approved: Callable[[str], bool] = lambda _: False
    ) -> RetryVerdict:
        """The ladder, then rules (a)–(e); an accepted retry is appended (joining the
        caller's transaction: commit it with the step)."""
        verdict = self.judge(new, approved=approved)
        if not isinstance(verdict, Accepted):
            return verdict
        stored = self.rows.add(verdict.record.row())
        return Accepted(
            record=verdict.record.model_copy(
                update={"id": stored.id, "created_at": stored.created_at}
            )
        )

    def judge(
        self, new: RetryProposal, *, approved: Callable[[str], bool] = lambda _: False
    ) -> RetryVerdict:
        """`propose`'s verdict without writing anything (an accepted record has id 0)."""
        earlier = self.records(new.task_path, new.todo_id)
        if new.level is Level.L2:
            counted = [r for r in earlier if r.level is Level.L2 and r.entry == new.entry]
        else:
            counted = [r for r in earlier if r.level is Level.L3]
        attempt = len(counted) + 1
        step = after_failure(new.level, attempt, self.config)
        if isinstance(step, Exhausted):
            return step
        n = _REFLECTION_COUNTER.count(new.reflection)
        if n > self.config.reflection_tokens:
            return Rejected(
                rule=RetryRule.REFLECTION_TOO_LONG,
                message=f"a reflection is at most {self.config.reflection_tokens} tokens "
                f"(loop.retries.reflection_tokens), this one is {n}: say it shorter",
            )
        rejected = check_retry(new, earlier, attempt=attempt, approved=approved)
        if rejected is not None:
            return rejected
        return Accepted(record=RetryRecord.model_validate(new.model_dump() | {"attempt": attempt}))
