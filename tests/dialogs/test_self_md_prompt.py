"""A member's own self.md is rendered into its system prompt after its persona, under a
heading naming the file's hash (the base of a `self_md_patch` call); other members' files
are not; an unchanged file is not read again."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from mindloop.config import load_config
from mindloop.dialogs.context import ContextBuilder
from mindloop.store import DialogRecord
from tests.scenario_util import write_team


def _prompt(ctx: ContextBuilder, member: str) -> str:
    rec = DialogRecord(id="d1", root_id="d1", member=member, task_path="tasks/example.tsk")
    return ctx.system_prompt(rec, ctx.config.member(member), member)


def test_self_md_follows_the_persona_with_its_hash(rtws: Path) -> None:
    write_team(rtws, {"dev": {}, "ann": {}})
    ctx = ContextBuilder(rtws, load_config(rtws))
    assert "self.md" not in _prompt(ctx, "dev")  # no file, no heading
    path = rtws / ".minds" / "team" / "dev" / "self.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "## Habits\nRead before writing.\n"
    path.write_text(text)
    sha = hashlib.sha256(text.encode()).hexdigest()[:12]
    prompt = _prompt(ctx, "dev")
    block = f"# Your self.md (sha256 {sha})"
    assert block in prompt and "## Habits\nRead before writing." in prompt
    persona = ctx.persona(ctx.config.member("dev"))
    assert prompt.startswith(persona + "\n\n" + block)
    assert prompt.index(block) < prompt.index("# How you work")
    assert "Read before writing." not in _prompt(ctx, "ann")

    text2 = "## Habits\nRun the tests.\n"
    path.write_text(text2)
    os.utime(path, ns=(1, 1))  # another mtime, whatever the clock's resolution
    sha2 = hashlib.sha256(text2.encode()).hexdigest()[:12]
    assert f"# Your self.md (sha256 {sha2})\n" in _prompt(ctx, "dev")


def test_an_unchanged_self_md_is_not_read_again(
    rtws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_team(rtws, {"dev": {}})
    path = rtws / ".minds" / "team" / "dev" / "self.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("## Habits\nx\n")
    ctx = ContextBuilder(rtws, load_config(rtws))
    first = _prompt(ctx, "dev")
    reads: list[Path] = []
    real = Path.read_text
    monkeypatch.setattr(
        Path, "read_text", lambda self, *a, **k: reads.append(self) or real(self, *a, **k)
    )
    assert _prompt(ctx, "dev") == first
    assert path not in reads
