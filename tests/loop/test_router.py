"""The Router (agent-loop §3–4, DESIGN.md §8.8): one standalone call that routes a message
to a listed task or to a new one, never to a guessed id; refused answers are retried once
with the reason, and every run comes back as a record with its attempts and usage."""

from __future__ import annotations

import json
from pathlib import Path

from mindloop.config import load_config
from mindloop.loop.router import ROUTE_TOOL, Router
from mindloop.providers.base import ToolResultMessage, UserMessage
from mindloop.providers.pool import ProviderPool
from mindloop.store import RouterCandidate, TaskStatus
from mindloop.testing import ScriptedModel, Turn, call
from tests.loop.router_util import project, route

CANDIDATES = [
    RouterCandidate(task="tasks/login.tsk", topic="Users can log in", status=TaskStatus.ACTIVE),
    RouterCandidate(task="tasks/invoices.tsk", topic="Export invoices as PDF"),
]


async def _route(rtws: Path, message: str, providers: dict | None = None):  # type: ignore[no-untyped-def, type-arg]
    config = load_config(rtws)
    pool = ProviderPool(config.llm, rtws, providers)
    try:
        return await Router(config, pool, lang="en").route(message, CANDIDATES)
    finally:
        await pool.aclose()


async def test_it_picks_a_listed_task_by_its_id(tmp_path: Path) -> None:
    rtws = project(
        tmp_path,
        [route(match="login", target_task_id="tasks/login.tsk", quick_reply="Back to login.")],
        {},
    )
    rec = await _route(rtws, "continue the login work")
    assert rec.status == "accepted" and rec.error is None
    assert rec.decision is not None
    assert (rec.decision.target_task_id, rec.decision.create_new_task) == ("tasks/login.tsk", False)
    assert rec.decision.quick_reply == "Back to login."
    assert rec.candidates == CANDIDATES and rec.message == "continue the login work"
    assert (rec.member, rec.provider, rec.model) == ("dev", "mock", "mock-model")
    [attempt] = rec.attempts
    assert (
        attempt.error is None and json.loads(attempt.answer)["target_task_id"] == "tasks/login.tsk"
    )
    assert rec.input_tokens and rec.output_tokens and rec.cost_usd == 0.0  # the mock is free


async def test_it_creates_a_new_task_when_none_fits(tmp_path: Path) -> None:
    rtws = project(
        tmp_path,
        [route(create_new_task=True, new_task_slug="dark-mode", new_task_topic="Dark mode")],
        {},
    )
    rec = await _route(rtws, "add a dark mode")
    assert rec.status == "accepted" and rec.decision is not None
    assert rec.decision.create_new_task and rec.decision.target_task_id is None
    assert (rec.decision.new_task_slug, rec.decision.new_task_topic) == ("dark-mode", "Dark mode")


async def test_a_guessed_id_is_refused_and_the_call_retried_with_the_reason(tmp_path: Path) -> None:
    rtws = project(
        tmp_path,
        [
            route(
                role="tool", match="not the id of a listed task", target_task_id="tasks/login.tsk"
            ),
            route(match="login", target_task_id="tasks/login-page.tsk"),
        ],
        {},
    )
    rec = await _route(rtws, "continue the login work")
    assert rec.status == "accepted" and rec.decision is not None
    assert rec.decision.target_task_id == "tasks/login.tsk"
    first, second = rec.attempts
    assert first.error is not None and "'tasks/login-page.tsk' is not the id" in first.error
    assert "tasks/login.tsk, tasks/invoices.tsk" in first.error and second.error is None
    assert rec.input_tokens == first.input_tokens + second.input_tokens  # type: ignore[operator]


