"""The canonical agent-facing copy about Taskdocs, in English and Chinese.

The seed requires the system prompt and every tool description shown to agents to state
(1) the `.tsk/` encapsulation restrictions and (2) the injection rules, preserving the
canonical copy's semantics. The texts below are the seed's canonical copy verbatim
(zh is the semantic baseline, en must match it); tool descriptions repeat the
restrictions that matter at the call site.
"""

from __future__ import annotations

from mindloop.i18n import Lang

ENCAPSULATION_RULES: dict[Lang, str] = {
    "zh": """**Taskdoc 封装与访问限制**

- 任何 `.tsk/` 目录及其子路径（`**/*.tsk/**`）都是封装状态：禁止使用任何通用文件工具读取/写入/列目录（例如 `read_file` / `write_file` / `list_dir` 等）。
- 更新 Taskdoc 只能使用函数工具 `change_mind`（按章节整段替换；顶层用 `selector`，额外章节用 `category + selector`）。
- 读取“不会自动注入上下文”的额外章节，只能使用函数工具 `recall_taskdoc({ category, selector })`。

**Taskdoc 自动注入规则（系统提示）**

- 系统提示会把“有效 Taskdoc”自动注入到模型上下文中。
- 一定会注入顶层三段：`goals.md`、`constraints.md`、`progress.md`（按此顺序）。
- 可选注入 `bearinmind/`（仅固定白名单，最多 6 个文件）：`contracts.md`、`acceptance.md`、`grants.md`、`runbook.md`、`decisions.md`、`risks.md`。
- 若存在 `bearinmind/` 注入块，它会以 `## Bear In Mind` 出现在 `## Constraints` 与 `## Progress` 之间，并按以上固定顺序拼接。
- 除此之外，`.tsk/` 内任何其他目录/文件都不会被自动注入正文（系统只会注入一个“额外章节索引”用于提示；需要时用 `recall_taskdoc` 显式读取）。""",
    "en": """**Taskdoc encapsulation & access restrictions**

- Any `.tsk/` directory and its subpaths (`**/*.tsk/**`) are encapsulated state: general file tools MUST NOT read/write/list them (e.g. `read_file` / `write_file` / `list_dir`).
- Taskdoc updates MUST go through the function tool `change_mind` (whole-section replace; use top-level `selector`, or `category + selector` for extra sections).
- To read extra sections that are NOT auto-injected, use the function tool `recall_taskdoc({ category, selector })`.

**Taskdoc auto-injection rules (system prompt)**

- The system prompt auto-injects the “effective Taskdoc” into the model context.
- It always injects the three top-level sections in order: `goals.md`, `constraints.md`, `progress.md`.
- It may also inject `bearinmind/` (fixed whitelist only; max 6 files): `contracts.md`, `acceptance.md`, `grants.md`, `runbook.md`, `decisions.md`, `risks.md`.
- If present, the injected block appears as `## Bear In Mind` between `## Constraints` and `## Progress`, and the files are concatenated in the fixed order above.
- No other directories/files inside `.tsk/` are auto-injected as body content (only an “extra sections index” may be injected for discoverability; use `recall_taskdoc` when needed).""",
}

# What every Taskdoc tool description ends with: the two things the seed requires any
# tool documentation shown to agents to make explicit (encapsulation, injection rules).
_TOOL_RULES: dict[Lang, str] = {
    "en": (
        " Encapsulation: any `.tsk/` directory and its subpaths (`**/*.tsk/**`) are "
        "encapsulated state; general file tools (`read_file` / `write_file` / `list_dir` …) "
        "must not read, write or list them. Updates go only through `change_mind`; extra "
        "sections that are not auto-injected are read only with `recall_taskdoc`."
        " Auto-injection: the effective Taskdoc is injected into your context on every "
        "generation: always `goals.md`, `constraints.md`, `progress.md` (in this order); "
        "optionally `bearinmind/` (fixed whitelist, max 6 files: `contracts.md`, "
        "`acceptance.md`, `grants.md`, `runbook.md`, `decisions.md`, `risks.md`) as "
        "`## Bear In Mind` between `## Constraints` and `## Progress`, in that order; no "
        "other file of the package is injected (only an extra sections index)."
    ),
    "zh": (
        "封装：任何 `.tsk/` 目录及其子路径（`**/*.tsk/**`）都是封装状态，禁止用通用文件工具"
        "（`read_file` / `write_file` / `list_dir` 等）读取/写入/列目录。更新只能用 "
        "`change_mind`；不会自动注入的额外章节只能用 `recall_taskdoc` 读取。"
        "自动注入：每次生成时“有效 Taskdoc”都会注入上下文：一定注入 `goals.md`、"
        "`constraints.md`、`progress.md`（按此顺序）；可选注入 `bearinmind/`（仅固定白名单，"
        "最多 6 个文件：`contracts.md`、`acceptance.md`、`grants.md`、`runbook.md`、"
        "`decisions.md`、`risks.md`），以 `## Bear In Mind` 出现在 `## Constraints` 与 "
        "`## Progress` 之间并按此顺序拼接；`.tsk/` 内其他文件都不会注入正文（只注入额外章节索引）。"
    ),
}

