"""Fresh Boots Reasoning (`!?@self`): the tool-less policy, its invariant gate, violations.

An FBR side dialog reasons only from the tellask body (with the team's Taskdoc shown
read-only). Tool-lessness is enforced at three points: the request (no tools, fixed
prompt, one no-tools notice, first — checked by `check_request` before every FBR
generation), the output (`find_violation`: any function call, or any tellask other than a
valid `!?@tellasker`), and the prompt text itself.
"""

from __future__ import annotations

import re

from mindloop.dialogs.tellask.grammar import SESSION_DIRECTIVE_RE
from mindloop.errors import MindloopError
from mindloop.providers.base import (
    AssistantMessage,
    GenerationRequest,
    ToolResultMessage,
    UserMessage,
)
from mindloop.taskdoc import TaskPackage
from mindloop.taskdoc.effective import INLINE_LIMIT_BYTES, render_body, render_cached
from mindloop.taskdoc.sections import Lang

VIOLATION_CODE = "ERR_FBR_TOOLLESS_VIOLATION"
POLICY_CODE = "ERR_FBR_POLICY_INVARIANT"

FBR_SYSTEM_PROMPT = """\
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
"""

NO_TOOLS_NOTICE = (
    "No tools: do not call any tools, and do not access the rtws, files, browser, or shell."
)

FBR_REQUEST_HEADER = (
    "# @self Fresh Boots Reasoning (FBR) request\n"
    "(tool-less; `!?@tellasker` is allowed only when you must clarify critical missing "
    "context)\n---\n"
)


# FBR sessions live in their own namespace of the member's session registry: a slug
# can never contain "@" or ":", so `!?@<own-id> !tellaskSession s` (a normal side dialog
# with tools, key `<member>!s`) and `!?@self !tellaskSession s` (key `<member>!@self:s`,
# or `<member>!@self:s.fbr<i>` with N > 1) can never resume each other's dialog.
FBR_SESSION_PREFIX = "@self:"

_LEADING_SELF = re.compile(r"^\s*@self\b")


def fbr_session(slug: str | None) -> str | None:
    """The registry session of `!?@self !tellaskSession <slug>` (None when fresh)."""
    return None if slug is None else FBR_SESSION_PREFIX + slug


def fbr_request_message(body: str, headline: str) -> str:
    """The first message of an FBR side dialog: the fixed header, then everything the
    tellasker wrote — the headline after `@self` (minus `!tellaskSession <s>`) and the
    body. Nothing written is dropped: it is the sample's only context."""
    head = SESSION_DIRECTIVE_RE.sub(lambda m: m.group(1), _LEADING_SELF.sub("", headline, 1))
    parts = [p.strip("\n") for p in (head.strip(), body) if p.strip()]
    return FBR_REQUEST_HEADER + "\n\n".join(parts)


class FbrPolicyError(MindloopError):
    """An FBR request about to be sent does not satisfy the tool-less policy."""


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


def fbr_messages(history: list, taskdoc: str) -> list:  # type: ignore[type-arg]
    """The messages of an FBR request: exactly one no-tools notice, then the read-only
    Taskdoc (`fbr_taskdoc`; not stored, rebuilt per generation), then the history."""
    return [
        UserMessage.model_construct(role="user", text=NO_TOOLS_NOTICE),
        UserMessage.model_construct(role="user", text=taskdoc),
        *history,
    ]


def check_request(req: GenerationRequest) -> None:
    """The invariant gate: fail fast rather than send an FBR request that could use tools."""
    problems = []
    if req.tools:
        problems.append(f"{len(req.tools)} tool definition(s) present")
    if req.system != FBR_SYSTEM_PROMPT:
        problems.append("system prompt is not the fixed FBR prompt")
    notices = [m for m in req.messages if isinstance(m, UserMessage) and m.text == NO_TOOLS_NOTICE]
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


def violation_text(what: str) -> str:
    return (
        f"{VIOLATION_CODE}\n"
        f"mindloop note: this is a tool-less @self FBR side dialog, and it {what}. Nothing was "
        "run and nothing was created. In FBR, reason only from the request body; the only "
        "tellask allowed is `!?@tellasker`, to clarify critical missing context."
    )


def find_violation(calls: list, tellasks: list) -> str | None:  # type: ignore[type-arg]
    """Describe the first violation in one FBR generation's output, or None."""
    if calls:
        names = ", ".join(sorted({c.name for c in calls}))
        return violation_text(f"emitted a function call ({names})")
    for t in tellasks:
        if t.error is not None:
            return violation_text(f"wrote a malformed tellask ({t.error.code})")
        if t.mention != "tellasker" or t.session:
            return violation_text(f"wrote a tellask to @{t.mention or '?'}")
    return None
