"""FBR (`!?@self`) through the runtime: fan-out, delivery, sessions, disabling, violations."""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.fbr import FBR_SYSTEM_PROMPT, NO_TOOLS_NOTICE, VIOLATION_CODE
from mindloop.dialogs.formats import FBR_RESPONSE_HEADER
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.providers.base import GenerationRequest
from tests.scenario_util import write_script, write_team

BODY = "!?@self\n!?You are doing tool-less FBR. Use only this text.\n!?Goal: root cause of the freeze.\n"


async def _run(rtws: Path, text: str = "go") -> tuple[DialogRuntime, str]:
    rt = DialogRuntime(rtws)
    rec = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(rec.id, text)
    await Scheduler(rt).run()
    return rt, rec.id


def _fbr_sides(rt: DialogRuntime, root: str) -> list:  # type: ignore[type-arg]
    return [d for d in rt.store.list_dialogs(root_id=root) if d.kind == "fbr"]


async def test_default_effort_fans_out_three_and_delivers_all_in_completion_order(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"]}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"member": "dev", "contains": "FBR @self sideline response", "response": "synthesised"},
            {"contains": "Goal: root cause", "response": "fast answer"},
        ],
    )
    rt, root = await _run(rtws)
    sides = _fbr_sides(rt, root)
    assert len(sides) == 3 and all(d.member == "dev" and d.parent_id == root for d in sides)
    results = [m for m in rt.store.load_history(root) if m.kind == "tellask_result"]
    assert len(results) == 3
    assert all(r.data["text"].startswith(FBR_RESPONSE_HEADER + "\nfast answer") for r in results)
    assert rt.store.load_history(root)[-1].data["text"] == "synthesised"
    # The caller generated exactly twice: once to ask, once after all three answered.
    assert len(rt.store.generations(root)) == 2
    await rt.aclose()


async def test_fbr_effort_zero_fails_visibly_and_creates_nothing(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 0}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"member": "dev", "contains": "ERR_FBR_DISABLED", "response": "will reason myself"},
        ],
    )
    rt, root = await _run(rtws)
    assert _fbr_sides(rt, root) == [] and rt.store.all_pending() == []
    note = next(m for m in rt.store.load_history(root) if m.kind == "tellask_result")
    assert (
        "disabled by your team configuration" in note.data["text"]
        and "fbr-effort" in note.data["text"]
    )
    assert rt.store.load_history(root)[-1].data["text"] == "will reason myself"
    await rt.aclose()


async def test_session_fbr_uses_derived_keys_per_sample(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"]}, "solo": {"toolsets": ["*"], "fbr-effort": 1}})
    write_script(
        rtws,
        [
            {"match": "go", "response": "!?@self !tellaskSession s\n!?think about it\n"},
            {"contains": "think about it", "response": "thought"},
            {"contains": "FBR @self sideline response", "response": "ok"},
        ],
    )
    rt, root = await _run(rtws)
    assert sorted(rt.store.sessions(root)) == ["dev!s.fbr1", "dev!s.fbr2", "dev!s.fbr3"]
    rec = rt.create_root_dialog("tasks/example.tsk", "solo")
    rt.post_user_message(rec.id, "go")
    await Scheduler(rt).run()
    assert list(rt.store.sessions(rec.id)) == ["solo!s"]
    await rt.aclose()


async def test_function_call_in_fbr_is_a_loud_violation(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 1}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {
                "contains": "Goal: root cause",
                "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
            },
            {"member": "dev", "contains": VIOLATION_CODE, "response": "noted the violation"},
        ],
    )
    rt, root = await _run(rtws)
    side = _fbr_sides(rt, root)[0]
    hist = rt.store.load_history(side.id)
    assert [m.kind for m in hist] == ["user", "assistant"]  # no tool_call, no tool_result ran
    assert hist[1].data["text"].startswith(VIOLATION_CODE)
    reply = next(m for m in rt.store.load_history(root) if m.kind == "tellask_result")
    assert VIOLATION_CODE in reply.data["text"]
    codes = [e["data"].get("code") for e in rt.store.events(side.id) if e["type"] == "error"]
    assert VIOLATION_CODE in codes
    await rt.aclose()


