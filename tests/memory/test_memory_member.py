"""Member memory (agent-loop §7.3): SELF_IMPROVE only, confident facts, no private data."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.config.loop_memory import MemoryConfig
from mindloop.memory import MemoryCompiler, SectionKind
from mindloop.memory.member import MemberMemory, WriteStatus


def test_facts_are_written_updated_and_become_the_member_memory_section(tmp_path: Path) -> None:
    mem = MemberMemory(tmp_path, "dev")
    assert (
        mem.remember("The user prefers pytest over unittest.", 0.8, writer="SELF_IMPROVE").status
        is WriteStatus.ADDED
    )
    assert (
        mem.remember("the user prefers  pytest over unittest.", 0.9, writer="SELF_IMPROVE").status
        is WriteStatus.UPDATED
    )
    mem.remember("Builds run with `make ci`.", 0.6, writer="SELF_IMPROVE")
    items = MemberMemory(tmp_path, "dev").items()
    assert [i.confidence for i in items] == [0.9, 0.6]
    section = mem.section()
    assert section.kind is SectionKind.MEMBER_MEMORY and [p.score for p in section.parts] == [
        0.9,
        0.6,
    ]
    out = MemoryCompiler(MemoryConfig()).compile([section], window=200_000)
    assert "make ci" in out.messages()[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "confidence", "writer", "why"),
    [
        ("fact", 0.9, "DO", "only SELF_IMPROVE"),
        ("fact", 0.5, "SELF_IMPROVE", "below 0.55"),
        ("mail bob@example.com about it", 0.9, "SELF_IMPROVE", "e-mail"),
        ("call +1 (555) 123-4567", 0.9, "SELF_IMPROVE", "phone"),
        ("use api_key=abc123", 0.9, "SELF_IMPROVE", "secret"),
        ("key sk-abcdefghijklmnop", 0.9, "SELF_IMPROVE", "secret"),
    ],
)
def test_what_may_not_be_remembered(
    tmp_path: Path, text: str, confidence: float, writer: str, why: str
) -> None:
    mem = MemberMemory(tmp_path, "dev")
    got = mem.remember(text, confidence, writer=writer)
    assert got.status is WriteStatus.REJECTED and why in got.reason
    assert not mem.path.exists()


def test_a_damaged_memory_file_is_reported_with_its_line(tmp_path: Path) -> None:
    mem = MemberMemory(tmp_path, "dev")
    mem.remember("a fact", 0.9, writer="SELF_IMPROVE")
    mem.path.write_text(mem.path.read_text() + "{not json\n", "utf-8")
    with pytest.raises(ValueError, match=r"memory.jsonl:2: not a memory item"):
        mem.items()


def test_a_file_changed_by_another_writer_is_read_again(tmp_path: Path) -> None:
    """Reads are kept while the file's stat is unchanged (a loop asks at every step); a
    write by another process (a new file: new inode, size, time) is seen at once, and a
    damaged line still names the file and the line."""
    mem = MemberMemory(tmp_path, "dev")
    mem.remember("Builds run with `make ci`.", 0.6, writer="SELF_IMPROVE")
    assert [i.text for i in mem.items()] == ["Builds run with `make ci`."]
    other = MemberMemory(tmp_path, "dev")
    other.remember("The user reads diffs, not prose.", 0.7, writer="SELF_IMPROVE")
    assert len(mem.items()) == 2
    mem.path.write_text(mem.path.read_text("utf-8") + "not json\n", "utf-8")
    with pytest.raises(ValueError, match=r"memory\.jsonl:3: not a memory item"):
        mem.items()


def test_a_memory_file_missing_then_written_elsewhere_shows_at_once(tmp_path: Path) -> None:
    """A missing file is looked for at every step without a `stat` error; another
    writer creating it shows in the next section, and its removal empties it again."""
    mem = MemberMemory(tmp_path, "dev")
    for _ in range(2):
        assert mem.section().parts == ()
    MemberMemory(tmp_path, "dev").remember("Use uv.", 0.9, writer="SELF_IMPROVE")
    assert [p.text for p in mem.section().parts] == ["- Use uv."]
    mem.path.unlink()
    assert mem.section().parts == ()
    MemberMemory(tmp_path, "dev").remember("Use pip.", 0.9, writer="SELF_IMPROVE")
    assert [p.text for p in mem.section().parts] == ["- Use pip."]
