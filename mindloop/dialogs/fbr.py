"""Fresh Boots Reasoning (`!?@self`): the tool-less policy, its invariant gate, violations.

An FBR side dialog reasons only from the tellask body (with the team's Taskdoc shown
read-only). Tool-lessness is enforced at three points: the request (no tools, fixed
prompt, one no-tools notice, first — checked by `check_request` before every FBR
generation), the output (`find_violation`: any function call, or any tellask other than a
valid `!?@tellasker`), and the prompt text itself. The fixed texts come in the team's
work language (en, zh); the error codes stay the same in every language.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mindloop.dialogs.policy import DefaultPolicy, PolicyError, Refusal
from mindloop.dialogs.tellask.grammar import SESSION_DIRECTIVE_RE
from mindloop.i18n import Lang
from mindloop.providers.base import (
    AssistantMessage,
    GenerationRequest,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mindloop.taskdoc import TaskPackage
from mindloop.taskdoc.effective import INLINE_LIMIT_BYTES, render_body, render_cached
from mindloop.tools.base import Tool

if TYPE_CHECKING:
    from mindloop.dialogs.live import LiveDialog
    from mindloop.dialogs.request import RequestBuilder
    from mindloop.dialogs.tellask.parser import TellaskCall

VIOLATION_CODE = "ERR_FBR_TOOLLESS_VIOLATION"
POLICY_CODE = "ERR_FBR_POLICY_INVARIANT"

# The fixed FBR texts, one per work language (`team.yaml` `work_language`): an FBR sample
# must be told the tool-less contract in the language the team works in, like every other
# runtime prompt. Each language states every minimum requirement of the FBR design doc.
FBR_SYSTEM_PROMPTS: dict[Lang, str] = {
    "en": """\
You are answering a Fresh Boots Reasoning (FBR) request from yourself, in a tool-less side dialog.
- You have NO tools: you cannot call any tool or function.
- You cannot access the runtime workspace (rtws), files, a browser or a shell.
- The request body is your primary and authoritative context. You cannot see the
  conversation history of the dialog that asked you; do not assume anything from it.
- If this is a resumable FBR session, your own earlier messages in this session are
  explicit context you may use.
- If the body lacks context you need, list what is missing and why it blocks you.
- Only if you must clarify critical missing context, you may ask back with `!?@tellasker`
  (a line starting with `!?@tellasker`, then `!?` body lines). Write no other tellask.
Reply with a concise result the asker can integrate: conclusion or recommendation,
reasoning, assumptions (and their source), unknowns or missing context, next steps.
""",
    "zh": """\
你正在一个无工具的支线对话中，回答你自己发起的扪心自问（FBR）请求。
- 你没有任何工具：不能调用任何工具或函数。
- 你不能访问运行时工作区（rtws）、文件、浏览器或 shell（工具调用已禁用）。
- 诉请正文是你主要且权威的任务上下文。你看不到发起本请求的对话的历史；
  不要假设你能访问它，也不要据此推断任何内容。
- 若这是可恢复的 FBR 会话（`!tellaskSession`），你在本会话中自己先前的消息是
  可以使用的显式上下文。
- 若诉请正文缺少你需要的上下文，请列出缺失的信息及其阻塞原因。
- 仅当你必须澄清关键缺失上下文时，才可以用 `!?@tellasker` 回问诉请者
  （以 `!?@tellasker` 开头的一行，随后是 `!?` 正文行）。除此之外不要发起任何诉请。
