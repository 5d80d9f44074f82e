"""Member memory: cross-task user preferences and stable project facts a member keeps
(agent-loop §7.3), in `.minds/team/<member>/memory.jsonl`, one item a line.

Only SELF_IMPROVE writes it (`writeback.may_write`), only items with a confidence of at
least `loop.memory.min_confidence` (0.55), and never private data or secrets: an item
that looks like an e-mail address, a phone number or a key is refused. The same fact
written again updates its confidence instead of adding a line. The file is rewritten
atomically (temp file, fsync, rename), so a crash leaves the old or the new one.

The P1 section "member memory" is built from it (`section`): each item a part scored by
its confidence, so trimming drops the least certain first.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mindloop.config.problems import looks_like_secret
from mindloop.memory.sections import Part, Section, SectionKind
from mindloop.memory.writeback import Fact, may_write
from mindloop.taskdoc.fsio import atomic_write

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_PHONE = re.compile(r"(?<!\w)\+?\d[\d ()-]{7,}\d(?!\w)")
_KEYISH = re.compile(r"\b(api[_-]?key|password|passwd|secret|token)\s*[:=]\s*\S+", re.I)


class MemoryItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    confidence: float = Field(ge=0, le=1)
    task: str = ""  # the task it was learned in
    at: float = 0.0


class WriteStatus(StrEnum):
    ADDED = "added"
    UPDATED = "updated"  # the same fact again: its confidence updated
    REJECTED = "rejected"


class MemoryWrite(BaseModel):
    model_config = ConfigDict(frozen=True)

    status: WriteStatus
    reason: str = ""
    item: MemoryItem | None = None


def private_data(text: str) -> str | None:
    """What in `text` must not go into long-term memory, or None."""
    if _EMAIL.search(text):
        return "an e-mail address"
    if _PHONE.search(text):
        return "a phone number"
    if _KEYISH.search(text) or any(looks_like_secret(word) for word in text.split()):
        return "a secret"
    return None


def _fact_id(text: str) -> str:
    norm = " ".join(text.lower().split())
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()[:12]


KEPT = 256  # members' memory files remembered (a fixed amount of memory)
# What each file held when last read (by its path's text): (mtime_ns, size, inode) and its
# items.
_read: dict[str, tuple[tuple[int, int, int], tuple[MemoryItem, ...]]] = {}


class MemberMemory:
    """One member's memory file."""

    def __init__(self, rtws: Path, member: str, *, min_confidence: float = 0.55) -> None:
        self.path = rtws / ".minds" / "team" / member / "memory.jsonl"
        self._file = str(self.path)  # (what each step's look takes: no path object's work)
        self.min_confidence = min_confidence
        self._section: tuple[tuple[MemoryItem, ...], Section] | None = None
        self._missing = False  # the file was missing when last looked for

    def items(self) -> list[MemoryItem]:
        """The items, in the order they were first written. A damaged line is an error
        naming the file and line (nothing is dropped silently). Read again only when the
        file changed (its stat), so a loop asking at each step costs a `stat`."""
        return list(self._items())

    def _items(self) -> tuple[MemoryItem, ...]:
        """The items as last read (shared: not to change). A file found missing is
        looked for with `access` until it exists (no `stat` error at every step)."""
        file = self._file
        if self._missing and not os.access(file, os.F_OK):
            return ()
        try:
            st = os.stat(file)
        except FileNotFoundError:
            self._missing = True
            return ()
        self._missing = False
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        held = _read.get(file)
        if held is not None and held[0] == stamp:
            return held[1]
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ()
        items = tuple(self._parse(text))
        _read[file] = (stamp, items)
        if len(_read) > KEPT:
            del _read[next(iter(_read))]
        return items

    def _parse(self, text: str) -> list[MemoryItem]:
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(MemoryItem.model_validate_json(line))
            except ValidationError as err:
                raise ValueError(f"{self.path}:{n}: not a memory item: {err}") from err
        return out

    def remember(self, text: str, confidence: float, *, writer: str, task: str = "") -> MemoryWrite:
        """Write one fact, if `writer` may, it is confident enough and holds no private data."""
        text = text.strip()
        refused = may_write(Fact.USER_PREFERENCES, writer)
        if refused is None and not text:
            refused = "an empty item"
        if refused is None and confidence < self.min_confidence:
            refused = f"confidence {confidence} is below {self.min_confidence}"
        if refused is None:
            found = private_data(text)
            if found is not None:
                refused = f"it holds {found}: private data and secrets stay out of memory"
        if refused is not None:
            return MemoryWrite(status=WriteStatus.REJECTED, reason=refused)
        items = self.items()
        fid = _fact_id(text)
        item = MemoryItem(id=fid, text=text, confidence=confidence, task=task, at=time.time())
        status = WriteStatus.ADDED
        for i, old in enumerate(items):
            if old.id == fid:
                items[i], status = item, WriteStatus.UPDATED
                break
        else:
            items.append(item)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, "".join(json.dumps(i.model_dump()) + "\n" for i in items))
        return MemoryWrite(status=status, item=item)

    def section(self) -> Section:
        """The P1 section: each item scored by its confidence (built again only when the
        file was read again)."""
        items = self._items()
        held = self._section
        if held is not None and held[0] is items:
            return held[1]
        parts = tuple(Part(id=i.id, text=f"- {i.text}", score=i.confidence) for i in items)
        section = Section(kind=SectionKind.MEMBER_MEMORY, parts=parts)
        self._section = (items, section)
        return section
