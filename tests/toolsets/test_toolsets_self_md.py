"""`self_md_patch`: a member's own self.md, changed one section at a time, traceably.

Through the tool's public interface (a registry running the call with a `ToolContext`):
protected sections are refused, growth is capped per call, a stale base hash is a
conflict, a replayed call (same call key) applies once — also after a kill between the
history entry and the file's replacement — and every change has a history entry a human
can revert.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mindloop.config.loop_self_md import SelfMdConfig
from mindloop.tools.base import ToolContext, call_key
from mindloop.tools.registry import ToolRegistry
from mindloop.toolsets import self_md as sm
from mindloop.toolsets import self_md_doc as doc
from mindloop.toolsets.self_improve import revert_self_md, self_md_patch_tool

START = (
    "Intro by a human.\n\n## Hard rules\nNever push to main.\n\n## Habits\nRead before writing.\n"
)


def _registry(config: SelfMdConfig | None = None) -> ToolRegistry:
    reg = ToolRegistry()
    reg.add_toolset("self_improve", [self_md_patch_tool(config or SelfMdConfig())], loop_owned=True)
    return reg


def _ctx(rtws: Path, member: str = "dev", n: int = 0) -> ToolContext:
    return ToolContext(
        rtws=rtws,
        member=member,
        dialog_id="d1",
        call_key=call_key("d1", 7, n),
        task_path="tasks/t.tsk",
    )


def _write(rtws: Path, text: str, member: str = "dev") -> str:
    path = sm.self_md_path(rtws, member)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return doc.sha256_hex(text)


async def _patch(
    rtws: Path,
    ctx: ToolContext,
    *,
    base: str | None = None,
    reg: ToolRegistry | None = None,
    **args: Any,
) -> dict[str, Any]:
    current = sm.read_text(sm.self_md_path(rtws, ctx.member))
    args.setdefault("rationale", "it helps")
    args["base_sha256"] = base if base is not None else doc.sha256_hex(current)
    out = await (reg or _registry()).execute("self_md_patch", json.dumps(args), ctx)
    result: dict[str, Any] = json.loads(out.text)
    assert out.is_error == (result["result"] in ("CONFLICT", "REJECTED"))
    return result


def _self_md(rtws: Path, member: str = "dev") -> str:
    return sm.read_text(sm.self_md_path(rtws, member))


async def test_a_patch_changes_one_section_and_records_the_previous_file(tmp_path: Path) -> None:
    _write(tmp_path, START)
    res = await _patch(
        tmp_path, _ctx(tmp_path), section="Habits", op="append", content="Run the tests."
    )
    assert res["result"] == "APPLIED" and res["history_seq"] == 1
    text = _self_md(tmp_path)
    assert text == START.replace("Read before writing.\n", "Read before writing.\nRun the tests.\n")
    assert res["sha256"] == doc.sha256_hex(text)
    (entry,) = sm.SelfMdFile(tmp_path, "dev").history()
    assert entry.prev_content == START and entry.new_sha256 == res["sha256"]
    assert entry.idempotency_key == _ctx(tmp_path).call_key
    assert (entry.section, entry.op, entry.rationale, entry.task_path) == (
        "Habits",
        "append",
        "it helps",
        "tasks/t.tsk",
    )
    # a new section goes at the end, after a blank line
    res = await _patch(
        tmp_path, _ctx(tmp_path, n=1), section="Pitfalls", op="replace", content="Flaky CI."
    )
    assert res["history_seq"] == 2
    assert _self_md(tmp_path).endswith("Run the tests.\n\n## Pitfalls\nFlaky CI.\n")


async def test_only_the_calling_members_file_changes(tmp_path: Path) -> None:
    _write(tmp_path, START, "bob")
    res = await _patch(
        tmp_path, _ctx(tmp_path, "alice"), section="Habits", op="replace", content="x"
    )
    assert res["result"] == "APPLIED"
    assert _self_md(tmp_path, "alice") == "## Habits\nx\n"
    assert _self_md(tmp_path, "bob") == START


@pytest.mark.parametrize(
    "section", ["Hard rules", "hard   RULES", "Safety (protected)", "Custom"], ids=str
)
async def test_a_protected_section_is_refused(tmp_path: Path, section: str) -> None:
    _write(tmp_path, START + "\n## Safety (protected)\nAsk first.\n")
    reg = _registry(SelfMdConfig(protected_sections=["Hard rules", "custom"]))
    for op, content in (("replace", "Push anywhere."), ("append", "More."), ("delete", "")):
        res = await _patch(
            tmp_path, _ctx(tmp_path), reg=reg, section=section, op=op, content=content
        )
        assert (res["result"], res["reason"]) == ("REJECTED", "PROTECTED"), res
        assert "only humans edit it" in res["message"]
    assert sm.SelfMdFile(tmp_path, "dev").history() == []


async def test_the_preamble_and_headings_inside_content_are_refused(tmp_path: Path) -> None:
    _write(tmp_path, START)
    res = await _patch(tmp_path, _ctx(tmp_path), section="  ", op="replace", content="x")
    assert (res["result"], res["reason"]) == ("REJECTED", "PROTECTED")
    res = await _patch(
        tmp_path, _ctx(tmp_path), section="Habits", op="replace", content="a\n## Sneaky\nb"
    )
    assert (res["result"], res["reason"]) == ("REJECTED", "FORMAT")
    # a '## ' line inside a code fence is content, not a heading
    fenced = "```md\n## not a heading\n```"
    res = await _patch(tmp_path, _ctx(tmp_path), section="Habits", op="replace", content=fenced)
    assert res["result"] == "APPLIED"
    assert doc.section_text(_self_md(tmp_path), "Habits") == f"## Habits\n{fenced}\n"


async def test_a_call_adds_at_most_200_tokens_net(tmp_path: Path) -> None:
    start = "## Notes\nab\n"  # 12 characters: 3 tokens (characters / 4)
    _write(tmp_path, start)
    # appending c adds len(c) + 1 characters: 812 characters (203 tokens) is +200
    res = await _patch(tmp_path, _ctx(tmp_path), section="Notes", op="append", content="y" * 800)
    assert (res["result"], res["reason"]) == ("REJECTED", "TOO_LARGE")
    assert "adds 201 tokens; at most 200 per call" in res["message"]
    assert _self_md(tmp_path) == start
    res = await _patch(
        tmp_path, _ctx(tmp_path, n=1), section="Notes", op="append", content="x" * 799
    )
    assert res["result"] == "APPLIED"
    assert doc.count_tokens(_self_md(tmp_path)) - doc.count_tokens(start) == 200
    # net: replacing text with as much text adds nothing
    res = await _patch(
        tmp_path, _ctx(tmp_path, n=2), section="Notes", op="replace", content="z" * 802
    )
    assert res["result"] == "APPLIED"


async def test_the_whole_file_stays_within_its_budget(tmp_path: Path) -> None:
    reg = _registry(SelfMdConfig(max_tokens=300))
    _write(tmp_path, "## A\n" + "a" * 1000 + "\n")  # 252 tokens
    res = await _patch(
        tmp_path, _ctx(tmp_path), reg=reg, section="B", op="append", content="b" * 400
    )
    assert (res["result"], res["reason"]) == ("REJECTED", "TOO_LARGE")
    assert "at most 300" in res["message"]
    # shrinking is always allowed, even over budget
    _write(tmp_path, "## A\n" + "a" * 2000 + "\n")
    res = await _patch(
        tmp_path, _ctx(tmp_path, n=1), reg=reg, section="A", op="replace", content="short"
    )
    assert res["result"] == "APPLIED"


async def test_a_stale_base_hash_is_a_conflict(tmp_path: Path) -> None:
    old = _write(tmp_path, START)
    _write(tmp_path, START + "\n## Edited\nby a human meanwhile\n")
    res = await _patch(
        tmp_path, _ctx(tmp_path), base=old, section="Habits", op="append", content="More."
    )
    assert (res["result"], res["reason"]) == ("CONFLICT", "STALE_BASE")
    assert "changed since you read it" in res["message"] and old[:12] in res["message"]
    assert res["sha256"] == doc.sha256_hex(_self_md(tmp_path))
    assert "More." not in _self_md(tmp_path)
    # the current hash, or its first 12 characters as the prompt shows it, is accepted
    res = await _patch(
        tmp_path,
        _ctx(tmp_path),
        base=res["sha256"][:12],
        section="Habits",
        op="append",
        content="More.",
    )
    assert res["result"] == "APPLIED"
    res = await _patch(
        tmp_path, _ctx(tmp_path, n=1), base="abc", section="Habits", op="append", content="x"
    )
    assert (res["result"], res["reason"]) == ("REJECTED", "FORMAT")


async def test_a_missing_file_has_the_empty_hash(tmp_path: Path) -> None:
    res = await _patch(
        tmp_path,
        _ctx(tmp_path),
        base=doc.EMPTY_SHA256[:12],
        section="Habits",
        op="append",
        content="Hi.",
    )
    assert res["result"] == "APPLIED"
    assert _self_md(tmp_path) == "## Habits\nHi.\n"


async def test_a_replayed_call_applies_once(tmp_path: Path) -> None:
    base = _write(tmp_path, START)
    ctx = _ctx(tmp_path)
    first = await _patch(tmp_path, ctx, base=base, section="Habits", op="append", content="Once.")
    again = await _patch(tmp_path, ctx, base=base, section="Habits", op="append", content="Once.")
    assert first["result"] == "APPLIED" and again["result"] == "ALREADY_APPLIED"
    assert again["history_seq"] == first["history_seq"] == 1
    assert _self_md(tmp_path).count("Once.") == 1
    assert len(sm.SelfMdFile(tmp_path, "dev").history()) == 1
    # the same change re-issued as a new call (after an "interrupted" result) is a no-op too
    res = await _patch(
        tmp_path, _ctx(tmp_path, n=5), base=base, section="Habits", op="append", content="Once."
    )
    assert res["result"] == "ALREADY_APPLIED"
    assert _self_md(tmp_path).count("Once.") == 1


class Killed(BaseException):
    """The process dies here."""


async def test_a_kill_after_the_history_entry_is_rolled_forward_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _write(tmp_path, START)
    ctx = _ctx(tmp_path)
    real = sm.os.replace

    def die(src: Any, dst: Any) -> None:
        raise Killed

    monkeypatch.setattr(sm.os, "replace", die)
    with pytest.raises(Killed):
        await _patch(tmp_path, ctx, base=base, section="Habits", op="append", content="Once.")
    monkeypatch.setattr(sm.os, "replace", real)
    assert _self_md(tmp_path) == START  # recorded, not applied yet
    assert len(sm.SelfMdFile(tmp_path, "dev").history()) == 1
    again = await _patch(tmp_path, ctx, base=base, section="Habits", op="append", content="Once.")
    assert again["result"] == "ALREADY_APPLIED"
    assert _self_md(tmp_path).count("Once.") == 1
    assert not list(sm.member_dir(tmp_path, "dev").glob(".self.md.*.tmp"))


async def test_a_torn_history_line_is_a_change_that_never_happened(tmp_path: Path) -> None:
    _write(tmp_path, START)
    await _patch(tmp_path, _ctx(tmp_path), section="Habits", op="append", content="One.")
    history = sm.member_dir(tmp_path, "dev") / sm.HISTORY
    with open(history, "a", encoding="utf-8") as fh:
        fh.write('{"seq": 2, "at": 1.0, "memb')  # a kill inside the append
    (sm.member_dir(tmp_path, "dev") / ".self.md.dead.tmp").write_text("half")
    res = await _patch(tmp_path, _ctx(tmp_path, n=1), section="Habits", op="append", content="Two.")
    assert (res["result"], res["history_seq"]) == ("APPLIED", 2)
    assert [e.seq for e in sm.SelfMdFile(tmp_path, "dev").history()] == [1, 2]
    assert not list(sm.member_dir(tmp_path, "dev").glob(".self.md.*.tmp"))


async def test_secrets_and_personal_data_are_refused(tmp_path: Path) -> None:
    _write(tmp_path, START)
    for content in (
        "mail jane.doe@example.com first",
        "key sk-abcdefghijklmnop",
        "password = hunter22",
    ):
        res = await _patch(tmp_path, _ctx(tmp_path), section="Habits", op="append", content=content)
        assert (res["result"], res["reason"]) == ("REJECTED", "PRIVACY"), content
        assert content.split()[1] not in res["message"]  # the value is never echoed
    assert _self_md(tmp_path) == START


async def test_history_and_revert(tmp_path: Path) -> None:
    _write(tmp_path, START)
    cfg = SelfMdConfig()
    await _patch(tmp_path, _ctx(tmp_path), section="Habits", op="replace", content="New habit.")
    after_one = _self_md(tmp_path)
    await _patch(
        tmp_path, _ctx(tmp_path, n=1), section="Pitfalls", op="append", content="Flaky CI."
    )
    before_revert = _self_md(tmp_path)
    # #1's section is unchanged since: only that section is restored, #2 stays
    res = revert_self_md(tmp_path, "dev", 1, cfg)
    assert res.history_seq == 3
    text = _self_md(tmp_path)
    assert "Read before writing." in text and "New habit." not in text and "Flaky CI." in text
    entries = sm.SelfMdFile(tmp_path, "dev").history()
    assert [(e.seq, e.op, e.reverts_seq, e.by) for e in entries] == [
        (1, "replace", None, "dev"),
        (2, "append", None, "dev"),
        (3, "revert", 1, "human"),
    ]
    assert entries[2].prev_content == before_revert == after_one + "\n## Pitfalls\nFlaky CI.\n"
    # nothing changed since #3: the whole file goes back
    revert_self_md(tmp_path, "dev", 3, cfg)
    assert "New habit." in _self_md(tmp_path)
    # a section changed again since #4 cannot be reverted silently
    await _patch(tmp_path, _ctx(tmp_path, n=2), section="Habits", op="append", content="Later.")
    with pytest.raises(sm.SelfMdError, match=r"cannot revert #1: section 'Habits' changed since"):
        revert_self_md(tmp_path, "dev", 1, cfg)
    with pytest.raises(sm.SelfMdError, match="no change #99"):
        revert_self_md(tmp_path, "dev", 99, cfg)


async def test_delete_removes_a_section_and_refuses_a_missing_one(tmp_path: Path) -> None:
    _write(tmp_path, START + "\n## Old\nstale\n")
    res = await _patch(tmp_path, _ctx(tmp_path), section="old", op="delete")
    assert res["result"] == "APPLIED"
    assert _self_md(tmp_path) == START
    res = await _patch(tmp_path, _ctx(tmp_path, n=1), section="Old", op="delete")
    assert res["result"] == "ALREADY_APPLIED"  # the same delete, re-issued
    res = await _patch(tmp_path, _ctx(tmp_path, n=2), section="Never", op="delete")
    assert (res["result"], res["reason"]) == ("REJECTED", "NOT_FOUND")


# ---------------------------------------------------------------------- the document

_line = st.text(alphabet=st.sampled_from("ab #`~\t-"), max_size=12)
_doc = st.lists(
    st.one_of(_line, st.builds(lambda t: f"## {t}", st.text("abc ", min_size=1, max_size=6))),
    max_size=12,
).map(lambda lines: "\n".join(lines) + ("\n" if lines else ""))


@given(_doc)
def test_blocks_concatenate_to_the_file(text: str) -> None:
    blocks = doc.split_blocks(text)
    assert "".join(b.text for b in blocks) == text
    assert blocks[0].title is None
    assert [b.title for b in blocks[1:]] == [t for _, t in doc.headings(text)]


@given(_doc, st.sampled_from(["replace", "append"]), st.text("xyz \n", max_size=20))
@example("```\n", "replace", "")
@example("## `\n```\n", "replace", "")
def test_a_patch_leaves_every_other_section_as_it_was(text: str, op: str, content: str) -> None:
    title = "Target zone"
    new = doc.apply_op(text, title, op, content)  # type: ignore[arg-type]
    titles = [b.title for b in doc.split_blocks(text) if b.title]
    before = {b.title: b.text.rstrip("\n") for b in doc.split_blocks(text) if b.title}
    after = {b.title: b.text.rstrip("\n") for b in doc.split_blocks(new) if b.title}
    for t, body in before.items():
        if doc.normal_title(t) != doc.normal_title(title) and titles.count(t) == 1:
            # A section the file ended inside a code fence in gets the fence closed (so
            # the new section is not swallowed); nothing else changes.
            mark = doc.open_fence(body + "\n")
            assert after.get(t) == (body if mark is None else f"{body}\n{mark}")
    assert doc.find_section(doc.split_blocks(new), title) is not None


def test_an_unclosed_code_fence_never_swallows_the_sections_after_it() -> None:
    """Found by the property above: a file ending inside a fence hid a section appended
    after it, and a body with an open fence would hide every later section."""
    appended = doc.apply_op("```\n", "Target zone", "replace", "")
    assert doc.section_text(appended, "Target zone") == "## Target zone\n"
    text = "## A\nalpha\n\n## B\nbeta\n"
    patched = doc.apply_op(text, "A", "replace", "```python\nprint(1)")
    assert [title for _, title in doc.headings(patched)] == ["A", "B"]
    assert doc.section_text(patched, "B") == "## B\nbeta\n"
