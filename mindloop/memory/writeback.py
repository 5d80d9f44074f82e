"""Where each kind of fact is written back, by whom, and what starts a compaction
(agent-loop §7.2–7.3), as data the loop checks writes against.

`may_write(fact, writer)` is the one check: a phase (or the runtime's compaction) that
is not a fact's writer is refused with a sentence naming who may write it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# Writers besides the phases of agent-loop §3.
COMPACTION = "compaction"
RUNTIME = "runtime"


class Fact(StrEnum):
    USER_PREFERENCES = "user_preferences"  # cross-task preferences, stable project facts
    WORKING_HABITS = "working_habits"  # how this member should work
    DOMAIN_KNOWLEDGE = "domain_knowledge"  # for the team
    DIALOG_STATE = "dialog_state"  # goals, decisions, open questions, DONE verdicts
    WORKSPACE_FACTS = "workspace_facts"  # layout, build/test commands, last green checked_ref
    NODE_RESULT = "node_result"  # todos.conclusion, check_report_ref
    HARD_CONSTRAINTS = "hard_constraints"  # newly found
    RAW_RECORDS = "raw_records"  # full tool input/output, reports, retry records


class Target(StrEnum):
    MEMBER_MEMORY = "member_memory"  # under .minds/ (`memory.member`)
    SELF_MD = "self_md"  # .minds/team/<member>/self.md via self_md_patch
    KB = "kb"  # the kb teammate via kb_request
    DIALOG_SUMMARY = "summaries:dialog"  # `store.summaries`, kind dialog
    WORKSPACE_SUMMARY = "summaries:workspace"  # `store.summaries`, kind workspace
    NODE = "todos"  # the node's conclusion and check report
    CONSTRAINTS = "constraints.md"  # through the Taskdoc tool
    WORKLOG = "worklog"  # never compacted; referenced by id


@dataclass(frozen=True)
class WriteBack:
    target: Target
    writers: frozenset[str]
    condition: str = ""  # what else must hold (checked where the write happens)


WRITE_BACK: dict[Fact, WriteBack] = {
    Fact.USER_PREFERENCES: WriteBack(
        Target.MEMBER_MEMORY,
        frozenset({"SELF_IMPROVE"}),
        "confidence >= loop.memory.min_confidence; no PII or secrets",
    ),
    Fact.WORKING_HABITS: WriteBack(Target.SELF_MD, frozenset({"SELF_IMPROVE"})),
    Fact.DOMAIN_KNOWLEDGE: WriteBack(Target.KB, frozenset({"SELF_IMPROVE"})),
    Fact.DIALOG_STATE: WriteBack(Target.DIALOG_SUMMARY, frozenset({COMPACTION, "SELF_IMPROVE"})),
    Fact.WORKSPACE_FACTS: WriteBack(Target.WORKSPACE_SUMMARY, frozenset({"PLAN", "CHECK"})),
    Fact.NODE_RESULT: WriteBack(Target.NODE, frozenset({"DO", "CHECK", "ADJUST"})),
    Fact.HARD_CONSTRAINTS: WriteBack(Target.CONSTRAINTS, frozenset({"PLAN", "ADJUST"})),
    Fact.RAW_RECORDS: WriteBack(Target.WORKLOG, frozenset({RUNTIME})),
}


class Trigger(StrEnum):
    """What starts a compaction or a summary refresh (agent-loop §7.2)."""

    SECTION_OVERFLOW = "section_overflow"  # at compile time: trim now, compact later
    DIALOG_SIZE = "dialog_size"  # dialog ≥ 0.80 × window → ≤ 0.50 × window
    PLAN_ENTRY = "plan_entry"  # refresh the workspace summary
    CHECK_PASS = "check_pass"  # record checked_ref and the commands used
    TASK_END = "task_end"  # all nodes terminal, or 24 h idle: SELF_IMPROVE runs


@dataclass(frozen=True)
class TriggerSpec:
    writes: Target
    by: str  # the writer


TRIGGERS: dict[Trigger, TriggerSpec] = {
    Trigger.SECTION_OVERFLOW: TriggerSpec(Target.DIALOG_SUMMARY, COMPACTION),
    Trigger.DIALOG_SIZE: TriggerSpec(Target.DIALOG_SUMMARY, COMPACTION),
    Trigger.PLAN_ENTRY: TriggerSpec(Target.WORKSPACE_SUMMARY, "PLAN"),
    Trigger.CHECK_PASS: TriggerSpec(Target.WORKSPACE_SUMMARY, "CHECK"),
    Trigger.TASK_END: TriggerSpec(Target.MEMBER_MEMORY, "SELF_IMPROVE"),
}


def may_write(fact: Fact, writer: str) -> str | None:
    """None if `writer` may write `fact`; otherwise why not, naming who may."""
    rule = WRITE_BACK[fact]
    if writer in rule.writers:
        return None
    who = ", ".join(sorted(rule.writers))
    return f"{writer} may not write {fact} (to {rule.target}); only {who} may"
