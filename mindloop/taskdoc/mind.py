"""`change_mind`, `recall_taskdoc` and per-section status: the only ways agents touch a Taskdoc.

Every change is audited (actor, time, hashes, both contents) and written so that after a
kill at any instant the section file equals its last audit record once the package is
read again: the order of the write and the reconciliation are in `taskdoc.audit`, with
the argument for them.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

from mindloop.store import Store, TaskdocChange
from mindloop.taskdoc import fsio
from mindloop.taskdoc.audit import (
    commit_change,
    file_hash,
    last_changes,
    package_lock,
    reconcile,
    reconcile_locked,
    safe_parent,
)
from mindloop.taskdoc.effective import INLINE_LIMIT_BYTES, render_body
from mindloop.taskdoc.package import TaskPackage, normalize_content
from mindloop.taskdoc.sections import (
    BEARINMIND,
    BEARINMIND_DIR,
    SECTION_SUFFIX,
    TOP_LEVEL,
    Lang,
    SectionError,
    error,
    normalize_selector,
    resolve_section,
)

RECALL_LIMIT_BYTES = 100 * 1024
# One section never holds more than `recall_taskdoc` can return whole.
SECTION_LIMIT_BYTES = RECALL_LIMIT_BYTES
UNKNOWN_ACTOR = "human/unknown"

_TEXT: dict[str, dict[str, str]] = {
    "en": {
        "side_only": (
            "Error: `change_mind` is only available in the mainline dialog (not in sideline "
            "dialogs). Ask the Taskdoc maintainer @{m} to run `change_mind` and provide a fully "
            "merged full-section replacement draft (do not overwrite/delete other contributors)."
        ),
        "content_required": "Error: Taskdoc content is required (content).",
        "content_example": (
            "\nCopy/paste example:\n```json\n{{\n"
            '  "selector": "progress",\n'
            '  "content": "- Key decisions: ...\\n- Next steps: ..."\n'
            "}}\n```"
        ),
        "not_a_dir": (
            "Error: cannot write `{rel}`: `{parent}` inside the Taskdoc package is not a "
            "plain directory."
        ),
        "content_too_large": (
            "Error: Taskdoc content is too large (content: {n} bytes); one section holds at "
            "most {limit} bytes. Nothing was written: distill it, or split it into extra "
            "sections (`category` + `selector`)."
        ),
        "body_too_large": (
            "Error: this change would make the injected Taskdoc body {n} bytes, over the "
            "{limit}-byte limit, so the Taskdoc would no longer be injected into any dialog. "
            "Nothing was written: shorten `{rel}` (or other injected sections), or move "
            "details into an extra section (`category` + `selector`)."
        ),
        "changed": (
            "Taskdoc section `{rel}` replaced ({n} bytes). Every dialog of the tree sees it from "
            "its next generation; no new course was started."
        ),
        "not_found": (
            "Not found: `{rel}`.\n\nUse `change_mind` to create/update it (whole-section "
            'replace):\n- `change_mind({{"category":"{c}","selector":"{s}","content":"..."}})`'
        ),
        "not_found_side": (
            "Not found: `{rel}`.\n\nSide dialogs cannot call `change_mind`: ask the Taskdoc "
            "maintainer @{m} to create it with "
            '`change_mind({{"category":"{c}","selector":"{s}","content":"..."}})`.'
        ),
        "truncated": (
            "\n\n⚠️ Truncated: content is too large ({n} bytes); showing first {limit} bytes."
        ),
        "conflict": (
            "Error: `{rel}` changed since this edit started (by {actor}); nothing was written. "
            "Read the section again and replace it with a merged text."
        ),
    },
    "zh": {
        "side_only": (
            "错误：`change_mind` 仅允许在主线对话中使用（支线对话中不可用）。"
            "请诉请差遣牒维护人 @{m} 执行 `change_mind`，"
            "并提供你已合并好的“分段全文替换稿”（禁止覆盖/抹掉他人条目）。"
        ),
        "content_required": "错误：需要提供差遣牒内容（content）。",
        "content_example": (
            "\n示例：\n```json\n{{\n"
            '  "selector": "progress",\n'
            '  "content": "- 关键决策：...\\n- 下一步：..."\n'
            "}}\n```"
        ),
        "not_a_dir": "错误：无法写入 `{rel}`：任务包内的 `{parent}` 不是普通目录。",
        "content_too_large": (
            "错误：差遣牒内容过大（content：{n} bytes），单个章节最多 {limit} bytes。未写入任何内容："
            "请精简，或拆分到额外章节（`category` + `selector`）。"
        ),
        "body_too_large": (
            "错误：此次修改会使注入的差遣牒正文达到 {n} bytes，超过 {limit} bytes 上限，"
            "差遣牒将无法再注入任何对话。未写入任何内容：请精简 `{rel}`（或其他注入章节），"
            "或把细节移到额外章节（`category` + `selector`）。"
        ),
        "changed": (
            "差遣牒章节 `{rel}` 已替换（{n} bytes）。整棵对话树从下一次生成起可见；"
            "未开启新一程对话。"
        ),
        "not_found": (
            "未找到：`{rel}`。\n\n用 `change_mind` 创建或更新（整段替换）：\n"
            '- `change_mind({{"category":"{c}","selector":"{s}","content":"..."}})`'
        ),
        "not_found_side": (
            "未找到：`{rel}`。\n\n支线对话不能调用 `change_mind`：请诉请差遣牒维护人 @{m} 用 "
            '`change_mind({{"category":"{c}","selector":"{s}","content":"..."}})` 创建。'
        ),
        "truncated": "\n\n⚠️ 已截断：内容过大（{n} bytes），仅回显前 {limit} bytes。",
        "conflict": (
            "错误：自本次编辑开始以来 `{rel}` 已被修改（由 {actor}）；未写入任何内容。"
            "请重新读取该章节，并以合并后的全文替换。"
        ),
    },
}


def _t(lang: Lang) -> dict[str, str]:
    return _TEXT["zh"] if lang == "zh" else _TEXT["en"]


class ChangeResult(BaseModel):
    """Outcome of one `change_mind`: `ok=False` means rejected and nothing was written."""

    ok: bool
    text: str
    section: str | None = None
    change: TaskdocChange | None = None
    conflict: bool = False  # refused: the section was not what the edit started from


class SectionStatus(BaseModel):
    """What a UI shows per section: present?, size, last updated (time, actor)."""

    section: str
    exists: bool
    size: int = 0
    updated_at: float | None = None
    actor_member: str | None = None
    actor_dialog: str | None = None
    changed_outside: bool = False  # last change not made through mindloop
    recorded: bool = False  # the audit has at least one change of this section


def _size_error(pkg: TaskPackage, rel: str, body: str, lang: Lang) -> str | None:
    """Refuse content that one section cannot hold, or that would push the injected body
    over the inline limit (a change that does not grow an already-too-large body passes)."""
    t = _t(lang)
    n = len(body.encode("utf-8"))
    if n > SECTION_LIMIT_BYTES:
        return t["content_too_large"].format(n=n, limit=SECTION_LIMIT_BYTES)
    if not is_injected(rel):
        return None
    after = len(render_body(pkg, lang, override={rel: body}).encode("utf-8"))
    if after <= INLINE_LIMIT_BYTES:
        return None
    now = len(render_body(pkg, lang).encode("utf-8"))
    if after <= now:
        return None
    return t["body_too_large"].format(n=after, limit=INLINE_LIMIT_BYTES, rel=rel)


def is_injected(rel: str) -> bool:
    """Whether a section file is part of the injected body (top-level or bearinmind)."""
    return rel in {f"{s}{SECTION_SUFFIX}" for s in TOP_LEVEL} or rel in {
        f"{BEARINMIND_DIR}/{s}{SECTION_SUFFIX}" for s in BEARINMIND
    }


def change_mind(
    pkg: TaskPackage,
    *,
    selector: str | None,
    content: str | None,
    category: str | None = None,
    actor_member: str,
    actor_dialog: str | None,
    is_root: bool,
    store: Store,
    maintainer: str | None = None,
    lang: Lang = "en",
    expected_hash: str | None = None,
) -> ChangeResult:
    """Replace exactly one section with `content` (trimmed, final newline), audited.

    With `expected_hash` (the sha256 of the text the edit started from, a missing
    section counting as empty) the change is made only if the section still holds that
    text, checked under the package lock: a person's edit never silently overwrites a
    change made meanwhile (`conflict` says so).

    Rejections (side dialog, missing selector, blank content, any invalid target, content
    over 100 KiB, a change that would push the injected body over its 100 KB inline limit)
    write nothing and return the error text. Starts no new course: the caller's dialog is
    untouched; the new text reaches every dialog through the effective Taskdoc.
    """
    t = _t(lang)
    if not is_root:
        return ChangeResult(ok=False, text=t["side_only"].format(m=maintainer or "root"))
    if not normalize_selector(selector):
        return ChangeResult(ok=False, text=error("selector_required", lang).text)
    body = normalize_content(content or "")
    if not body:
        return ChangeResult(ok=False, text=t["content_required"] + t["content_example"])
    try:
        rel = resolve_section(selector, category, lang)
    except SectionError as exc:
        return ChangeResult(ok=False, text=exc.text)
    too_large = _size_error(pkg, rel, body, lang)
    if too_large is not None:
        return ChangeResult(ok=False, text=too_large)
    parent = safe_parent(pkg, rel)
    if parent is None:
        where = str(Path(rel).parent)
        return ChangeResult(
            ok=False,
            text=t["not_a_dir"].format(rel=rel, parent=pkg.rel_path if where == "." else where),
        )
    with package_lock(pkg):
        reconcile_locked(pkg, store)
        before = pkg.read_section_or_none(rel)
        now = None if expected_hash is None else fsio.sha256_text(before or "")
        if now != expected_hash:
            last = last_changes(store, pkg.rel_path).get(rel)
            recorded = last is not None and last.hash_after == now
            actor = last.actor_member if last is not None and recorded else UNKNOWN_ACTOR
            return ChangeResult(
                ok=False, text=t["conflict"].format(rel=rel, actor=actor), conflict=True
            )
        change = commit_change(
            pkg,
            TaskdocChange(
                task_path=pkg.rel_path,
                section=rel,
                actor_member=actor_member,
                actor_dialog=actor_dialog,
                ts=time.time(),
                hash_before=None if before is None else fsio.sha256_text(before),
                hash_after=fsio.sha256_text(body),
                content_before=before,
                content_after=body,
            ),
            store,
        )
    n = len(body.encode("utf-8"))
    return ChangeResult(ok=True, text=t["changed"].format(rel=rel, n=n), section=rel, change=change)


def recall_taskdoc(
    pkg: TaskPackage,
    *,
    category: str | None,
    selector: str | None,
    lang: Lang = "en",
    is_root: bool = True,
    maintainer: str | None = None,
) -> str:
    """Read one bearinmind/extra section (capped at 100 KiB); `SectionError` on bad args.

    The three top-level sections are refused with a text saying they are always injected.
    A missing section returns a "Not found" text that says how to create it (in a side
    dialog: whom to ask, since only the root dialog can call `change_mind`).
    """
    sel = normalize_selector(selector)
    if sel in TOP_LEVEL:
        raise error("top_level_always_injected", lang, s=sel)
    if not (category or "").strip():
        raise error("category_required", lang)
    rel = resolve_section(selector, category, lang)
    cat, _, name = rel.rpartition("/")
    text = pkg.read_section_or_none(rel)
    t = _t(lang)
    if text is None:
        key = "not_found" if is_root else "not_found_side"
        return t[key].format(rel=rel, c=cat, s=name[: -len(SECTION_SUFFIX)], m=maintainer or "root")
    raw = text.encode("utf-8")
    note = ""
    if len(raw) > RECALL_LIMIT_BYTES:
        text = raw[:RECALL_LIMIT_BYTES].decode("utf-8", errors="ignore")
        note = t["truncated"].format(n=len(raw), limit=RECALL_LIMIT_BYTES)
    return f"**recall_taskdoc:** `{rel}`\n\n---\n{text}\n---{note}"


def known_sections(pkg: TaskPackage) -> list[str]:
    """Top-level and bearinmind sections in fixed order, then the extra sections (sorted)."""
    rels = [f"{s}{SECTION_SUFFIX}" for s in TOP_LEVEL]
    rels += [f"{BEARINMIND_DIR}/{s}{SECTION_SUFFIX}" for s in BEARINMIND]
    rels += [e.rel for e in pkg.extra_sections(limit=10_000).entries]
    return rels


def record_created(pkg: TaskPackage, store: Store, actor: str) -> None:
    """Record the sections of a package just created (empty ones too) as changes by
    `actor`, so their history starts at version 1 and shows who created each section,
    not "changed outside mindloop" (`mindloop task new`, a task the Router creates)."""
    now = time.time()
    with store.tx():
        for rel in known_sections(pkg):
            if pkg.section_exists(rel):
                text = pkg.read_section(rel)
                store.record_taskdoc_change(
                    TaskdocChange(
                        task_path=pkg.rel_path,
                        section=rel,
                        actor_member=actor,
                        actor_dialog=None,
                        ts=now,
                        hash_before=None,
                        hash_after=fsio.sha256_text(text),
                        content_before=None,
                        content_after=text,
                    )
                )


def section_status(pkg: TaskPackage, store: Store | None) -> list[SectionStatus]:
    """Per section: exists, size, last updated (time, actor) — reconciling first.

    A section whose content does not match its last audit record (or that has none) was
    changed outside mindloop: its time is the file's mtime and the actor `human/unknown`.
    Without a store (an rtws never run), every present section is in that case.
    """
    last: dict[str, TaskdocChange] = {}
    if store is not None:
        reconcile(pkg, store)
        last = last_changes(store, pkg.rel_path)
    rels = known_sections(pkg)
    rels += sorted(r for r in last if r not in rels)
    out: list[SectionStatus] = []
    for rel in rels:
        st = pkg.section_stat(rel)
        now = file_hash(pkg, rel) if st is not None else None
        change = last.get(rel)
        status = SectionStatus(
            section=rel,
            exists=st is not None,
            size=st.st_size if st else 0,
            recorded=change is not None,
        )
        if change is not None and now == change.hash_after:
            status.updated_at = change.ts
            status.actor_member = change.actor_member
            status.actor_dialog = change.actor_dialog
        elif st is not None:
            status.updated_at = st.st_mtime
            status.actor_member = UNKNOWN_ACTOR
            status.changed_outside = True
        elif change is not None:
            status.changed_outside = True  # deleted outside mindloop
            status.actor_member = UNKNOWN_ACTOR
        out.append(status)
    return out
