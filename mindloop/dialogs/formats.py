"""The texts the runtime writes into dialogs: assignments, replies, tellask-backs, FBR.

Kept in one place so prompts, tests and the docs agree word for word.
"""

from __future__ import annotations


def quote(text: str) -> str:
    """Markdown-quote every line (`> `), so a reply cannot be mistaken for a tellask."""
    lines = text.rstrip("\n").split("\n") if text.strip() else [""]
    return "\n".join("> " + line if line else ">" for line in lines)


def assignment_message(
    *, to: str, sender: str, headline: str, body: str, collective: list[str] | None = None
) -> str:
    """First message of a side dialog (and of each re-assignment of a session)."""
    parts = [f"Hi @{to}, this is @{sender} speaking, now:", "", quote(headline)]
    if body.strip():
        parts += ["", quote(body)]
    if collective and len(collective) > 1:
        names = ", ".join(f"@{m}" for m in collective)
        parts += [
            "",
            f"This is a collective assignment sent to: {names}. Answer for your own part.",
        ]
    parts += ["", "When you are done, reply with your final answer as a plain message."]
    return "\n".join(parts)


def response_message(*, requester: str, responder: str, response: str, headline: str) -> str:
    """How a side dialog's final answer appears in its caller's history."""
    return "\n".join(
        [
            f"Hi @{requester}, @{responder} provided response:",
            "",
            quote(response),
            "",
            "regarding the original tellask:",
            "",
            quote(headline),
        ]
    )


FBR_RESPONSE_HEADER = "[FBR @self sideline response]"


def fbr_response_message(response: str) -> str:
    return f"{FBR_RESPONSE_HEADER}\n{response}"


def failed_response_message(*, responder: str, error: str, headline: str) -> str:
    """What a caller sees when a side dialog it waits on failed (e.g. the provider gave up)."""
    return "\n".join(
        [
            f"[mindloop] the side dialog of @{responder} failed and will not answer:",
            "",
            quote(error),
            "",
            "regarding the original tellask:",
            "",
            quote(headline),
        ]
    )


def tellask_back_message(*, sup: str, sub: str, assignment_headline: str, request: str) -> str:
    return "\n".join(
        [
            f"Hi @{sup}, while working on the following original task:",
            "",
            quote(assignment_headline),
            "",
            f"`@{sub}` TellaskBack:",
            "",
            quote(request),
            "",
            "Answer it in your reply; your reply goes back to the asker.",
        ]
    )


def tellask_back_answer(*, responder: str, answer: str) -> str:
    return f"@{responder} answered your TellaskBack:\n\n{quote(answer)}"


def failed_tellask_message(*, headline: str, message: str, code: str | None) -> str:
    tag = f" ({code})" if code and code not in message else ""
    return f"[mindloop] tellask failed{tag}: {message}\n\nThe tellask was:\n{quote(headline)}"


def question_answer_message(*, question_id: str, headline: str, answer: str) -> str:
    return f"[answer from the human to your question {question_id}]\n{quote(headline)}\n\n{answer}"


INTERRUPTED_TOOL_RESULT = (
    "[mindloop] this call was interrupted by a runtime restart before it finished; its "
    "effect is unknown. Check, then call it again if needed."
)

NEW_COURSE_PROMPT = (
    "[mindloop] This is course #{course} of this dialog: the previous conversation was "
    "cleared by clear_mind. Your reminders and the Taskdoc are kept. Continue the task."
)


def detached_reply_message(*, responder: str, side_id: str, status: str, text: str) -> str:
    """The note a detached side dialog's final reply leaves in its caller's history."""
    outcome = "finished" if status == "completed" else "failed"
    return f"[detached] @{responder} ({side_id}) {outcome}:\n\n> " + text.replace("\n", "\n> ")
