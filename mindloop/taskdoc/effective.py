"""The effective Taskdoc: the one message every dialog of the tree sees on every generation.

Deterministic (sorted listings, fixed framing, verbatim bodies) and bounded (body above
100 KB replaced by a note; extra-sections index capped at 64; layout scan capped at 2,048
entries). Because the engine calls this on every generation, results are cached, keyed on
the `lstat` signature (mtime_ns, ctime_ns, size, inode) of every file and directory the
rendering depends on. A directory's mtime changes when entries are added or removed, and
`change_mind` replaces files (new inode), so any change through mindloop — and any normal
edit by a human — invalidates the cache; a hit costs one `lstat` per watched path.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mindloop.taskdoc.audit import reconcile_before_read
from mindloop.taskdoc.discovery import discover_packages
from mindloop.taskdoc.package import LAYOUT_SCAN_LIMIT, TaskPackage, Violation, _is_runtime_entry
from mindloop.taskdoc.sections import (
    BEARINMIND,
    BEARINMIND_DIR,
    SECTION_SUFFIX,
    TOP_LEVEL,
    Lang,
)

INLINE_LIMIT_BYTES = 100 * 1024
_CACHE_SIZE = 512

_Sig = tuple[int, int, int, int] | None


@dataclass(frozen=True)
class _Entry:
    """A rendering and what its check looks at: the watched paths that existed at the
    rendering with their signatures, and those that did not. A path whose directory was
    missing then is missing too and needs no look of its own (the `bearinmind/` files of
    a package without one): its directory's look sees it appear."""

    text: str
    present: tuple[tuple[str, tuple[int, int, int, int]], ...]
    absent: tuple[str, ...]
    stale: bool = False  # a path existed whose directory did not: a race, render again

    @classmethod
    def of(cls, watch: tuple[str, ...], sig: tuple[_Sig, ...], text: str) -> _Entry:
        present: list[tuple[str, tuple[int, int, int, int]]] = []
        absent: list[str] = []
        stale = False
        for path, parent, old in zip(watch, _parents(watch), sig, strict=True):
            if parent >= 0 and sig[parent] is None:  # its directory was missing
                stale = stale or old is not None
            elif old is None:
                absent.append(path)
            else:
                present.append((path, old))
        return cls(text, tuple(present), tuple(absent), stale)

    def unchanged(self) -> bool:
        """Whether every path that existed still has its signature and every path that
        did not still does not (stops at the first change). A missing path is looked for
        with `access` (no `lstat` error raised and caught at every generation)."""
        if self.stale:
            return False
        lstat = os.lstat
        for path, old in self.present:
            try:
                st = lstat(path)
            except OSError:
                return False
            if (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino) != old:
                return False
        if self.absent:
            access, ok = os.access, os.F_OK
            for path in self.absent:
                if access(path, ok, **_NOFOLLOW):
                    return False  # it exists now
        return True


# `access` as `lstat` looks: a symlink, dangling or not, exists (where it can say so).
_NOFOLLOW: dict[str, bool] = (
    {"follow_symlinks": False} if os.access in os.supports_follow_symlinks else {}
)


def _parents(watch: tuple[str, ...]) -> tuple[int, ...]:
    at = {p: i for i, p in enumerate(watch)}
    out = []
    for i, path in enumerate(watch):
        parent = at.get(os.path.dirname(path), -1)
        out.append(parent if parent < i else -1)
    return tuple(out)


_cache: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
_lock = threading.Lock()


def _sig(path: str) -> _Sig:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def _watch_paths(pkg: TaskPackage) -> tuple[str, ...]:
    """Every path whose change can change the rendering (bounded like the layout scan)."""
    root = str(pkg.path)
    paths = [root]
    paths += [os.path.join(root, f"{s}{SECTION_SUFFIX}") for s in TOP_LEVEL]
    bim = os.path.join(root, BEARINMIND_DIR)
    paths.append(bim)
    paths += [os.path.join(bim, f"{s}{SECTION_SUFFIX}") for s in BEARINMIND]
    stack = [(root, True)]
    while stack and len(paths) < LAYOUT_SCAN_LIMIT:
        current, top = stack.pop()
        try:
            with os.scandir(current) as it:
                subdirs = sorted(
                    e.path
                    for e in it
                    if e.is_dir(follow_symlinks=False)
                    and not (top and e.name != BEARINMIND_DIR and _is_runtime_entry(e.name))
                )
        except OSError:
            continue
        for d in subdirs:
            if d != bim:
                paths.append(d)
            stack.append((d, False))
    return tuple(paths)


