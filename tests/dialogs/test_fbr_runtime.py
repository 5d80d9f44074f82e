"""FBR (`!?@self`) through the runtime: fan-out, delivery, sessions, disabling, violations."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from mindloop.dialogs import fbr
from mindloop.dialogs.fbr import (
    FBR_REQUEST_HEADERS,
    FBR_SYSTEM_PROMPT,
    FBR_SYSTEM_PROMPTS,
    NO_TOOLS_NOTICE,
    NO_TOOLS_NOTICES,
    POLICY_CODE,
    VIOLATION_CODE,
)
from mindloop.dialogs.formats import FBR_RESPONSE_HEADER
from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.i18n import Lang
from mindloop.providers.base import Finish, GenerationRequest, StreamEvent, TextDelta
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
    assert sorted(rt.store.sessions(root)) == [
        "dev!@self:s.fbr1",
        "dev!@self:s.fbr2",
        "dev!@self:s.fbr3",
    ]
    rec = rt.create_root_dialog("tasks/example.tsk", "solo")
    rt.post_user_message(rec.id, "go")
    await Scheduler(rt).run()
    assert list(rt.store.sessions(rec.id)) == ["solo!@self:s"]
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

    rt.providers.stream = spy  # type: ignore[method-assign,assignment]
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


def _set_work_language(rtws: Path, lang: str) -> None:
    """`work_language` is a top-level team.yaml key (`write_team`'s extra keywords go to
    `member_defaults`, where it is not allowed)."""
    path = rtws / ".minds" / "team.yaml"
    team = yaml.safe_load(path.read_text("utf-8"))
    team["work_language"] = lang
    path.write_text(yaml.safe_dump(team, sort_keys=False, allow_unicode=True), "utf-8")


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_fbr_request_speaks_the_team_work_language_and_passes_the_gate(
    rtws: Path, lang: Lang
) -> None:
    """team.yaml `work_language` picks the FBR system prompt, the no-tools notice and the
    request header; the gate checks against that language, so the sample is sent and
    answers. English (the default) is unchanged."""
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 1}})
    if lang == "zh":
        _set_work_language(rtws, "zh")
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"contains": "Goal: root cause", "response": "answer"},
            {"member": "dev", "contains": "FBR @self sideline response", "response": "done"},
        ],
    )
    rt = DialogRuntime(rtws)
    assert rt.lang == lang
    seen: list[GenerationRequest] = []
    real_stream = rt.providers.stream

    def spy(name: str, req: GenerationRequest):  # type: ignore[no-untyped-def]
        seen.append(req)
        return real_stream(name, req)

    rt.providers.stream = spy  # type: ignore[method-assign,assignment]
    root = rt.create_root_dialog("tasks/example.tsk", "dev").id
    rt.post_user_message(root, "go")
    await Scheduler(rt).run()
    [fbr_req] = [r for r in seen if not r.tools]
    other: Lang = "en" if lang == "zh" else "zh"
    assert fbr_req.system == FBR_SYSTEM_PROMPTS[lang]
    texts = [getattr(m, "text", "") for m in fbr_req.messages]
    assert texts[0] == NO_TOOLS_NOTICES[lang] and texts.count(NO_TOOLS_NOTICES[lang]) == 1
    assert NO_TOOLS_NOTICES[other] not in texts
    assert texts[-1].startswith(FBR_REQUEST_HEADERS[lang]) and "Goal: root cause" in texts[-1]
    [side] = _fbr_sides(rt, root)
    assert rt.store.load_history(side.id)[0].data["text"].startswith(FBR_REQUEST_HEADERS[lang])
    # The gate let it through: no policy error, and the sample's answer was delivered.
    assert all(e["type"] != "error" for e in rt.store.events(side.id))
    [result] = _results(rt, root)
    assert result.data["text"] == FBR_RESPONSE_HEADER + "\nanswer"
    assert rt.store.load_history(root)[-1].data["text"] == "done"
    await rt.aclose()


async def test_zh_fbr_violation_keeps_the_code_and_explains_in_chinese(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 1}})
    _set_work_language(rtws, "zh")
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"contains": "Goal: root cause", "response": "!?@human 这是 UI 的 bug 吗？\n"},
            {"member": "dev", "contains": VIOLATION_CODE, "response": "noted"},
        ],
    )
    rt, root = await _run(rtws)
    [reply] = _results(rt, root)
    text = reply.data["text"]
    assert text.startswith(FBR_RESPONSE_HEADER + "\n" + VIOLATION_CODE + "\n")
    assert "无工具的 @self 扪心自问（FBR）支线对话" in text and "向 @human 发起了诉请" in text
    assert rt.store.all_pending() == [] and rt.store.open_questions() == []
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


# ---------------------------------------------------------------- helpers for the tests below


def _is_fbr(req: GenerationRequest) -> bool:
    return req.system == FBR_SYSTEM_PROMPT


class _Samples:
    """Spies on every request; answers FBR requests itself with `answer-<n>` (n counts
    FBR generations), so each sample's text is distinct; other requests go to the mock."""

    def __init__(self, rt: DialogRuntime) -> None:
        self.seen: list[GenerationRequest] = []
        self.answered = 0
        real = rt.providers.stream

        def stream(name: str, req: GenerationRequest) -> AsyncIterator[StreamEvent]:
            self.seen.append(req)
            return self._answer() if _is_fbr(req) else real(name, req)

        rt.providers.stream = stream  # type: ignore[method-assign,assignment]

    async def _answer(self) -> AsyncIterator[StreamEvent]:
        self.answered += 1
        yield TextDelta(text=f"answer-{self.answered}")
        yield Finish()

    def fbr(self) -> list[GenerationRequest]:
        return [r for r in self.seen if _is_fbr(r)]


