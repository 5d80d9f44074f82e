"""The workspace rules in every dialog of the task (seed 003: rules are read-only and bind
every context), at no cost for a task without a workspace.

The rules live in the store; `Workspace.md` is rewritten after every commit that changes
them. So the text is cached per task on that file's `lstat` signature: a task with no
workspace costs one `lstat` per generation (the file is absent), an unchanged one the
same; the store is read again only when the projection changed (also when another
process changed the rules: its rewrite changes the file).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from mindloop.i18n import Lang
from mindloop.store import Store
from mindloop.store import workspace as rows
from mindloop.workspace.projection import WORKSPACE_DIR

HEADING: dict[str, str] = {
    "en": "# Workspace rules (set by the user; read-only; every dialog of the task follows them)",
    "zh": "# 工作区规则（由用户设定，只读，任务中的每个对话都必须遵循）",
}

_Sig = tuple[int, int, int, int]


class RulesText:
    """The rules block of a task's system prompts ("" when it has none)."""

    def __init__(self, store: Store, rtws: Path, lang: Lang = "en") -> None:
        self.store = store
        self.rtws = Path(rtws)
        self.lang = lang
        self._cache: dict[str, tuple[_Sig, str]] = {}
        self._paths: dict[str, str] = {}  # task -> its Workspace.md (looked at per generation)
        self._lock = threading.Lock()

    def __call__(self, task_path: str) -> str:
        path = self._paths.get(task_path)
        if path is None:
            path = self._paths[task_path] = os.path.join(
                self.rtws, task_path, WORKSPACE_DIR, "Workspace.md"
            )
        try:
            st = os.lstat(path)
        except OSError:
            return ""
        sig = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        with self._lock:
            hit = self._cache.get(task_path)
        if hit is not None and hit[0] == sig:
            return hit[1]
        texts = rows.rule_texts(self.store, task_path)
        text = "\n".join([HEADING[self.lang], *(f"- {r}" for r in texts)]) if texts else ""
        with self._lock:
            self._cache[task_path] = (sig, text)
        return text