async def test_tellask_to_teammate_in_fbr_is_a_violation_but_tellasker_is_allowed(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 1}, "bob": {}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {
                "member": "dev",
                "match": "second",
                "response": "!?@self\n!?second round: what is 2+2?\n",
            },
            {"contains": "Goal: root cause", "response": "!?@bob help me\n"},
            {"contains": "second round", "response": "!?@tellasker is this base 10?\n"},
            {"contains": "answered your TellaskBack", "response": "4"},
            {"member": "dev", "contains": "TellaskBack", "response": "yes, base 10"},
            {"member": "dev", "contains": "FBR @self sideline response", "response": "done"},
        ],
    )
    rt, root = await _run(rtws)
    assert [d.member for d in rt.store.list_dialogs(root_id=root) if d.kind == "side"] == []
    first = next(m for m in rt.store.load_history(root) if m.kind == "tellask_result")
    assert VIOLATION_CODE in first.data["text"] and "@bob" in first.data["text"]
    rt.post_user_message(root, "second")
    await Scheduler(rt).run()
    replies = [m.data["text"] for m in rt.store.load_history(root) if m.kind == "tellask_result"]
    assert replies[-1] == FBR_RESPONSE_HEADER + "\n4"
    await rt.aclose()


async def test_fbr_request_is_tool_less_with_merged_params(rtws: Path) -> None:
    write_team(
        rtws,
        {
            "dev": {
                "toolsets": ["*"],
                "fbr-effort": 1,
                "model_params": {"max_tokens": 100, "openai": {"temperature": 0.1}},
                "fbr_model_params": {"openai": {"temperature": 0.9}},
            }
        },
    )
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"contains": "Goal: root cause", "response": "answer"},
            {"member": "dev", "contains": "FBR @self sideline response", "response": "done"},
        ],
    )
    seen: list[GenerationRequest] = []
    rt = DialogRuntime(rtws)
    real_stream = rt.providers.stream

    def spy(name: str, req: GenerationRequest):  # type: ignore[no-untyped-def]
        seen.append(req)
        return real_stream(name, req)

    rt.providers.stream = spy  # type: ignore[method-assign]
    rec = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(rec.id, "go")
    await Scheduler(rt).run()
    normal, fbr_req = seen[0], seen[1]
    assert normal.tools and normal.params["openai"]["temperature"] == 0.1
    assert fbr_req.tools == [] and fbr_req.system == FBR_SYSTEM_PROMPT
    assert fbr_req.messages[0].text == NO_TOOLS_NOTICE  # type: ignore[union-attr]
    assert sum(1 for m in fbr_req.messages if getattr(m, "text", "") == NO_TOOLS_NOTICE) == 1
    assert fbr_req.params["openai"]["temperature"] == 0.9 and fbr_req.params["max_tokens"] == 100
    assert seen[2].params["openai"]["temperature"] == 0.1  # normal generations unaffected
    await rt.aclose()


async def test_a_failing_fbr_sample_is_reported_and_the_others_delivered(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 3}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {
                "member": "dev",
                "contains": "FBR @self sideline response",
                "response": "two of three",
            },
            # The first FBR request fails for good (not retriable); the next two answer.
            {
                "contains": "Goal: root cause",
                "error": {"status": 400, "message": "bad sample", "times": 1},
            },
            {"contains": "Goal: root cause", "response": "good sample"},
        ],
    )
    rt, root = await _run(rtws)
    replies = [m.data for m in rt.store.load_history(root) if m.kind == "tellask_result"]
    assert sorted(r["status"] for r in replies) == ["completed", "completed", "failed"]
    failed = next(r for r in replies if r["status"] == "failed")
    assert "failed and will not answer" in failed["text"] and "bad sample" in failed["text"]
    assert rt.store.load_history(root)[-1].data["text"] == "two of three"
    assert rt.store.all_pending() == []
    await rt.aclose()