async def test_a_third_refusal_fails_the_run_and_says_why(tmp_path: Path) -> None:
    """The Router has agent-loop §3's 3 steps by default (`loop.router.max_attempts`)."""
    rtws = project(tmp_path, [route(target_task_id="tasks/elsewhere.tsk")], {})
    rec = await _route(rtws, "continue the login work")
    assert rec.status == "failed" and rec.decision is None
    assert len(rec.attempts) == 3 and all(a.error for a in rec.attempts)
    assert rec.error is not None and "no acceptable decision in 3 call(s)" in rec.error
    assert "'tasks/elsewhere.tsk' is not the id of a listed task" in rec.error


async def test_malformed_answers_are_refused_as_such(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            "It is the login task.",  # no call at all
            Turn(
                tool_calls=[
                    call(ROUTE_TOOL, target_task_id="tasks/login.tsk", create_new_task=True)
                ]
            ),
            Turn(tool_calls=[call(ROUTE_TOOL, create_new_task=True)]),
        ]
    )
    rtws = project(tmp_path, [], {})
    rec = await _route(rtws, "login again", {"mock": model})  # 3 calls: the default
    assert rec.status == "accepted" and rec.decision is not None and rec.decision.create_new_task
    no_call, both, _ok = rec.attempts
    assert no_call.answer == "It is the login task."
    assert (
        no_call.error
        == f"no call of {ROUTE_TOOL} was made; answer with exactly one call of {ROUTE_TOOL}"
    )
    assert both.error is not None and "not both" in both.error
    # what the model saw: the candidates in the system prompt, one forced tool, the refusals
    first, second, third = model.requests
    assert "- tasks/login.tsk — Users can log in [ACTIVE]" in first.system
    assert "- tasks/invoices.tsk — Export invoices as PDF [not started]" in first.system
    assert [t.name for t in first.tools] == [ROUTE_TOOL] and first.member == "dev"
    assert first.params["openai"]["tool_choice"]["function"]["name"] == ROUTE_TOOL
    assert first.params["anthropic"]["tool_choice"] == {"type": "tool", "name": ROUTE_TOOL}
    assert first.messages == [UserMessage(text="login again")]
    assert isinstance(second.messages[-1], UserMessage) and "Refused" in second.messages[-1].text
    refusal = third.messages[-1]
    assert (
        isinstance(refusal, ToolResultMessage)
        and refusal.is_error
        and "not both" in refusal.content
    )


async def test_a_failed_model_call_fails_the_run_at_once(tmp_path: Path) -> None:
    rtws = project(
        tmp_path,
        [{"offers_tool": "route_message", "error": {"status": 400, "message": "bad request"}}],
        {},
    )
    rec = await _route(rtws, "anything")
    assert rec.status == "failed" and len(rec.attempts) == 1
    assert rec.error is not None and rec.error.startswith(
        "the Router's model call failed: bad request"
    )


async def test_it_may_ask_which_listed_task_should_continue(tmp_path: Path) -> None:
    """agent-loop §3: an ambiguous message is put to the human ("which task should
    continue?") with the listed ids it could continue; an option that is not listed is
    refused like a guessed id, and one option is no question."""
    rtws = project(
        tmp_path,
        [
            route(
                role="tool",
                match="not the id of a listed task",
                ask_which_task=True,
                question="The login page or the invoices?",
                options=["tasks/login.tsk", "tasks/invoices.tsk"],
            ),
            route(role="tool", match="two or more", ask_which_task=True, options=["x", "y"]),
            route(match="continue", ask_which_task=True, options=["tasks/login.tsk"]),
        ],
        {},
    )
    rec = await _route(rtws, "continue the work")
    assert rec.status == "accepted" and rec.decision is not None, rec.error
    d = rec.decision
    assert d.ask_which_task and d.target_task_id is None and not d.create_new_task
    assert d.options == ["tasks/login.tsk", "tasks/invoices.tsk"]
    assert d.question == "The login page or the invoices?"
    one, unlisted, _ok = rec.attempts
    assert one.error is not None and "two or more" in one.error
    assert unlisted.error is not None and "'x' is not the id of a listed task" in unlisted.error
