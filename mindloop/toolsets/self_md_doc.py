"""The text of a `self.md`: `## ` sections (outside code fences), patched one at a time
so that every byte of the other sections stays as it was (agent-loop §9.1).

A file is a list of blocks whose texts concatenate to exactly the file: the preamble
(text before the first heading) and one block per section, from its heading line to the
next heading. A section is protected when its title is in the configured list (compared
case-insensitively, whitespace collapsed) or its heading ends with `(protected)`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

PROTECTED_MARK = "(protected)"

_HEADING = re.compile(r"^## +(\S.*?)\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def count_tokens(text: str) -> int:
    """The default token counter of agent-loop §7.1: characters / 4, rounded up."""
    return (len(text) + 3) // 4


EMPTY_SHA256 = sha256_hex("")


def normal_title(title: str) -> str:
    return " ".join(title.split()).casefold()


def is_protected(title: str, protected: Sequence[str]) -> bool:
    norm = normal_title(title)
    return norm.endswith(PROTECTED_MARK) or norm in {normal_title(p) for p in protected}


# ---------------------------------------------------------------------- the document


@dataclass(frozen=True)
class Block:
    """The preamble (`title` None) or one `## ` section, as its exact text."""

    title: str | None
    text: str


def headings(text: str) -> list[tuple[int, str]]:
    """(line index, title) of every `## ` heading outside code fences."""
    found: list[tuple[int, str]] = []
    fence: str | None = None
    for i, line in enumerate(text.splitlines()):
        opened = _FENCE.match(line)
        if opened is not None:
            mark = opened.group(1)
            fence = None if fence == mark else (fence or mark)
            continue
        if fence is None:
            m = _HEADING.match(line)
            if m is not None:
                found.append((i, m.group(1)))
    return found


def open_fence(text: str) -> str | None:
    """The mark of a code fence `text` leaves open (```` ``` ```` or `~~~`), or None."""
    fence: str | None = None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if opened is not None:
            mark = opened.group(1)
            fence = None if fence == mark else (fence or mark)
    return fence


def _closed(text: str) -> str:
    """`text` with a fence it leaves open closed, so no heading after it is swallowed."""
    mark = open_fence(text)
    return text if mark is None else text.rstrip("\n") + f"\n{mark}\n"


def split_blocks(text: str) -> list[Block]:
    """The file as blocks whose texts concatenate to exactly `text`."""
    lines = text.splitlines(keepends=True)
    heads = headings(text)
    blocks = [Block(None, "".join(lines[: heads[0][0] if heads else len(lines)]))]
    for n, (start, title) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        blocks.append(Block(title, "".join(lines[start:end])))
    return blocks


def find_section(blocks: Sequence[Block], title: str) -> int | None:
    norm = normal_title(title)
    for i, block in enumerate(blocks):
        if block.title is not None and normal_title(block.title) == norm:
            return i
    return None


def section_text(text: str, title: str) -> str | None:
    """The section's text, without the blank lines that separate it from the next."""
    blocks = split_blocks(text)
    i = find_section(blocks, title)
    return None if i is None else blocks[i].text.rstrip("\n") + "\n"


def normal_body(content: str) -> str:
    """A section body as written: no blank lines around it, one newline at its end."""
    content = content.strip("\n")
    return _closed(content.rstrip() + "\n") if content.strip() else ""


def _with_block(blocks: list[Block], i: int | None, new: Block | None) -> str:
    """The text with block `i` replaced by `new` (`i` None: appended; `new` None:
    removed). Only the junctions around the change are normalised (one blank line
    between sections), so every other byte of the file stays as it was."""
    out = list(blocks)
    if new is None:
        assert i is not None
        del out[i]
    elif i is None:
        out.append(new)
    else:
        out[i] = new
    for k in range(len(out) - 1):  # a section is followed by a blank line
        if open_fence(out[k].text) is not None:  # the file ended inside a fence
            out[k] = Block(out[k].title, _closed(out[k].text))
        text = out[k].text
        if text and out[k + 1].title is not None and not text.endswith("\n\n"):
            out[k] = Block(out[k].title, text.rstrip("\n") + "\n\n")
    if out and (i is None or i >= len(out) - 1) and out[-1].text.strip():
        out[-1] = Block(out[-1].title, out[-1].text.rstrip("\n") + "\n")  # the file's end
    return "".join(b.text for b in out)


Op = Literal["replace", "append", "delete"]


def apply_op(text: str, title: str, op: Op, content: str) -> str:
    """`text` with section `title` changed: `replace` sets its body (creating the
    section at the end when absent), `append` adds to its body (likewise), `delete`
    removes it. Raises `KeyError` for a delete of a section that does not exist."""
    blocks = split_blocks(text)
    i = find_section(blocks, title)
    if op == "delete":
        if i is None:
            raise KeyError(title)
        return _with_block(blocks, i, None)
    heading = f"## {' '.join(title.split())}\n" if i is None else _heading_line(blocks[i])
    body = normal_body(content)
    if op == "append" and i is not None:
        old = blocks[i].text[len(heading) :].strip("\n")
        body = normal_body(f"{old}\n{content}" if old.strip() else content)
    return _with_block(
        blocks, i, Block(blocks[i].title if i is not None else title, heading + body)
    )


def _heading_line(block: Block) -> str:
    first, sep, _ = block.text.partition("\n")
    return first + (sep or "\n")


def restore_section(current: str, before: str, title: str) -> str:
    """`current` with section `title` as it was in `before` (removed if it was absent)."""
    blocks = split_blocks(current)
    i = find_section(blocks, title)
    old_blocks = split_blocks(before)
    j = find_section(old_blocks, title)
    if j is None:
        return current if i is None else _with_block(blocks, i, None)
    old = old_blocks[j]
    return _with_block(blocks, i, Block(old.title, old.text.rstrip("\n") + "\n"))