def _msgs(lang: Lang) -> dict[str, str]:
    return _TEXT["zh"] if lang == "zh" else _TEXT["en"]


_TEXT: dict[str, dict[str, str]] = {
    "en": {
        "head": "**Taskdoc:** `{path}`\n📦 **Type:** Encapsulated Taskdoc (`*.tsk/`)",
        "size": "📄 **Size:** {n} bytes",
        "size_big": "📊 **Size:** {kb} KB (too large to inline)",
        "title": "**Taskdoc Constitution (Encapsulated `*.tsk/`):**",
        "rules": (
            "- Our Taskdoc is a `*.tsk/` directory: it always auto-injects the 3 top-level "
            "sections (`goals` / `constraints` / `progress`); it may auto-inject `bearinmind/` "
            "(fixed whitelist); any other sections are NOT auto-injected and must be read via "
            "`recall_taskdoc` (only an index is shown)."
        ),
        "shared": (
            "- Team-shared: all sections are visible to every dialog of the tree. Do not "
            "overwrite/delete other contributors; add an owner marker for entries you maintain "
            "(e.g. `- [owner:@<id>] ...`)."
        ),
        "maintainer": "- Taskdoc maintainer (runs `change_mind`): @{m}",
        "inline": (
            "- Important: Taskdoc content is injected inline into the context (the latest as of "
            "this generation). Do not try to read files under `*.tsk/` via general file tools "
            "(they will be rejected)."
        ),
        "may_root": (
            "- This dialog may change the Taskdoc: yes, with the function tool `change_mind` "
            "(one whole section per call; start from the injected content and merge)."
        ),
        "may_side": (
            "- This dialog may change the Taskdoc: no. Side dialogs cannot call `change_mind`: "
            "ask the Taskdoc maintainer @{m} to apply updates, and provide a fully merged "
            "full-section replacement draft (do not overwrite/delete other contributors)."
        ),
        "sections": "**Sections:**",
        "present": "present",
        "missing": "missing",
        "absent": "absent",
        "invalid": "invalid",
        "bim_line": "- `bearinmind/` (optional injection): {state}",
        "bim_extra": "- Extra entries detected under `bearinmind/` (NOT injected): {names}",
        "index": "**Extra sections index (NOT auto-injected; use `recall_taskdoc` when needed):**",
        "index_entry": (
            '- `{rel}` (read: `recall_taskdoc({{"category":"{c}","selector":"{s}"}})`)'
        ),
        "index_entry_root": (
            '- `{rel}` (read: `recall_taskdoc({{"category":"{c}","selector":"{s}"}})`; '
            'update: `change_mind({{"category":"{c}","selector":"{s}","content":"..."}})`)'
        ),
        "none": "- (none)",
        "truncated": "- ⚠️ Truncated: too many entries; showing first {n}.",
        "create_root": (
            "If any section is missing, create it with the function tool `change_mind` "
            "(never via general file tools):\n"
            '- `change_mind({"selector":"goals","content":"..."})`\n'
            '- `change_mind({"selector":"constraints","content":"..."})`\n'
            '- `change_mind({"selector":"progress","content":"..."})`'
        ),
        "create_side": (
            "If any section is missing, ask the Taskdoc maintainer @{m} to create it with "
            "`change_mind` (never via general file tools)."
        ),
        "violations": "**Layout violations (fix manually):**",
        "top_level_file_under_subdir": (
            "- Violation: top-level file `{f}` must not appear under any subdirectory "
            "(found at: `{at}`)"
        ),
        "bearinmind_file_outside_bearinmind": (
            "- Violation: `{f}` must only appear under `bearinmind/` (found at: `{at}`)"
        ),
        "bearinmind_extra_entry": (
            "- Violation: extra entries are not allowed under `bearinmind/` (found at: `{at}`)"
        ),
        "bearinmind_not_directory": "- Violation: `bearinmind` must be a directory (found: `{at}`)",
        "scan_limit_exceeded": (
            "- Warning: task package too large; layout validation stopped early (max_entries={n})"
        ),
        "heading": "# Taskdoc (Dialog Tree)",
        "footer_root": (
            "*In this dialog, use the function tool `change_mind` to replace sections (each call "
            "replaces one entire section; you may call it several times in one turn; do not "
            "overwrite other contributors).*"
        ),
        "footer_side": (
            "*Side dialogs cannot call `change_mind`; ask the Taskdoc maintainer @{m} with a fully "
            "merged full-section replacement draft (do not overwrite/delete other contributors).*"
        ),
        "too_big": (
            "⚠️ **Note:** the Taskdoc body is too large to inline (over {limit} bytes); only the "
            "status above is shown. Ask to shorten the sections: each is replaced whole by "
            "`change_mind`."
        ),
        "directive": (
            "Directive: Do not invoke any general file tools (`read_file`, `write_file`, "
            "`list_dir`, `search`, `move`, `delete`) on any path under `*.tsk/`. Task package "
            "state is managed only through explicit Taskdoc actions (`change_mind`, "
            "`recall_taskdoc`)."
        ),
    },
    "zh": {
        "head": "**差遣牒：** `{path}`\n📦 **类型：** 封装差遣牒（`*.tsk/`）",
        "size": "📄 **大小：** {n} bytes",
        "size_big": "📊 **大小：** {kb} KB（过大，无法内联）",
        "title": "**差遣牒结构（封装差遣牒 `*.tsk/`）：**",
        "rules": (
            "- 我们的差遣牒是一个 `*.tsk/` 目录：顶层 3 个分段（`goals` / `constraints` / "
            "`progress`）一定会自动注入；`bearinmind/`（固定白名单）可选自动注入；其他章节不会自动"
            "注入，仅以“目录索引”形式提示并需用 `recall_taskdoc` 显式读取。"
        ),
        "shared": (
            "- 全队共享：所有分段对整棵对话树可见。更新时禁止覆盖/抹掉他人条目；建议为自己维护的"
            "条目标注责任人（如 `- [owner:@<id>] ...`）。"
        ),
        "maintainer": "- 差遣牒维护人（负责执行 `change_mind`）：@{m}",
        "inline": (
            "- 重要：差遣牒内容已被系统以内联形式注入到上下文中（本次生成时即为最新）。不要试图用"
            "通用文件工具读取 `*.tsk/` 下的文件（会被拒绝）。"
        ),
        "may_root": (
            "- 本对话可否修改差遣牒：可以，用函数工具 `change_mind`（每次整段替换一个分段；"
            "先对照注入的当前内容再合并）。"
        ),
        "may_side": (
            "- 本对话可否修改差遣牒：不可以。支线对话中不允许 `change_mind`：请诉请差遣牒维护人 "
            "@{m} 执行更新，并提供你已合并好的“分段全文替换稿”（禁止覆盖/抹掉他人条目）。"
        ),
        "sections": "**分段状态：**",
        "present": "存在",
        "missing": "缺失",
        "absent": "无",
        "invalid": "无效",
        "bim_line": "- `bearinmind/`（可选注入）：{state}",
        "bim_extra": "- `bearinmind/` 发现额外条目（不会被注入）：{names}",
        "index": "**额外章节索引（不会自动注入；需要时用 `recall_taskdoc` 显式读取）：**",
        "index_entry": '- `{rel}`（读：`recall_taskdoc({{"category":"{c}","selector":"{s}"}})`）',
        "index_entry_root": (
            '- `{rel}`（读：`recall_taskdoc({{"category":"{c}","selector":"{s}"}})`；'
            '写：`change_mind({{"category":"{c}","selector":"{s}","content":"..."}})`）'
        ),
        "none": "- （无）",
        "truncated": "- ⚠️ 已截断：目录条目过多，仅展示前 {n} 项。",
        "create_root": (
            "若某个分段缺失，请用函数工具 `change_mind` 创建（不要用通用文件工具）：\n"
            '- `change_mind({"selector":"goals","content":"..."})`\n'
            '- `change_mind({"selector":"constraints","content":"..."})`\n'
            '- `change_mind({"selector":"progress","content":"..."})`'
        ),
        "create_side": (
            "若某个分段缺失，请诉请差遣牒维护人 @{m} 用 `change_mind` 创建（不要用通用文件工具）。"
        ),
        "violations": "**结构违规（需要人工修复）：**",
        "top_level_file_under_subdir": (
            "- 违规：顶层文件 `{f}` 不得出现在子目录下（发现于：`{at}`）"
        ),
        "bearinmind_file_outside_bearinmind": (
            "- 违规：`{f}` 只能出现在 `bearinmind/` 下（发现于：`{at}`）"
        ),
        "bearinmind_extra_entry": "- 违规：`bearinmind/` 下不允许额外条目（发现于：`{at}`）",
        "bearinmind_not_directory": "- 违规：`bearinmind` 必须是目录（发现：`{at}`）",
        "scan_limit_exceeded": "- 警告：差遣牒包过大，结构检查提前中止（max_entries={n}）",
        "heading": "# 差遣牒（对话树）",
        "footer_root": (
            "*在当前对话中用函数工具 `change_mind` 来替换分段（每次调用替换一个分段全文；可在同一轮"
            "多次调用；禁止覆盖他人条目）。*"
        ),
        "footer_side": (
            "*支线对话中不允许 `change_mind`：请诉请差遣牒维护人 @{m} 执行更新，并提供合并好的"
            "“分段全文替换稿”（禁止覆盖/抹掉他人条目）。*"
        ),
        "too_big": (
            "⚠️ **注意：** 差遣牒正文过大（超过 {limit} bytes），无法内联，仅显示以上状态。"
            "请精简各分段：每个分段由 `change_mind` 整段替换。"
        ),
        "directive": (
            "指令：不要对 `*.tsk/` 下的任何路径调用通用文件工具（`read_file`、`write_file`、"
            "`list_dir`、`search`、`move`、`delete`）。差遣牒状态只能通过显式的差遣牒操作"
            "（`change_mind`、`recall_taskdoc`）进行管理。"
        ),
    },
}


