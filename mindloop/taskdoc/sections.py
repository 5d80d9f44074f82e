"""The Taskdoc section rules, as data, and the one function that applies them.

A section is addressed by `(selector, category?)` (the `change_mind` / `recall_taskdoc`
arguments) and lives at one package-relative file path. Which pairs are valid is fixed by
the design (no runtime configuration): three top-level sections, a six-file `bearinmind/`
whitelist in a fixed order, and any other `<category>/<selector>.md` made of identifiers.
Error texts are the anchor's (dominds.md §12), so agents trained on either see the same
words; every rejection is a `SectionError` carrying that text.
"""

from __future__ import annotations

import re
from typing import Literal

from mindloop.errors import MindloopError
from mindloop.i18n import Lang

TOP_LEVEL: tuple[str, ...] = ("goals", "constraints", "progress")
BEARINMIND_DIR = "bearinmind"
BEARINMIND: tuple[str, ...] = ("contracts", "acceptance", "grants", "runbook", "decisions", "risks")
SECTION_SUFFIX = ".md"

TOP_LEVEL_FILES: tuple[str, ...] = tuple(f"{s}{SECTION_SUFFIX}" for s in TOP_LEVEL)
BEARINMIND_FILES: tuple[str, ...] = tuple(f"{s}{SECTION_SUFFIX}" for s in BEARINMIND)

# Top-level package entries that belong to the runtime (app-specific state such as the
# seed-003 workspace). They are neither sections nor layout violations, and
# `change_mind` may never target them.
RUNTIME_MANAGED_DIRS: frozenset[str] = frozenset({"workspace"})

IDENTIFIER_PATTERN = r"^[a-zA-Z][a-zA-Z0-9_-]*(\.[a-zA-Z0-9_-]+)*$"
# fullmatch without `$`: Python's `$` would also accept a trailing newline.
_IDENTIFIER_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9_-]*(?:\.[a-zA-Z0-9_-]+)*")

ErrorCode = Literal[
    "selector_required",
    "category_required",
    "invalid_selector",
    "invalid_category",
    "invalid_category_selector",
    "top_level_selector_requires_no_category",
    "bearinmind_selector_requires_bearinmind_category",
    "reserved_category",
    "top_level_always_injected",
]

# The error texts, by language. `{s}` is the selector, `{c}` the category.
MESSAGES: dict[Lang, dict[ErrorCode, str]] = {
    "en": {
        "selector_required": "Error: selector is required.",
        "category_required": "Error: category is required.",
        "invalid_selector": (
            "Error: Invalid selector '{s}'. Use: top-level goals|constraints|progress; "
            "under bearinmind: contracts|acceptance|grants|runbook|decisions|risks; "
            "or any identifier (e.g. `ux.checklist`)."
        ),
        "invalid_category": f"Error: Invalid category '{{c}}'. Must match `{IDENTIFIER_PATTERN}`.",
        "invalid_category_selector": (
            f"Error: Invalid category selector '{{s}}'. Must match `{IDENTIFIER_PATTERN}`."
        ),
        "top_level_selector_requires_no_category": (
            "Error: Selector '{s}' is reserved for top-level sections "
            "(goals/constraints/progress) and must not be used with category='{c}'."
        ),
        "bearinmind_selector_requires_bearinmind_category": (
            "Error: Selector '{s}' is only valid under category='bearinmind' (got category='{c}')."
        ),
        "reserved_category": (
            "Error: Category '{c}' is reserved for runtime-managed files of the Taskdoc package "
            "and cannot hold sections."
        ),
        "top_level_always_injected": (
            "Error: '{s}' is a top-level Taskdoc section (goals/constraints/progress); it is "
            "always injected into your context, so `recall_taskdoc` does not read it. "
            "Use `recall_taskdoc` for bearinmind/ or extra sections only."
        ),
    },
    "zh": {
        "selector_required": "错误：需要提供选择器（selector）。",
        "category_required": "错误：需要提供章节目录（category）。",
        "invalid_selector": (
            "错误：选择器 '{s}' 无效。可用：顶层 goals | constraints | progress；"
            "bearinmind 下 contracts | acceptance | grants | runbook | decisions | risks；"
            "或任意标识符（如 ux.checklist）。"
        ),
        "invalid_category": f"错误：目录名 '{{c}}' 无效。需匹配 `{IDENTIFIER_PATTERN}`。",
        "invalid_category_selector": f"错误：选择器 '{{s}}' 无效。需匹配 `{IDENTIFIER_PATTERN}`。",
        "top_level_selector_requires_no_category": (
            "错误：选择器 '{s}' 是顶层保留分段（goals/constraints/progress），"
            "不能与 category='{c}' 一起用。"
        ),
        "bearinmind_selector_requires_bearinmind_category": (
            "错误：选择器 '{s}' 只能在 category='bearinmind' 下用（当前 category='{c}'）。"
        ),
        "reserved_category": "错误：目录名 '{c}' 保留给任务包的运行时管理文件，不能存放章节。",
        "top_level_always_injected": (
            "错误：'{s}' 是差遣牒顶层分段（goals/constraints/progress），始终自动注入上下文，"
            "因此 `recall_taskdoc` 不读取它。`recall_taskdoc` 只用于 bearinmind/ 或额外章节。"
        ),
    },
}