def _texts(req: GenerationRequest) -> list[str]:
    return [getattr(m, "text", "") for m in req.messages]


def _results(rt: DialogRuntime, dialog_id: str) -> list:  # type: ignore[type-arg]
    return [m for m in rt.store.load_history(dialog_id) if m.kind == "tellask_result"]


# ---------------------------------------------------------------- trigger and sessions


async def test_own_id_session_and_self_session_never_resume_each_other(rtws: Path) -> None:
    """`!?@dev !tellaskSession s` from dev is a normal side dialog with tools; the FBR
    `!?@self !tellaskSession s` (effort 1, so session `s`) must not resume it — nor the
    other way round — or an FBR request would go out with tools."""
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 1}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "one", "response": "!?@self !tellaskSession s\n!?why?\n"},
            {"member": "dev", "match": "two", "response": "!?@dev !tellaskSession s\n!?work\n"},
            {"member": "dev", "match": "three", "response": "!?@self !tellaskSession s\n!?more?\n"},
            {"member": "dev", "contains": "Hi @dev, this is @dev", "response": "worked"},
            {"member": "dev", "contains": "provided response", "response": "ok"},
            {"member": "dev", "contains": "FBR @self sideline response", "response": "ok"},
        ],
    )
    rt = DialogRuntime(rtws)
    spy = _Samples(rt)
    root = rt.create_root_dialog("tasks/example.tsk", "dev").id
    for text in ("one", "two", "three"):
        rt.post_user_message(root, text)
        await Scheduler(rt).run()
    sides = {d.kind: d for d in rt.store.list_dialogs(root_id=root) if d.kind != "root"}
    assert len(rt.store.list_dialogs(root_id=root)) == 3  # root, one FBR, one normal side
    assert rt.store.sessions(root) == {"dev!@self:s": sides["fbr"].id, "dev!s": sides["side"].id}
    # The FBR session was resumed with its own history: both requests, both answers.
    last_fbr = spy.fbr()[-1]
    assert spy.answered == 2 and "answer-1" in _texts(last_fbr)
    assert "work" not in "".join(_texts(last_fbr))
    for req in spy.seen:
        assert (req.tools == []) == _is_fbr(req)
    await rt.aclose()


async def test_resumed_fbr_samples_keep_their_own_histories_apart(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 2}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@self !tellaskSession ui\n!?round 1\n"},
            {
                "member": "dev",
                "match": "again",
                "response": "!?@self !tellaskSession ui\n!?round 2\n",
            },
            {"member": "dev", "contains": "FBR @self sideline response", "response": "noted"},
        ],
    )
    rt = DialogRuntime(rtws)
    spy = _Samples(rt)
    root = rt.create_root_dialog("tasks/example.tsk", "dev").id
    rt.post_user_message(root, "go")
    await Scheduler(rt).run()
    first = {d.id for d in rt.store.list_dialogs(root_id=root) if d.kind == "fbr"}
    rt.post_user_message(root, "again")
    await Scheduler(rt).run()
    assert {d.id for d in rt.store.list_dialogs(root_id=root) if d.kind == "fbr"} == first
    assert set(rt.store.sessions(root)) == {"dev!@self:ui.fbr1", "dev!@self:ui.fbr2"}
    round2 = [r for r in spy.fbr() if "round 2" in _texts(r)[-1]]
    assert len(round2) == 2
    own = [{t for t in _texts(r) if t.startswith("answer-")} for r in round2]
    # Each sample sees exactly its own first answer, never the other sample's.
    assert sorted(len(o) for o in own) == [1, 1] and own[0] != own[1]
    for req in round2:
        assert sum("round 1" in t for t in _texts(req)) == 1
        assert _texts(req)[0] == NO_TOOLS_NOTICE and req.tools == []
    assert len(_results(rt, root)) == 4
    await rt.aclose()


