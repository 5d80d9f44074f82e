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