def format_violation(v: Violation, lang: Lang = "en") -> str:
    t = _msgs(lang)
    return t[v.kind].format(f=v.filename or "", at=v.found_at or "", n=v.max_entries or 0)


def violation_problem(pkg: TaskPackage, v: Violation) -> str:
    """One `mindloop check` line for a layout violation, naming the offending path:
    `tasks/a.tsk/ux/goals.md: layout violation: top-level file ...`."""
    where = f"{pkg.rel_path}/{v.found_at}" if v.found_at else pkg.rel_path
    text = format_violation(v).removeprefix("- ")
    for label in ("Violation: ", "Warning: "):
        text = text.removeprefix(label)
    return f"{where}: layout violation: {text}"


def layout_problems(rtws: Path | str) -> list[str]:
    """Every layout violation of every discovered package of the rtws, one line each."""
    problems: list[str] = []
    for rel in discover_packages(rtws):
        pkg = TaskPackage(rtws, rel)
        problems += [violation_problem(pkg, v) for v in pkg.layout_violations()]
    return problems


def render_body(
    pkg: TaskPackage, lang: Lang = "en", *, override: Mapping[str, str] | None = None
) -> str:
    """`# Taskdoc (Dialog Tree)`, Goals, Constraints, Bear In Mind (if any), Progress.

    `override` maps package-relative section files to the text to use instead of the
    file's (what the body would be after a change).
    """
    t = _msgs(lang)
    over = override or {}

    def read(rel: str) -> str:
        return over[rel] if rel in over else pkg.read_section(rel)

    goals, constraints, progress = (read(f"{s}{SECTION_SUFFIX}") for s in TOP_LEVEL)
    bear: list[str] = []
    for s in BEARINMIND:
        body = read(f"{BEARINMIND_DIR}/{s}{SECTION_SUFFIX}")
        if body.strip():
            bear += [f"### {s}{SECTION_SUFFIX}", body]
    lines = [t["heading"], "", "## Goals", goals, "", "## Constraints", constraints, ""]
    if bear:
        lines += ["\n".join(["## Bear In Mind", *bear, ""])]
    lines += ["## Progress", progress]
    return "\n".join(lines)


