"""Spending caps: whether a drive may start another generation.

The drive loop asks before each generation (`Driver._steps`). A drive whose own usage, or
whose task's usage (every dialog of the package, driven by any process, as stored),
reached a cap of team.yaml's `caps:` stops with `DriveEnd.CAP_REACHED` and a note naming
the cap, what was spent and where the cap is set; `chat` then exits 3. A cap is so
passed by at most the generation that crossed it. A generation without a known price
counts for nothing toward `max_cost` (set a `price:` in llm.yaml for such a model).
The task's usage is read (one aggregate query) only when a task cap is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from mindloop.config import CapLimits, CapsConfig
from mindloop.config.caps import format_usd
from mindloop.i18n import Lang
from mindloop.store import Store, UsageTotals

if TYPE_CHECKING:
    from mindloop.dialogs.live import LiveDialog

CAP_NOTE = {
    "en": "[mindloop] Stopped: {what}. Raise or remove caps.{scope}.{key} in .minds/team.yaml "
    "to go on, then send a message.",
    "zh": "[mindloop] 已停止：{what}。如需继续，请在 .minds/team.yaml 中调高或移除 "
    "caps.{scope}.{key}，然后发送消息。",
}
_SPENT = {
    ("en", "max_cost"): "{who} spent {used}, its cap is {cap}",
    ("en", "max_tokens"): "{who} used {used} tokens, its cap is {cap}",
    ("zh", "max_cost"): "{who}已花费 {used}，上限为 {cap}",
    ("zh", "max_tokens"): "{who}已使用 {used} 个 token，上限为 {cap}",
}
_WHO = {
    ("en", "drive"): "this drive",
    ("en", "task"): "task {task}",
    ("zh", "drive"): "本次驱动",
    ("zh", "task"): "任务 {task} ",
}


class CapScope(StrEnum):
    """Where a cap is set: `caps.drive` (one drive) or `caps.task` (the whole task)."""

    DRIVE = "drive"
    TASK = "task"


@dataclass(frozen=True)
class CapHit:
    """A cap reached: which scope's, and the note that says it."""

    scope: CapScope
    note: str


class CapGuard:
    """The caps of one runtime (its config is fixed for its life)."""

    def __init__(self, store: Store, caps: CapsConfig, lang: Lang) -> None:
        self.store = store
        self.caps = caps
        self.lang: Lang = lang if lang in ("en", "zh") else "en"

    def reached(self, live: LiveDialog, drive: UsageTotals) -> CapHit | None:
        """The cap reached and the note to stop with, or None while every cap leaves
        room."""
        hit = _over(self.caps.drive, drive)
        scope = CapScope.DRIVE
        if hit is None and self.caps.task.any:
            hit = _over(self.caps.task, self.store.usage(task_path=live.record.task_path))
            scope = CapScope.TASK
        if hit is None:
            return None
        key, used, cap = hit
        who = _WHO[(self.lang, scope)].format(task=live.record.task_path)
        what = _SPENT[(self.lang, key)].format(who=who, used=used, cap=cap)
        return CapHit(scope, CAP_NOTE[self.lang].format(what=what, scope=scope, key=key))


def _over(limits: CapLimits, used: UsageTotals) -> tuple[str, str, str] | None:
    """(key, used, cap) of the first limit `used` reached, rendered; None if none."""
    if limits.max_cost is not None and used.cost_usd >= limits.max_cost:
        return "max_cost", format_usd(used.cost_usd), format_usd(limits.max_cost)
    if limits.max_tokens is not None and used.tokens >= limits.max_tokens:
        return "max_tokens", f"{used.tokens:,}", f"{limits.max_tokens:,}"
    return None
