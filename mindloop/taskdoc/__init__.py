"""Encapsulated Taskdocs (`*.tsk/` packages): rules, package, effective Taskdoc, audit.

The agent tools over it (`change_mind`, `recall_taskdoc`) live in `mindloop.toolsets.taskdoc`.
"""

from mindloop.taskdoc.audit import Mismatch, mismatches, reconcile
from mindloop.taskdoc.copy import encapsulation_rules, tool_description
from mindloop.taskdoc.discovery import discover_packages
from mindloop.taskdoc.effective import layout_problems, render_effective_taskdoc
from mindloop.taskdoc.migrate import MigrationError, migrate_single_file
from mindloop.taskdoc.mind import (
    ChangeResult,
    SectionStatus,
    change_mind,
    recall_taskdoc,
    section_status,
)
from mindloop.taskdoc.package import (
    ExtraSectionsIndex,
    InvalidTaskdocPath,
    TaskPackage,
    Violation,
)
from mindloop.taskdoc.sections import (
    BEARINMIND,
    TOP_LEVEL,
    SectionError,
    resolve_section,
)

__all__ = [
    "BEARINMIND",
    "TOP_LEVEL",
    "ChangeResult",
    "ExtraSectionsIndex",
    "InvalidTaskdocPath",
    "MigrationError",
    "Mismatch",
    "SectionError",
    "SectionStatus",
    "TaskPackage",
    "Violation",
    "change_mind",
    "discover_packages",
    "encapsulation_rules",
    "layout_problems",
    "migrate_single_file",
    "mismatches",
    "recall_taskdoc",
    "reconcile",
    "render_effective_taskdoc",
    "resolve_section",
    "section_status",
    "tool_description",
]