def render_status(pkg: TaskPackage, *, is_root: bool, maintainer: str, lang: Lang = "en") -> str:
    t = _msgs(lang)
    m = maintainer
    out = [
        t["title"],
        t["rules"],
        t["shared"],
        t["maintainer"].format(m=m),
        t["inline"],
        t["may_root"] if is_root else t["may_side"].format(m=m),
        "",
        t["sections"],
    ]
    for s in TOP_LEVEL:
        state = "present" if pkg.section_exists(f"{s}{SECTION_SUFFIX}") else "missing"
        out.append(
            f"- `{s}{SECTION_SUFFIX}`: {t[state]}"
            if lang == "en"
            else f"- `{s}{SECTION_SUFFIX}`：{t[state]}"
        )
    bim_state, bim_extra = pkg.bearinmind_state()
    out.append(t["bim_line"].format(state=t[bim_state]))
    if bim_extra:
        out.append(t["bim_extra"].format(names=", ".join(f"`{n}`" for n in bim_extra)))
    out += ["", t["index"]]
    index = pkg.extra_sections()
    entry_key = "index_entry_root" if is_root else "index_entry"
    out += [t[entry_key].format(rel=e.rel, c=e.category, s=e.selector) for e in index.entries]
    if not index.entries:
        out.append(t["none"])
    if index.truncated:
        out.append(t["truncated"].format(n=len(index.entries)))
    out += ["", t["create_root"] if is_root else t["create_side"].format(m=m)]
    violations = pkg.layout_violations()
    if violations:
        out += ["", t["violations"], *(format_violation(v, lang) for v in violations)]
    return "\n".join(out)