class SectionError(MindloopError):
    """A `(selector, category)` pair that names no valid section; `str()` is the agent text."""

    def __init__(self, code: ErrorCode, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def error(code: ErrorCode, lang: Lang = "en", *, s: str = "", c: str = "") -> SectionError:
    """Build the `SectionError` for `code` in `lang` (the text is the table entry)."""
    table = MESSAGES.get(lang, MESSAGES["en"])
    return SectionError(code, table[code].format(s=s, c=c))


def is_identifier(name: str) -> bool:
    return _IDENTIFIER_RE.fullmatch(name) is not None


def is_reserved_category(category: str) -> bool:
    """Categories that would collide with runtime state or nest a package.

    Compared case-insensitively so a case variant cannot alias a reserved directory on a
    case-insensitive filesystem.
    """
    folded = category.casefold()
    if folded == BEARINMIND_DIR and category != BEARINMIND_DIR:
        return True
    return folded in RUNTIME_MANAGED_DIRS or folded.endswith(".tsk")


def normalize_selector(selector: str | None) -> str:
    """Trim, then strip one leading `!` (the anchor accepts `!goals`)."""
    s = (selector or "").strip()
    return s[1:] if s.startswith("!") else s


def resolve_section(selector: str | None, category: str | None = None, lang: Lang = "en") -> str:
    """The package-relative file of `(selector, category)`, or `SectionError`.

    No category → one of the top-level files; `bearinmind` → one of its whitelist;
    any other identifier category → `<category>/<selector>.md` with an identifier
    selector that is not reserved.
    """
    sel = normalize_selector(selector)
    if not sel:
        raise error("selector_required", lang)
    cat = (category or "").strip()
    if not cat:
        if sel in TOP_LEVEL:
            return f"{sel}{SECTION_SUFFIX}"
        raise error("invalid_selector", lang, s=sel)
    if cat == BEARINMIND_DIR:
        if sel in TOP_LEVEL:
            raise error("top_level_selector_requires_no_category", lang, s=sel, c=cat)
        if sel in BEARINMIND:
            return f"{BEARINMIND_DIR}/{sel}{SECTION_SUFFIX}"
        raise error("invalid_selector", lang, s=sel)
    if not is_identifier(cat):
        raise error("invalid_category", lang, c=cat)
    if is_reserved_category(cat):
        raise error("reserved_category", lang, c=cat)
    if sel in TOP_LEVEL:
        raise error("top_level_selector_requires_no_category", lang, s=sel, c=cat)
    if sel in BEARINMIND:
        raise error("bearinmind_selector_requires_bearinmind_category", lang, s=sel, c=cat)
    if not is_identifier(sel):
        raise error("invalid_category_selector", lang, s=sel)
    return f"{cat}/{sel}{SECTION_SUFFIX}"


def is_top_level_file(rel: str) -> bool:
    return rel in TOP_LEVEL_FILES


def parse_section_ref(ref: str, lang: Lang = "en") -> str:
    """Resolve a human-written section reference (`constraints`, `bearinmind/risks.md`,
    `ux/checklist`) with the same rules as the tools; used by the CLI."""
    text = ref.strip().replace("\\", "/")
    if text.endswith(SECTION_SUFFIX):
        text = text[: -len(SECTION_SUFFIX)]
    category, _, selector = text.rpartition("/")
    return resolve_section(selector, category or None, lang)