# ---------------------------------------------------------------- fan-out and delivery


async def test_caller_waits_for_every_sample_and_reads_them_in_completion_order(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"]}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"member": "dev", "contains": "FBR @self sideline response", "response": "merged"},
        ],
    )
    rt = DialogRuntime(rtws)
    _Samples(rt)
    root = rt.create_root_dialog("tasks/example.tsk", "dev").id
    rt.post_user_message(root, "go")
    assert (await rt.drive(root)).reason == "waiting"
    pending = rt.store.pending_for(root)
    assert [p.call_type for p in pending] == ["fbr"] * 3
    sides = [p.side_id for p in pending]
    assert {d.id for d in _fbr_sides(rt, root)} == set(sides)
    order = [sides[2], sides[0], sides[1]]  # finish in an order unlike creation
    for n, side in enumerate(order, 1):
        assert not rt.tree.can_drive(root) and not rt.store.get_dialog(root).needs_drive
        assert (await rt.drive(side)).final_text == f"answer-{n}"
        assert _results(rt, root) == []  # nothing reaches the caller before it revives
    assert rt.store.get_dialog(root).needs_drive and rt.tree.can_drive(root)
    assert (await rt.drive(root)).final_text == "merged"
    results = _results(rt, root)
    assert [r.data["side_id"] for r in results] == order
    assert [r.data["text"] for r in results] == [
        f"{FBR_RESPONSE_HEADER}\nanswer-{n}" for n in (1, 2, 3)
    ]
    assert len(rt.store.generations(root)) == 2
    await rt.aclose()


def _set_mock_concurrency(rtws: Path, n: int) -> None:
    path = rtws / ".minds" / "llm.yaml"
    llm = yaml.safe_load(path.read_text("utf-8"))
    llm["providers"]["mock"]["concurrency"] = n
    path.write_text(yaml.safe_dump(llm, sort_keys=False), "utf-8")


@pytest.mark.parametrize("concurrency", [None, 1])
async def test_samples_run_in_parallel_within_the_provider_limit(
    rtws: Path, concurrency: int | None
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"]}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"member": "dev", "contains": "FBR @self sideline response", "response": "merged"},
            {"contains": "Goal: root cause", "response": "sample", "delay_ms": 200},
        ],
    )
    if concurrency is not None:
        _set_mock_concurrency(rtws, concurrency)
    rt = DialogRuntime(rtws)
    provider = rt.providers.get("mock")
    real = provider.stream
    spans: list[tuple[float, float]] = []

    def timed(req: GenerationRequest) -> AsyncIterator[StreamEvent]:
        async def run() -> AsyncIterator[StreamEvent]:
            start = time.monotonic()
            async for ev in real(req):
                yield ev
            if _is_fbr(req):
                spans.append((start, time.monotonic()))

        return run()

    provider.stream = timed  # type: ignore[method-assign,assignment]
    root = rt.create_root_dialog("tasks/example.tsk", "dev").id
    rt.post_user_message(root, "go")
    await Scheduler(rt).run()
    assert len(spans) == 3 and rt.store.load_history(root)[-1].data["text"] == "merged"
    spans.sort()
    if concurrency is None:  # all three samples were in flight at once
        assert max(s for s, _ in spans) < min(e for _, e in spans)
    else:  # one provider slot: the samples queue, one after another
        assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))
    await rt.aclose()


# ---------------------------------------------------------------- gate and violations


async def test_a_request_failing_the_policy_gate_is_never_sent_and_fails_loudly(
    rtws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 2}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"member": "dev", "contains": POLICY_CODE, "response": "both samples failed"},
        ],
    )
    # A regression that drops the no-tools notice: the gate must stop the request.
    monkeypatch.setattr(fbr, "fbr_messages", lambda history, taskdoc, lang="en": list(history))
    rt = DialogRuntime(rtws)
    spy = _Samples(rt)
    root = rt.create_root_dialog("tasks/example.tsk", "dev").id
    rt.post_user_message(root, "go")
    await Scheduler(rt).run()
    assert spy.fbr() == []  # nothing reached a provider
    sides = _fbr_sides(rt, root)
    assert [d.status for d in sides] == ["error", "error"]
    for side in sides:
        codes = [e["data"].get("code") for e in rt.store.events(side.id) if e["type"] == "error"]
        assert codes == [POLICY_CODE]
    results = _results(rt, root)
    assert [r.data["status"] for r in results] == ["failed", "failed"]
    assert all("policy invariant violation" in r.data["text"] for r in results)
    assert rt.store.load_history(root)[-1].data["text"] == "both samples failed"
    assert rt.store.all_pending() == []
    await rt.aclose()


