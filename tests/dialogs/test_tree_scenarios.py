"""Whole-tree scenarios on the scripted mock provider, through the public runtime API."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.dialogs import formats
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.errors import NotFoundError
from tests.scenario_util import write_script, write_team

TEAM = {"dev": {"toolsets": ["*"]}, "pangu": {"toolsets": ["fs"]}, "bob": {"toolsets": ["fs"]}}


async def _run(rtws: Path, text: str, member: str = "dev") -> tuple[DialogRuntime, str]:
    rt = DialogRuntime(rtws)
    rec = rt.create_root_dialog("tasks/example.tsk", member)
    rt.post_user_message(rec.id, text)
    await Scheduler(rt).run()
    return rt, rec.id


def _kinds(rt: DialogRuntime, did: str) -> list[str]:
    return [m.kind for m in rt.store.load_history(did)]


async def test_reply_revives_caller_with_the_formatted_response(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {
                "member": "dev",
                "match": "go",
                "response": "!?@pangu Please compute 1+1.\n!?Return only the number.\n",
            },
            {"member": "pangu", "contains": "Please compute 1+1", "response": "2"},
            {"member": "dev", "contains": "provided response", "response": "The answer is 2."},
        ],
    )
    rt, root = await _run(rtws, "go")
    hist = rt.store.load_history(root)
    expected = formats.response_message(
        requester="dev", responder="pangu", response="2", headline="@pangu Please compute 1+1.\n"
    )
    assert [m.kind for m in hist] == ["user", "assistant", "tellask_result", "assistant"]
    assert hist[2].data["text"] == expected
    assert hist[3].data["text"] == "The answer is 2."
    sides = [d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side"]
    assert len(sides) == 1 and sides[0].member == "pangu" and sides[0].parent_id == root
    first = rt.store.load_history(sides[0].id)[0].data["text"]
    assert first.startswith("Hi @pangu, this is @dev speaking, now:")
    assert rt.store.undelivered_responses(root) == [] and rt.store.pending_for(root) == []
    await rt.aclose()


async def test_caller_waits_for_all_replies_and_sees_them_in_one_turn(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@pangu one\n\n!?@bob two\n"},
            {"member": "pangu", "contains": "one", "response": "from pangu"},
            {"member": "bob", "contains": "two", "response": "from bob", "delay_ms": 30},
            {"member": "dev", "contains": "provided response", "response": "both in"},
        ],
    )
    rt, root = await _run(rtws, "go")
    hist = rt.store.load_history(root)
    # Exactly one generation after the replies: the first reply did not revive the caller.
    assert _kinds(rt, root) == [
        "user",
        "assistant",
        "tellask_result",
        "tellask_result",
        "assistant",
    ]
    assert "from pangu" in hist[2].data["text"] and "from bob" in hist[3].data["text"]
    assert len(rt.store.generations(root)) == 2
    await rt.aclose()


async def test_collective_tellask_fans_out_and_unknown_member_fails_all(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@pangu @bob review this\n"},
            {"member": "dev", "match": "bad", "response": "!?@pangu @zed review this\n"},
            {"contains": "collective assignment", "response": "ok"},
            {"member": "dev", "contains": "provided response", "response": "done"},
            {
                "member": "dev",
                "contains": "ERR_INVALID_MULTI_TEAMMATE_TARGETS",
                "response": "noted",
            },
        ],
    )
    rt, root = await _run(rtws, "go")
    sides = [d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side"]
    assert sorted(d.member for d in sides) == ["bob", "pangu"]
    assert all(d.assignment and d.assignment["collective"] == ["pangu", "bob"] for d in sides)
    await rt.aclose()
    rt, root2 = await _run(rtws, "bad")
    assert [d.kind for d in rt.store.list_dialogs(root_id=root2)] == ["root"]
    assert rt.store.load_history(root2)[2].data["code"] == "ERR_INVALID_MULTI_TEAMMATE_TARGETS"
    await rt.aclose()


async def test_unknown_target_and_tellasker_from_root_create_nothing(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@nobody hi\n\n!?@tellasker what?\n"},
            {"member": "dev", "contains": "tellask failed", "response": "understood"},
        ],
    )
    rt, root = await _run(rtws, "go")
    assert [d.id for d in rt.store.list_dialogs()] == [root]
    notes = [m.data for m in rt.store.load_history(root) if m.kind == "tellask_result"]
    assert [n["code"] for n in notes] == ["ERR_UNKNOWN_TELLASK_TARGET", "ERR_TELLASKER_FROM_ROOT"]
    assert "reserved for teammate tellasks" in notes[0]["text"]
    assert "only valid inside a side dialog" in notes[1]["text"]
    assert rt.store.load_history(root)[-1].data["text"] == "understood"
    await rt.aclose()


async def test_fenced_tellask_is_markdown(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws, [{"member": "dev", "match": "go", "response": "Example:\n```\n!?@pangu x\n```\n"}]
    )
    rt, root = await _run(rtws, "go")
    assert [d.id for d in rt.store.list_dialogs()] == [root]
    assert _kinds(rt, root) == ["user", "assistant"]
    await rt.aclose()


async def test_session_tellask_dedupes_and_resumes(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {
                "member": "dev",
                "match": "go",
                "response": "!?@pangu !tellaskSession dupe-session\n!?first\n\n"
                "!?@pangu !tellaskSession dupe-session\n!?second\n",
            },
            {"member": "pangu", "contains": "second", "response": "handled both"},
            {"member": "dev", "contains": "provided response", "response": "ok"},
            {
                "member": "dev",
                "match": "again",
                "response": "!?@pangu !tellaskSession dupe-session\n!?third\n",
            },
            {"member": "pangu", "contains": "third", "response": "third done"},
        ],
    )
    rt, root = await _run(rtws, "go")
    sides = [d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side"]
    assert len(sides) == 1
    assert rt.store.sessions(root) == {"pangu!dupe-session": sides[0].id}
    rt.post_user_message(root, "again")
    await Scheduler(rt).run()
    assert len([d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side"]) == 1
    side_hist = [m.data.get("text", "") for m in rt.store.load_history(sides[0].id)]
    assert any("third" in t for t in side_hist) and any("first" in t for t in side_hist)
    await rt.aclose()


async def test_tellask_back_asks_the_direct_caller(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@pangu do the thing\n"},
            {
                "member": "pangu",
                "contains": "do the thing",
                "response": "!?@tellasker which thing?\n",
            },
            {"member": "dev", "contains": "TellaskBack", "response": "the blue one"},
            {
                "member": "pangu",
                "contains": "answered your TellaskBack",
                "response": "blue thing done",
            },
            {"member": "dev", "contains": "blue thing done", "response": "great"},
        ],
    )
    rt, root = await _run(rtws, "go")
    hist = rt.store.load_history(root)
    assert hist[-1].data["text"] == "great"
    assert "blue thing done" in hist[-2].data["text"]
    side = next(d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side")
    assert any("the blue one" in m.data.get("text", "") for m in rt.store.load_history(side.id))
    assert rt.store.all_pending() == []
    await rt.aclose()


async def test_q4h_suspends_and_answer_drives_on(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {
                "member": "dev",
                "match": "go",
                "response": "!?@human Need a decision\n!?Pick A or B\n",
            },
            {
                "member": "dev",
                "role": "user",
                "contains": "answer from the human",
                "response": "Going with B.",
            },
        ],
    )
    rt, root = await _run(rtws, "go")
    qs = rt.store.open_questions()
    assert len(qs) == 1 and qs[0].id.startswith("q4h-")
    assert (qs[0].headline, qs[0].body, qs[0].course) == (
        "@human Need a decision",
        "Pick A or B",
        1,
    )
    assert rt.store.get_dialog(root).status == "waiting"
    assert not rt.tree.can_drive(root)
    with pytest.raises(NotFoundError):
        rt.answer_question("q4h-nope", "B")
    assert len(rt.store.generations(root)) == 1
    rt.answer_question(qs[0].id, "B")
    await Scheduler(rt).run()
    assert rt.store.open_questions() == []
    assert rt.store.load_history(root)[-1].data["text"] == "Going with B."
    await rt.aclose()


async def test_two_human_questions_in_one_message_both_fail(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@human A?\n\n!?@human B?\n"},
            {"member": "dev", "contains": "ERR_MULTIPLE_HUMAN_QUESTIONS", "response": "merged"},
        ],
    )
    rt, root = await _run(rtws, "go")
    assert rt.store.open_questions() == [] and rt.store.all_pending() == []
    codes = [m.data["code"] for m in rt.store.load_history(root) if m.kind == "tellask_result"]
    assert codes == ["ERR_MULTIPLE_HUMAN_QUESTIONS"] * 2
    await rt.aclose()


async def test_side_dialog_waiting_on_human_sends_no_reply(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@pangu investigate\n"},
            {
                "member": "pangu",
                "contains": "investigate",
                "response": "Checking.\n!?@human May I?\n",
            },
            {"member": "pangu", "contains": "answer from the human", "response": "finished"},
            {"member": "dev", "contains": "finished", "response": "thanks"},
        ],
    )
    rt, root = await _run(rtws, "go")
    assert rt.store.undelivered_responses(root) == [] and len(rt.store.pending_for(root)) == 1
    assert _kinds(rt, root) == ["user", "assistant"]
    q = rt.store.open_questions()[0]
    rt.answer_question(q.id, "yes")
    await Scheduler(rt).run()
    assert rt.store.load_history(root)[-1].data["text"] == "thanks"
    await rt.aclose()


async def test_self_call_opens_normal_side_dialog_with_note(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@dev check again\n"},
            {"member": "dev", "contains": "check again", "role": "user", "response": "checked"},
            {"member": "dev", "contains": "provided response", "response": "ok"},
        ],
    )
    rt, root = await _run(rtws, "go")
    side = next(d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side")
    assert side.member == "dev"
    assert any(
        m.kind == "note" and "!?@self" in m.data["text"] for m in rt.store.load_history(root)
    )
    await rt.aclose()


async def test_reminders_and_clear_mind(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {
                "member": "dev",
                "match": "go",
                "tool_calls": [{"name": "add_reminder", "arguments": {"content": "keep it short"}}],
            },
            {
                "member": "dev",
                "role": "tool",
                "contains": "added reminder",
                "response": "!?@human which?\n",
            },
            {
                "member": "dev",
                "match": "reset",
                "tool_calls": [
                    {"name": "clear_mind", "arguments": {"reminder_content": "resume at step 2"}}
                ],
            },
            {
                "member": "dev",
                "contains": "course #2",
                "context_contains": ["keep it short", "resume at step 2"],
                "response": "continuing",
            },
        ],
    )
    rt, root = await _run(rtws, "go")
    assert len(rt.store.open_questions()) == 1
    rt.store.close_question(rt.store.open_questions()[0].id, answer=None, status="discarded")
    rt.post_user_message(root, "reset")
    await Scheduler(rt).run()
    rec = rt.store.get_dialog(root)
    assert rec.course == 2
    assert [r.content for r in rt.store.reminders(root)] == ["keep it short", "resume at step 2"]
    course2 = rt.store.load_history(root, course=2)
    assert "course #2" in course2[0].data["text"] and course2[-1].data["text"] == "continuing"
    await rt.aclose()