def _render(pkg: TaskPackage, *, is_root: bool, maintainer: str, lang: Lang) -> str:
    t = _msgs(lang)
    body = render_body(pkg, lang)
    size = len(body.encode("utf-8"))
    status = render_status(pkg, is_root=is_root, maintainer=maintainer, lang=lang)
    head = t["head"].format(path=pkg.rel_path)
    footer = t["footer_root"] if is_root else t["footer_side"].format(m=maintainer)
    if size > INLINE_LIMIT_BYTES:
        kb = f"{size / 1024:.1f}"
        return "\n".join(
            [
                head,
                t["size_big"].format(kb=kb),
                "",
                status,
                "",
                t["too_big"].format(limit=INLINE_LIMIT_BYTES),
                footer,
                "",
                t["directive"],
            ]
        )
    return "\n".join(
        [
            head,
            t["size"].format(n=size),
            "",
            status,
            "",
            "---",
            body,
            "---",
            "",
            footer,
            "",
            t["directive"],
        ]
    )


def render_effective_taskdoc(
    pkg: TaskPackage, *, is_root: bool, maintainer: str, lang: Lang = "en"
) -> str:
    """The Taskdoc message for one dialog of the tree (cached on the package's stats).

    `is_root` decides whether the text offers `change_mind` or points to the maintainer
    (the root dialog's member). Reading never creates the package or any section.
    """
    return render_cached(
        pkg,
        f"effective:{is_root}:{maintainer}:{lang}",
        lambda: _render(pkg, is_root=is_root, maintainer=maintainer, lang=lang),
    )


def render_cached(pkg: TaskPackage, variant: str, render: Callable[[], str]) -> str:
    """A rendering of `pkg`, re-rendered only when a file or directory of the package
    changed (a few `lstat`s instead of reading every section on every generation).

    Every rendering a dialog sees comes through here, so this is where a read reconciles
    the package first: a change a kill left recorded but not applied is applied, and a
    stray temp file removed (`taskdoc.audit`). A cache hit needs no reconciling: the
    package directory is watched, so a temp file left since the rendering is a change."""
    key = (str(pkg.path), variant)
    with _lock:
        entry = _cache.get(key)
    if entry is not None and entry.unchanged():
        return entry.text
    reconcile_before_read(pkg)
    # Stat before reading: a change racing with the render leaves a stale signature,
    # which forces a re-render next time rather than caching new stats with old text.
    watch = _watch_paths(pkg)
    sig = tuple(_sig(p) for p in watch)
    text = render()
    with _lock:
        _cache[key] = _Entry.of(watch, sig, text)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return text


def clear_cache() -> None:
    """Forget every cached rendering (tests and long-lived processes that want memory back)."""
    with _lock:
        _cache.clear()


def package_from(rtws: Path | str, rel_path: str) -> TaskPackage:
    """Shorthand used by callers that only hold the rtws and the task path."""
    return TaskPackage(rtws, rel_path)