_TOOL_DESCRIPTIONS: dict[str, dict[Lang, str]] = {
    "change_mind": {
        "en": (
            "Update exactly one section of the shared Taskdoc (`*.tsk/`) by replacing its "
            "entire content. Top-level: `selector` = goals|constraints|progress (no category); "
            '`category`="bearinmind": contracts|acceptance|grants|runbook|decisions|risks; any '
            "other identifier category: `<category>/<selector>.md`. Each call replaces the whole "
            "section, so start from the current injected content and merge (do not overwrite "
            "other contributors). Empty content is rejected, and so is content over 100 KiB or a "
            "change that would push the injected Taskdoc over 100 KB. The change is visible to every "
            "dialog of the tree from its next generation. It does NOT start a new course (use "
            "`clear_mind` for that). Only the root (mainline) dialog can call it."
        ),
        "zh": (
            "整段替换全队共享差遣牒（`*.tsk/`）中恰好一个章节的全文。顶层：`selector` 为 "
            'goals|constraints|progress（不带 category）；`category`="bearinmind"：contracts|'
            "acceptance|grants|runbook|decisions|risks；其他标识符目录：`<category>/<selector>.md`。"
            "每次调用替换整个章节：必须基于上下文中注入的当前内容做合并（禁止覆盖/抹掉他人条目）。"
            "空内容会被拒绝；超过 100 KiB 的内容、或会使注入的差遣牒超过 100 KB 的修改也会被拒绝。"
            "变更从下一次生成起对整棵对话树可见。它不会开启新一程对话（需要时用 "
            "`clear_mind`）。只有主线（根）对话可以调用。"
        ),
    },
    "recall_taskdoc": {
        "en": (
            "Read one Taskdoc section that is NOT auto-injected, by (category, selector): "
            "`bearinmind/<name>.md` or `<category>/<selector>.md` (see the extra sections index "
            "in the Taskdoc message). goals/constraints/progress are always injected and are not "
            "read by this tool. Output is capped at 100 KiB with a truncation note."
        ),
        "zh": (
            "按 (category, selector) 读取差遣牒中“不会自动注入上下文”的章节：`bearinmind/<name>.md` "
            "或 `<category>/<selector>.md`（见差遣牒消息中的额外章节索引）。goals/constraints/progress "
            "始终自动注入，本工具不读取它们。输出上限 100 KiB，超出会截断并注明。"
        ),
    },
    "clear_mind": {
        "en": (
            "Clear the dialog's mind and start a new course (the separate course-control tool; "
            "`change_mind` never does this). Pass a short, scannable continuation package as "
            "`reminder_content` (first step, key locations, how to run/verify, volatile details) "
            "so you can resume. Reminders and the Taskdoc are kept."
        ),
        "zh": (
            "清理头脑并开启新一程对话（独立的对话程控制工具；`change_mind` 从不这样做）。"
            "建议把简短、可扫读的“接续包”（第一步操作、关键定位信息、运行/验证方法、临时细节）"
            "作为 `reminder_content` 传入，以便快速接续。提醒与差遣牒会保留。"
        ),
    },
}

TOOL_NAMES: tuple[str, ...] = tuple(_TOOL_DESCRIPTIONS)
TASKDOC_TOOL_NAMES: tuple[str, ...] = ("change_mind", "recall_taskdoc")


def encapsulation_rules(lang: Lang = "en") -> str:
    """The canonical copy for the system prompt, in the dialog's work language."""
    return ENCAPSULATION_RULES.get(lang, ENCAPSULATION_RULES["en"])


def tool_description(name: str, lang: Lang = "en") -> str:
    """Description of `change_mind` / `recall_taskdoc` / `clear_mind` in `lang`.

    The two Taskdoc tools also state the encapsulation and injection rules.
    """
    table = _TOOL_DESCRIPTIONS[name]
    text = table.get(lang, table["en"])
    if name in TASKDOC_TOOL_NAMES:
        text += _TOOL_RULES.get(lang, _TOOL_RULES["en"])
    return text