请给出便于诉请者整合的简明结果：结论或建议、推理过程、前提假设（及其来源）、
未知项或缺失上下文、下一步。
""",
}

NO_TOOLS_NOTICES: dict[Lang, str] = {
    "en": "No tools: do not call any tools, and do not access the rtws, files, browser, or shell.",
    "zh": "无工具：不要调用任何工具，也不要访问 rtws、文件、浏览器或 shell。",
}

FBR_REQUEST_HEADERS: dict[Lang, str] = {
    "en": (
        "# @self Fresh Boots Reasoning (FBR) request\n"
        "(tool-less; `!?@tellasker` is allowed only when you must clarify critical missing "
        "context)\n---\n"
    ),
    "zh": (
        "# @self 扪心自问（FBR）请求\n"
        "（无工具；仅当你必须澄清关键缺失上下文时，才允许使用 `!?@tellasker`）\n---\n"
    ),
}

# The English texts under their historical names (English is the default work language).
FBR_SYSTEM_PROMPT = FBR_SYSTEM_PROMPTS["en"]
NO_TOOLS_NOTICE = NO_TOOLS_NOTICES["en"]
FBR_REQUEST_HEADER = FBR_REQUEST_HEADERS["en"]


# FBR sessions live in their own namespace of the member's session registry: a slug
# can never contain "@" or ":", so `!?@<own-id> !tellaskSession s` (a normal side dialog
# with tools, key `<member>!s`) and `!?@self !tellaskSession s` (key `<member>!@self:s`,
# or `<member>!@self:s.fbr<i>` with N > 1) can never resume each other's dialog.
FBR_SESSION_PREFIX = "@self:"

_LEADING_SELF = re.compile(r"^\s*@self\b")


def fbr_session(slug: str | None) -> str | None:
    """The registry session of `!?@self !tellaskSession <slug>` (None when fresh)."""
    return None if slug is None else FBR_SESSION_PREFIX + slug


def fbr_request_message(body: str, headline: str, lang: Lang = "en") -> str:
    """The first message of an FBR side dialog: the fixed header (in the work language at
    dispatch time; it is persisted as written), then everything the tellasker wrote — the
    headline after `@self` (minus `!tellaskSession <s>`) and the body. Nothing written is
    dropped: it is the sample's only context."""
    head = SESSION_DIRECTIVE_RE.sub(lambda m: m.group(1), _LEADING_SELF.sub("", headline, 1))
    parts = [p.strip("\n") for p in (head.strip(), body) if p.strip()]
    return FBR_REQUEST_HEADERS[lang] + "\n\n".join(parts)


class FbrPolicyError(PolicyError):
    """An FBR request about to be sent does not satisfy the tool-less policy."""

    code = POLICY_CODE


_TASKDOC_FRAME = {
    "en": (
        "# The team's Taskdoc (read-only context)\n"
        "The Taskdoc `{path}` of the dialog tree you were asked from, as of this generation. "
        "It is background, not the request: this dialog cannot change it. If your reasoning "
        "shows it should change, say so in your reply.\n\n{body}"
    ),
    "zh": (
        "# 团队差遣牒（只读上下文）\n"
        "发起本请求的对话树的差遣牒 `{path}`（本次生成时的最新内容）。它是背景，不是请求："
        "本对话不能修改它。若你的推理表明它应当修改，请在回复中说明。\n\n{body}"
    ),
}
_TASKDOC_TOO_BIG = {
    "en": "(The Taskdoc body is over {limit} bytes, too large to inline; it is not shown.)",
    "zh": "（差遣牒正文超过 {limit} bytes，过大无法内联，此处不显示。）",
}


def fbr_taskdoc(pkg: TaskPackage, lang: Lang = "en") -> str:
    """The Taskdoc as an FBR sample sees it (reference § FBR: "Memories and the Taskdoc
    are still injected"): the section contents under a read-only framing. The usual
    effective-Taskdoc status is left out because it explains `change_mind` and
    `recall_taskdoc`, tools an FBR dialog does not have. Rendered on every generation, so
    a `change_mind` in the root is seen by the next FBR generation."""

    def render() -> str:
        body = render_body(pkg, lang)
        if len(body.encode("utf-8")) > INLINE_LIMIT_BYTES:
            body = _TASKDOC_TOO_BIG[lang].format(limit=INLINE_LIMIT_BYTES)
        return _TASKDOC_FRAME[lang].format(path=pkg.rel_path, body=body)

    return render_cached(pkg, f"fbr:{lang}", render)


def fbr_messages(history: list, taskdoc: str, lang: Lang = "en") -> list:  # type: ignore[type-arg]
    """The messages of an FBR request: exactly one no-tools notice (in `lang`), then the
    read-only Taskdoc (`fbr_taskdoc`; not stored, rebuilt per generation), then the
    history."""
    return [
        UserMessage.model_construct(role="user", text=NO_TOOLS_NOTICES[lang]),
        UserMessage.model_construct(role="user", text=taskdoc),
        *history,
    ]