@pytest.mark.parametrize(
    ("output", "named"),
    [
        ("!?@human is this a UI bug?\n", "@human"),
        ("!?@self think deeper\n", "@self"),
        ("!?@bob help\n", "@bob"),
        ("!?@tellasker !tellaskSession s which OS?\n", "@tellasker"),
        ("!?@tellasker which OS?\n\n!?@bob and you?\n", "@bob"),
        ("!?@ anyone?\n", "ERR_MALFORMED_TELLASK"),
    ],
)
async def test_any_tellask_but_a_valid_tellask_back_is_a_violation_that_runs_nothing(
    rtws: Path, output: str, named: str
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 1}, "bob": {}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {"contains": "Goal: root cause", "response": output},
            {"member": "dev", "contains": VIOLATION_CODE, "response": "noted the violation"},
        ],
    )
    rt, root = await _run(rtws)
    (side,) = _fbr_sides(rt, root)
    assert [d.id for d in rt.store.list_dialogs(root_id=root)] == [root, side.id]
    assert rt.store.open_questions() == [] and rt.store.all_pending() == []
    hist = rt.store.load_history(side.id)
    assert [m.kind for m in hist] == ["user", "assistant"]
    assert hist[1].data["text"].startswith(VIOLATION_CODE) and named in hist[1].data["text"]
    assert hist[1].data["rejected_output"] == output
    assert [m.kind for m in rt.store.load_history(root)].count("user") == 1  # no tellask-back
    codes = [e["data"].get("code") for e in rt.store.events(side.id) if e["type"] == "error"]
    assert codes == [VIOLATION_CODE]
    (reply,) = _results(rt, root)
    assert reply.data["text"].startswith(f"{FBR_RESPONSE_HEADER}\n{VIOLATION_CODE}")
    assert rt.store.load_history(root)[-1].data["text"] == "noted the violation"
    await rt.aclose()


# ---------------------------------------------------------------- the Taskdoc


async def test_fbr_samples_see_the_current_taskdoc_read_only_and_a_change_mind_next_time(
    rtws: Path,
) -> None:
    """Reference § FBR: "Memories and the Taskdoc are still injected" — as the message
    after the no-tools notice, rebuilt per generation, so the second FBR round sees the
    goals the root replaced with `change_mind` in between."""
    goals = rtws / "tasks" / "example.tsk" / "goals.md"
    goals.write_text("- OLDGOAL find the freeze\n", "utf-8")
    write_team(rtws, {"dev": {"toolsets": ["*"], "fbr-effort": 1}})
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": BODY},
            {
                "member": "dev",
                "contains": "answer-1",
                "response": "new goals",
                "tool_calls": [
                    {
                        "name": "change_mind",
                        "arguments": {"selector": "goals", "content": "- NEWGOAL ship the fix"},
                    }
                ],
            },
            {"member": "dev", "role": "tool", "contains": "replaced", "response": BODY},
            {"member": "dev", "contains": "answer-2", "response": "done"},
        ],
    )
    rt = DialogRuntime(rtws)
    spy = _Samples(rt)
    root = rt.create_root_dialog("tasks/example.tsk", "dev").id
    rt.post_user_message(root, "go")
    await Scheduler(rt).run()
    first, second = spy.fbr()
    for req, now, gone in ((first, "OLDGOAL", "NEWGOAL"), (second, "NEWGOAL", "OLDGOAL")):
        texts = _texts(req)
        assert texts[0] == NO_TOOLS_NOTICE and req.tools == []
        assert texts[1].startswith("# The team's Taskdoc (read-only context)")
        assert "`tasks/example.tsk`" in texts[1] and "this dialog cannot change it" in texts[1]
        assert now in texts[1] and gone not in texts[1]
        assert "change_mind" not in texts[1] and "recall_taskdoc" not in texts[1]
        assert "Goal: root cause" in texts[2]
    assert "NEWGOAL" in goals.read_text("utf-8")
    assert rt.store.load_history(root)[-1].data["text"] == "done"
    # The Taskdoc is context, not history: nothing of it is stored in the FBR dialogs.
    for side in _fbr_sides(rt, root):
        assert all("read-only context" not in str(m.data) for m in rt.store.load_history(side.id))
    await rt.aclose()
