"""Encapsulated Taskdocs (`*.tsk/` packages): rules, package, effective Taskdoc, tools, audit."""

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
from mindloop.taskdoc.tools import ROOT_ONLY_TOOLS, taskdoc_tools

__all__ = [
    "BEARINMIND",
    "ROOT_ONLY_TOOLS",
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
    "taskdoc_tools",
    "tool_description",
]
