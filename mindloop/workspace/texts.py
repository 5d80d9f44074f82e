"""The fixed strings of the workspace's files and prompts, per work language (decision 10:
runtime-written headings follow the work language; the parsers accept both).

Each heading has a stable key; `HEADINGS[lang][key]` is what is written, and
`heading_key` maps a heading in either language back to its key.
"""

from __future__ import annotations

from mindloop.i18n import Lang

HEADINGS: dict[str, dict[str, str]] = {
    "en": {
        "rules": "Rules",
        "docs": "Docs",
        "found": "Found at Start",
        "node_type": "Node Type",
        "requirement": "Requirement",
        "criteria": "Acceptance Criteria",
        "doc_refs": "Doc References",
        "notes": "Notes",
        "conclusion": "Conclusion",
        "log": "Log",
    },
    "zh": {
        "rules": "规则",
        "docs": "文档",
        "found": "启动时发现",
        "node_type": "节点类型",
        "requirement": "需求",
        "criteria": "验收标准",
        "doc_refs": "文档引用",
        "notes": "备注",
        "conclusion": "结论",
        "log": "日志",
    },
}

# The `> …` line under a heading (written always, skipped by the parser).
HINTS: dict[str, dict[str, str]] = {
    "en": {
        "rules": "> Read-only: every dialog of the task follows them.",
        "docs": "> The global doc index: - [name](path) - description (status)",
        "found": "> Found by the start scan; offered to the planner, not in the index until used.",
        "doc_refs": "> Only these docs reach the node (active ones): - [name](path) - description (status)",
        "conclusion": "> Filled in on completion.",
    },
    "zh": {
        "rules": "> 只读，上下文必须遵循的约束",
        "docs": "> 读写，全局参考文档：- [文件名](路径) - 说明 (状态)",
        "found": "> 任务启动时扫描发现，供规划参考；使用后才进入索引",
        "doc_refs": "> 格式：- [文件名](路径) - 说明 (状态)；只有这些文档（active）进入节点上下文",
        "conclusion": "> 节点完成时填写",
    },
}

WORDS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Workspace",
        "planning": "Planning node",
        "execution": "Execution node",
        "criteria_head": "| ID | When | Then | Verify |",
        "log_head": "| Time | Actor | Event |",
    },
    "zh": {
        "title": "工作区",
        "planning": "规划节点",
        "execution": "执行节点",
        "criteria_head": "| ID | 条件 (WHEN) | 期望结果 (THEN) | 验证 (VERIFY) |",
        "log_head": "| 时间 | 操作者 | 事件 |",
    },
}


def heading(lang: Lang, key: str) -> str:
    return f"## {HEADINGS[lang][key]}"


def hint(lang: Lang, key: str) -> str | None:
    return HINTS[lang].get(key)


def word(lang: Lang, key: str) -> str:
    return WORDS[lang][key]


_BY_NAME = {name: key for table in HEADINGS.values() for key, name in table.items()}
# key → the hint lines of that section in every language (what the parser skips)
HINTS_OF: dict[str, frozenset[str]] = {
    key: frozenset(table[key] for table in HINTS.values() if key in table)
    for key in {k for table in HINTS.values() for k in table}
}


def heading_key(name: str) -> str | None:
    """The key of a heading written in either language (`Docs` and `文档` → `docs`)."""
    return _BY_NAME.get(name.strip())


# The node context (`context.node_context`): a dispatched member's first message, and the
# work loop's current node.
CONTEXT: dict[str, dict[str, str]] = {
    "en": {
        "head": "# Node {id}: {title}",
        "intro": "You are given this node of the workspace of task `{task}`. Work only on it.",
        "requirement": "## Requirement",
        "criteria": "## Acceptance criteria",
        "criterion": "- {id}: WHEN {when} THEN {then}",
        "verify": " (verify: {verify})",
        "rules": "## Rules (read-only; follow them)",
        "chain": "## Where it sits (ancestors; for orientation only)",
        "docs": "## Docs dispatched to you",
        "no_docs": "None were dispatched. If you need one, say so (see How to reply).",
        "doc_url": "- {path} — {desc} (a URL)",
        "doc_listed": "- {path} — {desc} (not inlined: {why}; read it with `read_file`)",
        "doc_head": "### {path}{desc}",
        "over_budget": "over the inline budget",
        "unreadable": "cannot be read now",
        "deps": "## Results of the nodes it depends on",
        "dep": "- {id} {title} ({status}): {conclusion}",
        "no_conclusion": "(no conclusion)",
        "blockers": "## Blockers recorded on this node",
        "reply": "## How to reply",
        "reply_text": (
            "When you are done, reply with what you did and how you checked each acceptance "
            "criterion. Put each file you produced on a line of its own, `ARTIFACT: <path>` "
            "(or one line `NO_ARTIFACTS: <why>`). If information you need is missing, do not "
            "guess: reply with one line `BLOCKED: <what is missing>` per missing item; the "
            "node then goes back to whoever planned it, who adds what is missing and "
            "dispatches it again."
        ),
    },
    "zh": {
        "head": "# 节点 {id}：{title}",
        "intro": "这是任务 `{task}` 工作区中交给你的节点。只处理这个节点。",
        "requirement": "## 需求",
        "criteria": "## 验收标准",
        "criterion": "- {id}：条件 {when}，期望 {then}",
        "verify": "（验证：{verify}）",
        "rules": "## 规则（只读，必须遵循）",
        "chain": "## 所处位置（祖先节点，仅供了解）",
        "docs": "## 派发给你的文档",
        "no_docs": "没有派发文档。如需文档，请按“如何回复”说明。",
        "doc_url": "- {path} — {desc}（URL）",
        "doc_listed": "- {path} — {desc}（未内联：{why}；请用 `read_file` 读取）",
        "doc_head": "### {path}{desc}",
        "over_budget": "超出内联预算",
        "unreadable": "当前无法读取",
        "deps": "## 所依赖节点的结果",
        "dep": "- {id} {title}（{status}）：{conclusion}",
        "no_conclusion": "（无结论）",
        "blockers": "## 本节点已记录的阻碍",
        "reply": "## 如何回复",
        "reply_text": (
            "完成后，回复你做了什么，以及如何逐条检查验收标准。每个产出的文件单独一行："
            "`ARTIFACT: <路径>`（或一行 `NO_ARTIFACTS: <原因>`）。如果缺少所需信息，不要猜测："
            "每个缺失项回复一行 `BLOCKED: <缺少什么>`；节点会退回给规划者，由其补充后重新派发。"
        ),
    },
}


def ctx_text(lang: Lang, key: str) -> str:
    return CONTEXT[lang][key]
