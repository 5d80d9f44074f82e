"""A system prompt is joined again only when one of its parts changed: the same text
while the persona, self.md, rules and Taskdoc are unchanged; an edit of the persona file
made outside mindloop shows at the next prompt."""

from __future__ import annotations

import os
from pathlib import Path

from mindloop.config import load_config
from mindloop.dialogs.context import ContextBuilder
from mindloop.store import DialogRecord
from tests.scenario_util import write_team


def _prompt(ctx: ContextBuilder, member: str, taskdoc: str) -> str:
    rec = DialogRecord(id="d1", root_id="d1", member=member, task_path="tasks/example.tsk")
    return ctx.system_prompt(rec, ctx.config.member(member), member, taskdoc=taskdoc)


def test_an_unchanged_prompt_is_the_same_text_and_an_edited_persona_shows(rtws: Path) -> None:
    write_team(rtws, {"dev": {"persona": "dev.md"}})
    persona = rtws / "dev.md"
    persona.write_text("You are Dev, careful.\n", "utf-8")
    ctx = ContextBuilder(rtws, load_config(rtws))
    doc = "# Taskdoc\nthe goals"
    first = _prompt(ctx, "dev", doc)
    assert first.startswith("You are Dev, careful.\n\n") and first.endswith(doc)
    assert _prompt(ctx, "dev", doc) is first  # nothing changed: not joined again

    persona.write_text("You are Dev, bold.\n", "utf-8")
    os.utime(persona, ns=(1, 1))  # another mtime, whatever the clock's resolution
    edited = _prompt(ctx, "dev", doc)
    assert edited.startswith("You are Dev, bold.\n\n")

    other = "# Taskdoc\nother goals"  # an equal text is not needed: another one shows
    assert _prompt(ctx, "dev", other).endswith(other)
