"""FBR policy units: the fixed prompt's contract, the invariant gate, the violation finder,
the first message and FBR session naming, and how `!?@self` is routed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mindloop.dialogs import fbr
from mindloop.dialogs.fbr import (
    FBR_REQUEST_HEADER,
    FBR_REQUEST_HEADERS,
    FBR_SYSTEM_PROMPT,
    FBR_SYSTEM_PROMPTS,
    NO_TOOLS_NOTICE,
    NO_TOOLS_NOTICES,
    POLICY_CODE,
    VIOLATION_CODE,
    FbrPolicyError,
    check_request,
    fbr_messages,
    fbr_request_message,
    find_violation,
)
from mindloop.dialogs.routing import ERRORS, RouteKind, route_message
from mindloop.dialogs.tellask import parse_message
from mindloop.i18n import Lang
from mindloop.providers.base import (
    AssistantMessage,
    GenerationRequest,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from mindloop.taskdoc import TaskPackage
from mindloop.taskdoc.effective import INLINE_LIMIT_BYTES

# The seed's "system prompt 的最低要求", one pattern per requirement, in each work language.
PROMPT_REQUIREMENTS = {
    "no tools, cannot call tools": r"NO tools: you cannot call any tool or function",
    "no rtws / files / browser / shell": r"cannot access the runtime workspace \(rtws\), files, "
    r"a browser or a shell",
    "the body is the primary context": r"request body is your primary and authoritative context",
    "no access to the tellasker's history": r"cannot see the\s+conversation history of the "
    r"dialog that asked you",
    "own session history may be used": r"resumable FBR session, your own earlier messages",
    "list missing context and why it blocks": r"list what is missing and why it blocks you",
    "tellasker only for critical missing context": r"Only if you must clarify critical missing "
    r"context, you may ask back with `!\?@tellasker`",
    "no other tellask": r"Write no other tellask",
}
PROMPT_REQUIREMENTS_ZH = {
    "no tools, cannot call tools": r"你没有任何工具：不能调用任何工具或函数",
    "no rtws / files / browser / shell": r"不能访问运行时工作区（rtws）、文件、浏览器或 shell",
    "the body is the primary context": r"诉请正文是你主要且权威的任务上下文",
    "no access to the tellasker's history": r"看不到发起本请求的对话的历史；\s*不要假设你能访问它",
    "own session history may be used": r"可恢复的 FBR 会话（`!tellaskSession`），"
    r"你在本会话中自己先前的消息是\s*可以使用的显式上下文",
    "list missing context and why it blocks": r"列出缺失的信息及其阻塞原因",
    "tellasker only for critical missing context": r"仅当你必须澄清关键缺失上下文时，"
    r"才可以用 `!\?@tellasker` 回问诉请者",
    "no other tellask": r"除此之外不要发起任何诉请",
}
REQUIREMENTS_BY_LANG = {"en": PROMPT_REQUIREMENTS, "zh": PROMPT_REQUIREMENTS_ZH}


@pytest.mark.parametrize(
    ("lang", "requirement"),
    [(lang, r) for lang in ("en", "zh") for r in sorted(PROMPT_REQUIREMENTS)],
)
def test_fbr_system_prompt_states_each_minimum_requirement(lang: Lang, requirement: str) -> None:
    pattern = REQUIREMENTS_BY_LANG[lang][requirement]
    assert re.search(pattern, FBR_SYSTEM_PROMPTS[lang]), (lang, requirement)
    assert PROMPT_REQUIREMENTS_ZH.keys() == PROMPT_REQUIREMENTS.keys()  # none left out in zh


def test_zh_fbr_texts_are_chinese_and_agree_on_tellasker() -> None:
    for text in (
        FBR_SYSTEM_PROMPTS["zh"],
        NO_TOOLS_NOTICES["zh"],
        FBR_REQUEST_HEADERS["zh"],
        fbr.violation_text("x", "zh"),
    ):
        assert "无工具" in text or "没有任何工具" in text
        # No tool instructions from the normal zh runtime rules, and tellasker never forbidden.
        assert "通过函数工具行动" not in text and "运行命令" not in text
        assert not re.search(r"tellasker[^。\n]*(禁止|不允许|不得)", text)
    for text in (
        FBR_SYSTEM_PROMPTS["zh"],
        FBR_REQUEST_HEADERS["zh"],
        fbr.violation_text("x", "zh"),
    ):
        assert "`!?@tellasker`" in text and "关键缺失上下文" in text
    assert (
        NO_TOOLS_NOTICES["zh"]
        == "无工具：不要调用任何工具，也不要访问 rtws、文件、浏览器或 shell。"
    )
    assert FBR_REQUEST_HEADERS["zh"].startswith("# @self 扪心自问（FBR）请求\n")
    assert FBR_REQUEST_HEADERS["zh"].endswith("\n---\n")


def test_fbr_texts_carry_no_tool_instructions_and_agree_on_tellasker() -> None:
    for text in (FBR_SYSTEM_PROMPT, NO_TOOLS_NOTICE, FBR_REQUEST_HEADER, fbr.violation_text("x")):
        assert "function tools to act" not in text and "run commands" not in text
        # Reference statement 55: no text calls `@tellasker` forbidden.
        assert not re.search(r"tellasker[^.\n]*(forbidden|not allowed)", text, re.I)
    for text in (FBR_SYSTEM_PROMPT, FBR_REQUEST_HEADER, fbr.violation_text("x")):
        assert "tellasker" in text and "critical missing context" in text
    assert NO_TOOLS_NOTICE == (
        "No tools: do not call any tools, and do not access the rtws, files, browser, or shell."
    )


TASKDOC = "# The team's Taskdoc (read-only context)\n## Goals\nship it"


def _request(**over: object) -> GenerationRequest:
    return _request_in("en", over)


def _request_in(lang: Lang, over: dict[str, object] | None = None) -> GenerationRequest:
    """An FBR request as the policy builds it in `lang`, with `over` replacing fields."""
    base: dict[str, object] = {
        "model": "m",
        "system": FBR_SYSTEM_PROMPTS[lang],
        "messages": fbr_messages(
            [UserMessage(text=fbr_request_message("why?\n", "@self\n", lang))], TASKDOC, lang
        ),
        "tools": [],
        "params": {},
    }
    return GenerationRequest.model_construct(**(base | (over or {})))  # type: ignore[arg-type]


def test_gate_accepts_the_policy_request() -> None:
    check_request(_request())


def test_gate_accepts_the_zh_policy_request_and_rejects_a_language_mix() -> None:
    """The gate compares against the texts of the request's language: a zh request passes
    the zh gate, and neither language's prompt or notice stands in for the other's."""
    zh = _request_in("zh")
    assert zh.messages[0].text == NO_TOOLS_NOTICES["zh"]  # type: ignore[union-attr]
    check_request(zh, "zh")
    with pytest.raises(FbrPolicyError, match="not the fixed FBR prompt") as err:
        check_request(zh)  # checked as en
    assert "no-tools notice must be the one first" in str(err.value)
    mixed = _request_in("zh", {"system": FBR_SYSTEM_PROMPT})
    with pytest.raises(FbrPolicyError, match="not the fixed FBR prompt"):
        check_request(mixed, "zh")
    with pytest.raises(FbrPolicyError, match="no-tools notice must be the one first"):
        check_request(_request_in("en"), "zh")


def test_fbr_messages_put_the_notice_first_then_the_taskdoc_then_the_history() -> None:
    history = [UserMessage(text="why?")]
    assert [m.text for m in fbr_messages(history, TASKDOC)] == [NO_TOOLS_NOTICE, TASKDOC, "why?"]


def test_fbr_taskdoc_states_the_sections_read_only_without_tool_mentions(rtws: Path) -> None:
    pkg = TaskPackage(rtws, "tasks/example.tsk")
    (pkg.path / "goals.md").write_text("Find why Run freezes the UI.\n", "utf-8")
    text = fbr.fbr_taskdoc(pkg)
    assert "`tasks/example.tsk`" in text and "Find why Run freezes the UI." in text
    assert "## Goals" in text and "## Constraints" in text and "## Progress" in text
    assert "this dialog cannot change it" in text
    # An FBR dialog has no tools: nothing in its Taskdoc may point to one.
    for name in ("change_mind", "recall_taskdoc", "read_file", "tool"):
        assert name not in text.replace(pkg.read_section("goals.md"), "")
    assert "只读" in fbr.fbr_taskdoc(pkg, "zh")


def test_fbr_taskdoc_too_large_to_inline_is_replaced_by_a_note(rtws: Path) -> None:
    pkg = TaskPackage(rtws, "tasks/example.tsk")
    (pkg.path / "progress.md").write_text("x" * (INLINE_LIMIT_BYTES + 1), "utf-8")
    text = fbr.fbr_taskdoc(pkg)
    assert "too large to inline" in text and "x" * 100 not in text


@pytest.mark.parametrize(
    ("over", "problem"),
    [
        (
            {"tools": [ToolSpec(name="read_file", description="d", parameters={})]},
            "1 tool definition(s) present",
        ),
        ({"system": FBR_SYSTEM_PROMPT + "Use function tools."}, "not the fixed FBR prompt"),
        ({"messages": [UserMessage(text="why?")]}, "no-tools notice must be the one first"),
        (
            {"messages": [*fbr_messages([], TASKDOC), UserMessage(text=NO_TOOLS_NOTICE)]},
            "no-tools notice must be the one first",
        ),
        (
            {"messages": [UserMessage(text="why?"), UserMessage(text=NO_TOOLS_NOTICE)]},
            "no-tools notice must be the one first",
        ),
        (
            {
                "messages": fbr_messages(
                    [
                        UserMessage(text="why?"),
                        AssistantMessage(tool_calls=[ToolCall(id="c1", name="read_file")]),
                        ToolResultMessage(call_id="c1", name="read_file", content="x"),
                    ],
                    TASKDOC,
                )
            },
            "function calls or their results",
        ),
    ],
)
def test_gate_fails_fast_on_any_deviation(over: dict[str, object], problem: str) -> None:
    with pytest.raises(FbrPolicyError) as err:
        check_request(_request(**over))
    assert str(err.value).startswith(f"{POLICY_CODE}: FBR policy invariant violation: ")
    assert problem in str(err.value)


def _calls(text: str) -> list:  # type: ignore[type-arg]
    return list(parse_message(text).calls)


@pytest.mark.parametrize(
    ("text", "calls", "what"),
    [
        ("", [ToolCall(id="1", name="read_file")], "emitted a function call (read_file)"),
        ("!?@tellasker which OS?\n", [ToolCall(id="1", name="x")], "emitted a function call"),
        ("!?@bob help\n", [], "wrote a tellask to @bob"),
        ("!?@human help\n", [], "wrote a tellask to @human"),
        ("!?@self again\n", [], "wrote a tellask to @self"),
        ("!?@tellasker !tellaskSession s which OS?\n", [], "wrote a tellask to @tellasker"),
        ("!?@tellasker ok?\n\n!?@bob help\n", [], "wrote a tellask to @bob"),
        ("!?@ nobody\n", [], "wrote a malformed tellask (ERR_MALFORMED_TELLASK)"),
    ],
)
def test_violations_are_found(text: str, calls: list[ToolCall], what: str) -> None:
    found = find_violation(calls, _calls(text))
    assert found is not None and found.startswith(VIOLATION_CODE + "\n") and what in found


@pytest.mark.parametrize(
    ("text", "calls", "what"),
    [
        ("", [ToolCall(id="1", name="read_file")], "发出了函数调用（read_file）"),
        ("!?@bob help\n", [], "向 @bob 发起了诉请"),
        ("!?@ nobody\n", [], "写了格式错误的诉请（ERR_MALFORMED_TELLASK）"),
    ],
)
def test_zh_violations_keep_the_code_and_explain_in_chinese(
    text: str, calls: list[ToolCall], what: str
) -> None:
    found = find_violation(calls, _calls(text), "zh")
    assert found is not None and found.startswith(VIOLATION_CODE + "\n") and what in found
    assert "无工具的 @self 扪心自问（FBR）支线对话" in found and "mindloop note" not in found
    assert find_violation([], _calls("!?@tellasker 是生产环境的日志吗？\n"), "zh") is None


def test_a_valid_tellask_back_and_plain_text_are_not_violations() -> None:
    assert find_violation([], _calls("!?@tellasker is the log from production?\n")) is None
    assert find_violation([], _calls("Conclusion: the UI thread blocks on I/O.\n")) is None
    fenced = "```\n!?@bob this is an example, not a call\n```\n"
    assert find_violation([], _calls(fenced)) is None


@pytest.mark.parametrize(
    ("headline", "body", "expected"),
    [
        ("@self\n", "Symptom: Run freezes.\n", "Symptom: Run freezes."),
        (
            "@self Explain the freeze\n",
            "Symptom: Run freezes.\n",
            "Explain the freeze\n\nSymptom: Run freezes.",
        ),
        ("@self !tellaskSession ui.freeze why?\n", "", "why?"),
        ("@self why? !tellaskSession ui\n", "details\n", "why?\n\ndetails"),
    ],
)
def test_first_message_keeps_everything_written_but_the_mention_and_directive(
    headline: str, body: str, expected: str
) -> None:
    assert fbr_request_message(body, headline) == FBR_REQUEST_HEADER + expected.strip("\n")
    zh = FBR_REQUEST_HEADERS["zh"] + expected.strip("\n")
    assert fbr_request_message(body, headline, "zh") == zh


def _route(text: str, *, effort: int = 3, member: str = "dev", root: bool = True):  # type: ignore[no-untyped-def]
    return route_message(
        _calls(text),
        caller_member=member,
        caller_is_root=root,
        members=["dev", "bob"],
        fbr_effort=effort,
    )


def test_self_routes_to_fbr_and_own_id_to_a_normal_side_dialog_with_a_note() -> None:
    (fresh,) = _route("!?@self\n!?why?\n")
    assert (fresh.kind, fresh.targets, fresh.session) == (RouteKind.FBR, ["dev"], None)
    (own,) = _route("!?@dev\n!?why?\n")
    assert own.kind is RouteKind.FRESH and own.targets == ["dev"]
    assert "`!?@self`" in own.message and "tool-less" in own.message


def test_fbr_sessions_never_share_a_registry_key_with_normal_sessions() -> None:
    (fbr_route,) = _route("!?@self !tellaskSession s\n!?why?\n")
    (own,) = _route("!?@dev !tellaskSession s\n!?why?\n")
    (own_derived,) = _route("!?@dev !tellaskSession s.fbr1\n!?why?\n")
    assert fbr_route.kind is RouteKind.FBR and fbr_route.session == "@self:s"
    assert (own.session, own_derived.session) == ("s", "s.fbr1")
    # A slug cannot carry the FBR prefix, so no normal session can land in its namespace.
    (bad,) = _route("!?@dev !tellaskSession @self:s\n!?why?\n")
    assert bad.kind is RouteKind.FAIL


@pytest.mark.parametrize("root", [True, False])
def test_effort_zero_fails_with_the_setting_named(root: bool) -> None:
    (r,) = _route("!?@self\n!?why?\n", effort=0, root=root)
    assert (r.kind, r.code) == (RouteKind.FAIL, "ERR_FBR_DISABLED")
    assert r.message == ERRORS["ERR_FBR_DISABLED"].format(member="dev")
    assert "fbr-effort: 0 for @dev in .minds/team.yaml" in r.message
    assert r.message.startswith(
        "Error: `!?@self` Fresh Boots Reasoning (FBR) is disabled by your team configuration"
    )
