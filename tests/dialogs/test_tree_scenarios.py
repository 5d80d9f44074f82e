"""Whole-tree scenarios on the scripted mock provider, through the public runtime API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


async def test_13_tellasker_with_a_session_directive_fails_inside_a_side_dialog(
    rtws: Path,
) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@pangu investigate\n"},
            {
                "member": "pangu",
                "contains": "investigate",
                "response": "!?@tellasker !tellaskSession s1 what exactly?\n",
            },
            {"member": "pangu", "contains": "ERR_TELLASKER_SESSION", "response": "found it"},
            {"member": "dev", "contains": "found it", "response": "thanks"},
        ],
    )
    rt, root = await _run(rtws, "go")
    side = next(d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side")
    [note] = [m.data for m in rt.store.load_history(side.id) if m.kind == "tellask_result"]
    assert note["code"] == "ERR_TELLASKER_SESSION" and note["status"] == "failed"
    assert "does not accept `!tellaskSession`" in note["text"]
    assert rt.store.sessions(root) == {}  # nothing registered, nothing asked back
    assert len(rt.store.list_dialogs(root_id=root)) == 2
    assert not any("TellaskBack" in m.data.get("text", "") for m in rt.store.load_history(root))
    assert rt.store.load_history(root)[-1].data["text"] == "thanks"
    await rt.aclose()


async def test_19_a_session_called_again_from_another_caller_replies_to_that_caller(
    rtws: Path,
) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@pangu !tellaskSession s\n!?first\n"},
            {"member": "pangu", "contains": "first", "response": "pangu: first done"},
            {"member": "dev", "contains": "first done", "response": "!?@bob take over\n"},
            {
                "member": "bob",
                "contains": "take over",
                "response": "!?@pangu !tellaskSession s\n!?second\n",
            },
            {"member": "pangu", "contains": "second", "response": "pangu: second done"},
            {"member": "bob", "contains": "second done", "response": "bob: all done"},
            {"member": "dev", "contains": "bob: all done", "response": "finished"},
        ],
    )
    rt, root = await _run(rtws, "go")
    sides = {d.member: d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side"}
    assert sorted(sides) == ["bob", "pangu"]  # one pangu dialog: the session was resumed
    assert rt.store.sessions(root) == {"pangu!s": sides["pangu"].id}
    root_texts = [m.data.get("text", "") for m in rt.store.load_history(root)]
    bob_texts = [m.data.get("text", "") for m in rt.store.load_history(sides["bob"].id)]
    assert sum("pangu: first done" in t for t in root_texts) == 1
    assert not any("pangu: second done" in t for t in root_texts)  # went to the latest caller
    assert sum("pangu: second done" in t for t in bob_texts) == 1
    assert root_texts[-1] == "finished"
    assert rt.store.all_pending() == []
    await rt.aclose()


async def test_21_22_a_question_stops_generation_and_the_loop_never_drives_its_dialog(
    rtws: Path,
) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {
                "member": "dev",
                "match": "go",
                "response": "!?@human Need a decision\n!?Pick A or B\n",
            },
            {"member": "dev", "contains": "answer from the human", "response": "B then"},
        ],
    )
    rt = DialogRuntime(rtws)
    asked: list[dict[str, object]] = []
    rt.bus.subscribe(lambda ev: asked.append(ev.payload()) if ev.type == "question_asked" else None)
    rec = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(rec.id, "go")
    await Scheduler(rt).run()
    [q] = rt.store.open_questions()
    assert asked == [
        {"question_id": q.id, "headline": "@human Need a decision", "body": "Pick A or B"}
    ]
    assert len(rt.store.generations(rec.id)) == 1  # generation stopped at the question
    # A user message marks the dialog to be driven, but the loop leaves it alone.
    rt.post_user_message(rec.id, "are you there?")
    results = await Scheduler(rt).run()
    assert [r.reason for r in results if r.dialog_id == rec.id] in ([], ["waiting"])
    assert len(rt.store.generations(rec.id)) == 1
    assert rt.store.get_dialog(rec.id).status == "waiting"
    rt.answer_question(q.id, "B")
    await Scheduler(rt).run()
    assert rt.store.load_history(rec.id)[-1].data["text"] == "B then"
    assert len(rt.store.generations(rec.id)) == 2
    await rt.aclose()


async def test_25_clear_mind_discards_open_questions_keeps_reminders_and_sessions(
    rtws: Path,
) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {
                "member": "dev",
                "match": "go",
                "response": "!?@pangu !tellaskSession s\n!?warm up\n",
                "tool_calls": [{"name": "add_reminder", "arguments": {"content": "stay brief"}}],
            },
            {"member": "pangu", "contains": "warm up", "response": "warmed"},
            {
                "member": "dev",
                "contains": "warmed",
                "response": "!?@human Should I start over?\n",
                "tool_calls": [
                    {"name": "clear_mind", "arguments": {"reminder_content": "at step 2"}}
                ],
            },
            {
                "member": "dev",
                "contains": "course #2",
                "context_contains": ["stay brief", "at step 2"],
                "response": "fresh start",
            },
        ],
    )
    rt, root = await _run(rtws, "go")
    rec = rt.store.get_dialog(root)
    assert rec.course == 2 and rec.status == "idle"
    assert rt.store.open_questions() == []  # the question asked in course 1 was discarded
    assert [r.content for r in rt.store.reminders(root)] == ["stay brief", "at step 2"]
    assert list(rt.store.sessions(root)) == ["pangu!s"]
    course2 = rt.store.load_history(root, course=2)
    assert "course #2" in course2[0].data["text"] and course2[-1].data["text"] == "fresh start"
    await rt.aclose()


async def test_side_dialog_runs_with_the_targets_persona_tools_and_model(rtws: Path) -> None:
    llm = rtws / ".minds" / "llm.yaml"
    llm.write_text(
        llm.read_text().replace(
            "mock-model:\n        context_length: 128000",
            "mock-model:\n        context_length: 128000\n      mock-b:\n        context_length: 64000",
        ),
        "utf-8",
    )
    write_team(rtws, {"dev": {"toolsets": ["*"]}, "pangu": {"toolsets": ["fs"], "model": "mock-b"}})
    persona = rtws / ".minds" / "team" / "pangu" / "persona.md"
    persona.parent.mkdir(parents=True, exist_ok=True)
    persona.write_text("You are Pangu, keeper of the old tests.\n", "utf-8")
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@pangu run the tests\n"},
            {"member": "dev", "contains": "from mock-b", "response": "ok"},
        ],
    )
    write_script(
        rtws,
        [
            {
                "member": "pangu",
                "contains": "run the tests",
                "context_contains": "keeper of the old tests",
                "tool_calls": [{"name": "run_shell", "arguments": {"command": "true"}}],
            },
            {"member": "pangu", "role": "tool", "response": "from mock-b"},
        ],
        model="mock-b",
    )
    rt, root = await _run(rtws, "go")
    side = next(d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side")
    [gen, *_] = rt.store.generations(side.id)
    assert gen.model == "mock-b"
    [result] = [m.data for m in rt.store.load_history(side.id) if m.kind == "tool_result"]
    assert result["is_error"] and "run_shell" in result["content"]  # not among pangu's tools
    assert rt.store.load_history(root)[-1].data["text"] == "ok"
    await rt.aclose()


async def test_the_tellasks_of_one_message_run_concurrently(rtws: Path) -> None:
    import time

    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@pangu one\n\n!?@bob two\n"},
            {"member": "pangu", "contains": "one", "response": "p", "delay_ms": 300},
            {"member": "bob", "contains": "two", "response": "b", "delay_ms": 300},
            {"member": "dev", "contains": "provided response", "response": "both"},
        ],
    )
    rt = DialogRuntime(rtws)
    provider = rt.providers.get("mock")
    real = provider.stream
    spans: dict[str, tuple[float, float]] = {}

    def timed(req: Any) -> Any:
        async def run() -> Any:
            start = time.monotonic()
            async for ev in real(req):
                yield ev
            if req.member != "dev":
                spans[req.member] = (start, time.monotonic())

        return run()

    provider.stream = timed  # type: ignore[method-assign]
    rec = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(rec.id, "go")
    await Scheduler(rt).run()
    assert sorted(spans) == ["bob", "pangu"]
    (s1, e1), (s2, e2) = spans.values()
    assert max(s1, s2) < min(e1, e2)  # both side dialogs were generating at the same time
    assert rt.store.load_history(rec.id)[-1].data["text"] == "both"
    await rt.aclose()
