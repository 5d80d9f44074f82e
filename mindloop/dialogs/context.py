"""Assembles what one generation sends to the model.

The system prompt is rebuilt for every generation (the Taskdoc may have changed), but
each part is cached on file stats so an unchanged rtws costs a few `stat` calls. The
history is the in-memory `History`, never re-read from the store.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from operator import is_
from pathlib import Path

from mindloop.config import Config, MemberConfig
from mindloop.dialogs.prompts import DEFAULT_PERSONA, RUNTIME_RULES, SELF_MD_HEADING, text_for
from mindloop.i18n import Lang
from mindloop.store.records import DialogRecord
from mindloop.taskdoc import TaskPackage, encapsulation_rules, render_effective_taskdoc

PROMPTS_KEPT = 1024  # (member, task) pairs whose last system prompt is kept (emptied when full)


class _StatCache:
    """Caches a file's text keyed by (mtime_ns, size). A file found missing is looked
    for with `access` until it exists (no `stat` error raised and caught at every
    generation for the usual missing self.md)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple[int, int], str]] = {}
        self._missing: set[str] = set()

    def read(self, path: str) -> str:
        if path in self._missing:
            if not os.access(path, os.F_OK):
                return ""
            self._missing.discard(path)
        try:
            st = os.stat(path)
        except OSError:
            self._missing.add(path)
            return ""
        key = (st.st_mtime_ns, st.st_size)
        hit = self._cache.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        self._cache[path] = (key, text)
        return text


class ContextBuilder:
    def __init__(
        self,
        rtws: Path,
        config: Config,
        lang: Lang = "en",
        *,
        rules: Callable[[str], str] | None = None,
    ) -> None:
        self.rtws = rtws
        self.config = config
        self.lang = lang
        # The workspace rules of a task ("" without any): in every dialog of the task.
        self.rules = rules
        self._files = _StatCache()
        self._packages: dict[str, TaskPackage] = {}
        self._self_md: dict[str, tuple[str, str]] = {}  # member -> (file text, rendered)
        self._personas: dict[str, tuple[str, str, str]] = {}  # member -> (text, name, shown)
        # (paths built once, as text: read per generation)
        self._self_md_paths: dict[str, str] = {}
        self._persona_paths: dict[str, str] = {}
        self._rosters: dict[str, str] = {}  # by member, for `_rosters_of`
        self._rosters_of = config
        # the last prompt by (member, task), with the parts it was joined from
        self._prompts: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {}

    def package(self, task_path: str) -> TaskPackage:
        pkg = self._packages.get(task_path)
        if pkg is None:
            pkg = self._packages[task_path] = TaskPackage(self.rtws, task_path)
        return pkg

    def persona(self, member: MemberConfig) -> str:
        path = self._persona_paths.get(member.persona)
        if path is None:
            path = self._persona_paths[member.persona] = str(self.rtws / member.persona)
        text = self._files.read(path)
        hit = self._personas.get(member.id)
        if hit is not None and hit[0] is text and hit[1] == member.name:  # the same file
            return hit[2]
        shown = text.strip() or text_for(DEFAULT_PERSONA, self.lang).format(name=member.name)
        self._personas[member.id] = (text, member.name, shown)
        return shown

    def self_md(self, member: MemberConfig) -> str:
        """The member's own `self.md` under a heading naming its hash ("" when it has
        none); one `stat` per generation while the file is unchanged."""
        path = self._self_md_paths.get(member.id)
        if path is None:
            path = self._self_md_paths[member.id] = str(
                self.rtws / ".minds" / "team" / member.id / "self.md"
            )
        text = self._files.read(path)
        hit = self._self_md.get(member.id)
        if hit is not None and hit[0] is text:
            return hit[1]
        rendered = ""
        if text.strip():
            sha = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
            heading = text_for(SELF_MD_HEADING, self.lang).format(sha=sha)
            rendered = f"{heading}\n\n{text.strip()}"
        self._self_md[member.id] = (text, rendered)
        return rendered

    def team_roster(self, member: MemberConfig) -> str:
        if self._rosters_of is not self.config:  # another config: built again
            self._rosters, self._rosters_of = {}, self.config
        found = self._rosters.get(member.id)
        if found is None:
            found = self._rosters[member.id] = self._roster(member)
        return found

    def _roster(self, member: MemberConfig) -> str:
        lines = []
        for mid, m in self.config.team.members.items():
            if mid == member.id or m.hidden:
                continue
            about = f" — {m.gofor}" if m.gofor else ""
            lines.append(f"- @{mid} ({m.name}){about}")
        if not lines:
            return ""
        return "# Your teammates\n" + "\n".join(lines)

    def taskdoc(self, dialog: DialogRecord, root_member: str) -> str:
        """The effective Taskdoc as the system prompt carries it (whole, never trimmed)."""
        return render_effective_taskdoc(
            self.package(dialog.task_path),
            is_root=dialog.kind == "root",
            maintainer=root_member,
            lang=self.lang,
        )

    def system_prompt(
        self,
        dialog: DialogRecord,
        member: MemberConfig,
        root_member: str,
        *,
        taskdoc: str | None = None,
    ) -> str:
        """Persona, self.md, the runtime's rules, the roster, the encapsulation and
        workspace rules, and the effective Taskdoc (`taskdoc`: as the caller just
        rendered it with `self.taskdoc`, else rendered here)."""
        if taskdoc is None:
            taskdoc = self.taskdoc(dialog, root_member)
        parts = (
            self.persona(member),
            self.self_md(member),
            text_for(RUNTIME_RULES, self.lang),
            self.team_roster(member),
            encapsulation_rules(self.lang),
            self.rules(dialog.task_path) if self.rules is not None else "",
            taskdoc,
        )
        # Each part is the very text its cache holds while its source is unchanged: the
        # prompt joined for the same texts (by identity) is the same; joined again else.
        key = (member.id, dialog.task_path)
        held = self._prompts.get(key)
        if held is not None and all(map(is_, held[0], parts)):
            return held[1]
        text = "\n\n".join(p for p in parts if p)
        if len(self._prompts) >= PROMPTS_KEPT:
            self._prompts.clear()
        self._prompts[key] = (parts, text)
        return text