def check_request(req: GenerationRequest, lang: Lang = "en") -> None:
    """The invariant gate: fail fast rather than send an FBR request that could use tools.
    It compares against the fixed texts of `lang`, the language the request was built in:
    a prompt or notice in another language (or none) means the request was not built by
    the policy."""
    notice = NO_TOOLS_NOTICES[lang]
    problems = []
    if req.tools:
        problems.append(f"{len(req.tools)} tool definition(s) present")
    if req.system != FBR_SYSTEM_PROMPTS[lang]:
        problems.append("system prompt is not the fixed FBR prompt")
    notices = [m for m in req.messages if isinstance(m, UserMessage) and m.text == notice]
    if len(notices) != 1 or not req.messages or req.messages[0] is not notices[0]:
        problems.append("the no-tools notice must be the one first message")
    if any(
        isinstance(m, ToolResultMessage) or (isinstance(m, AssistantMessage) and m.tool_calls)
        for m in req.messages
    ):
        problems.append("the history holds function calls or their results")
    if problems:
        raise FbrPolicyError(
            f"{POLICY_CODE}: FBR policy invariant violation: " + "; ".join(problems)
        )


_VIOLATION_NOTE: dict[Lang, str] = {
    "en": (
        "mindloop note: this is a tool-less @self FBR side dialog, and it {what}. Nothing was "
        "run and nothing was created. In FBR, reason only from the request body; the only "
        "tellask allowed is `!?@tellasker`, to clarify critical missing context."
    ),
    "zh": (
        "mindloop 提示：这是一个无工具的 @self 扪心自问（FBR）支线对话，而它{what}。"
        "没有执行任何操作，也没有创建任何内容。在 FBR 中只能基于诉请正文推理；"
        "唯一允许的诉请是 `!?@tellasker`，且仅用于澄清关键缺失上下文。"
    ),
}
_VIOLATION_WHAT: dict[Lang, dict[str, str]] = {
    "en": {
        "call": "emitted a function call ({x})",
        "malformed": "wrote a malformed tellask ({x})",
        "tellask": "wrote a tellask to @{x}",
    },
    "zh": {
        "call": "发出了函数调用（{x}）",
        "malformed": "写了格式错误的诉请（{x}）",
        "tellask": "向 @{x} 发起了诉请",
    },
}


def violation_text(what: str, lang: Lang = "en") -> str:
    """The sample's replacement reply: the stable code first (callers and tests match on
    it, so it is never translated), then a note in the work language."""
    return f"{VIOLATION_CODE}\n" + _VIOLATION_NOTE[lang].format(what=what)


def find_violation(calls: list, tellasks: list, lang: Lang = "en") -> str | None:  # type: ignore[type-arg]
    """Describe the first violation in one FBR generation's output, or None."""
    what = _VIOLATION_WHAT[lang]
    if calls:
        names = ", ".join(sorted({c.name for c in calls}))
        return violation_text(what["call"].format(x=names), lang)
    for t in tellasks:
        if t.error is not None:
            return violation_text(what["malformed"].format(x=t.error.code), lang)
        if t.mention != "tellasker" or t.session:
            return violation_text(what["tellask"].format(x=t.mention or "?"), lang)
    return None


class FbrPolicy(DefaultPolicy):
    """The turn policy of an FBR side dialog: no tools offered, the fixed FBR system
    prompt, the no-tools notice and the read-only Taskdoc before the history, the
    member's `fbr_model_params`; the request is checked against the invariant before it
    is sent, and an output with a function call or any tellask but a valid
    `!?@tellasker` is replaced by the violation note (delivered to the tellasker)."""

    def offered_tools(self, live: LiveDialog, parts: RequestBuilder) -> Sequence[Tool]:
        return ()

    def compile_request(
        self, live: LiveDialog, parts: RequestBuilder, tools: Sequence[Tool]
    ) -> GenerationRequest:
        lang, member = parts.lang, live.member
        taskdoc = fbr_taskdoc(parts.context.package(live.record.task_path), lang)
        req = GenerationRequest.model_construct(
            model=parts.model_name(member),
            system=FBR_SYSTEM_PROMPTS[lang],
            messages=fbr_messages(live.history.messages, taskdoc, lang=lang),
            tools=[],
            params=parts.params(member, fbr=True),
            member=member.id,
        )
        check_request(req, lang)
        return req

    def check_call(
        self, live: LiveDialog, parts: RequestBuilder, name: str, offered: Sequence[Tool]
    ) -> Refusal | None:
        return Refusal(VIOLATION_CODE, f"an FBR side dialog has no tools ({name})")

    def check_output(
        self,
        live: LiveDialog,
        parts: RequestBuilder,
        text: str,
        calls: Sequence[ToolCall],
        tellasks: Sequence[TellaskCall],
    ) -> Refusal | None:
        note = find_violation(list(calls), list(tellasks), parts.lang)
        return None if note is None else Refusal(VIOLATION_CODE, note)
