"""Memory compilation for the work loop (agent-loop §7): token counting calibrated by
provider usage, budgeted sections trimmed in reverse priority, dialog compaction, and
the write-back targets. Pure over its inputs; `dialogs.budgeted` plugs it into a turn
policy's request compilation."""

from mindloop.memory.budget import Budgets, budgets, total_budget
from mindloop.memory.compaction import (
    CompactionMethod,
    DialogCompaction,
    Summarizer,
    SummaryRequest,
    compact,
    compaction_due,
    summarize,
    verdicts_by_tool,
)
from mindloop.memory.compiler import CompiledContext, MemoryCompiler, TaskdocOverBudget
from mindloop.memory.sections import SECTIONS, Part, Section, SectionKind, TrimRule
from mindloop.memory.tokens import (
    CalibratedCounter,
    Calibration,
    CharCounter,
    TokenCounter,
    message_tokens,
    request_tokens,
)
from mindloop.memory.trim import TrimReason, TrimRecord
from mindloop.memory.turns import Turn, history_sections, split_turns

__all__ = [
    "SECTIONS",
    "Budgets",
    "CalibratedCounter",
    "Calibration",
    "CharCounter",
    "CompactionMethod",
    "CompiledContext",
    "DialogCompaction",
    "MemoryCompiler",
    "Part",
    "Section",
    "SectionKind",
    "Summarizer",
    "SummaryRequest",
    "TaskdocOverBudget",
    "TokenCounter",
    "TrimReason",
    "TrimRecord",
    "TrimRule",
    "Turn",
    "budgets",
    "compact",
    "compaction_due",
    "history_sections",
    "message_tokens",
    "request_tokens",
    "split_turns",
    "summarize",
    "total_budget",
    "verdicts_by_tool",
]
