"""The workspace rules in every dialog of the task (seed 003: rules are read-only and bind
every context), cheaply: this runs for every generation's system prompt.

The rules live in the store, which is authoritative (DESIGN.md §8: the files are
projections, written after the commit, and coalesced to once a second while a loop runs),
so the text never comes from `Workspace.md`. It is cached per task on the workspace's
stamp (`ws_meta.stamp`, new at every write of the workspace, by any process): a call
costs one indexed read of the stamp (a task without a workspace has none: no rules), and
the rules are read again only when the stamp moved — from the workspace value this
process holds at that stamp when it has one (`repo.held`: the loop's own writes keep it),
else from the rules table. The stamp is read before the rules: a write committed in
between leaves a text newer than its stamp, never an older one.
"""

from __future__ import annotations

import threading
from pathlib import Path

from mindloop.i18n import Lang
from mindloop.store import Store
from mindloop.store import workspace as rows
from mindloop.workspace import repo

HEADING: dict[str, str] = {
    "en": "# Workspace rules (set by the user; read-only; every dialog of the task follows them)",
    "zh": "# 工作区规则（由用户设定，只读，任务中的每个对话都必须遵循）",
}


class RulesText:
    """The rules block of a task's system prompts ("" when it has none)."""

    def __init__(self, store: Store, rtws: Path, lang: Lang = "en") -> None:
        self.store = store
        self.rtws = Path(rtws)
        self.lang = lang
        self._cache: dict[str, tuple[str, str]] = {}  # task -> (stamp, text)
        self._seen: dict[str, str | None] = {}  # task -> the stamp the last call read
        self._lock = threading.Lock()

    def last_stamp(self, task_path: str) -> str | None:
        """The workspace stamp the latest call for `task_path` read (read now if none
        did; None: no workspace). A caller right after a system prompt shares its read:
        the work loop's tree section, built next in the same request, costs no read of
        its own."""
        with self._lock:
            if task_path in self._seen:
                return self._seen[task_path]
        return rows.stamp(self.store, task_path)

    def __call__(self, task_path: str) -> str:
        stamp = rows.stamp(self.store, task_path)
        with self._lock:
            self._seen[task_path] = stamp
        if stamp is None:  # no workspace
            return ""
        with self._lock:
            hit = self._cache.get(task_path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        state = repo.held(self.store, task_path, stamp)  # the workspace at this stamp
        if state is not None:
            texts = [r.text for r in state.rules]
        else:
            texts = rows.rule_texts(self.store, task_path)
        text = "\n".join([HEADING[self.lang], *(f"- {r}" for r in texts)]) if texts else ""
        with self._lock:
            self._cache[task_path] = (stamp, text)
        return text
