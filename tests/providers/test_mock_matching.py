"""Which script entry answers a request: matchers, filters, order."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    GenerationRequest,
    ProviderError,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mindloop.providers.mock import MockProvider


def write_script(tmp_path: Path, body: str, model: str = "m") -> MockProvider:
    (tmp_path / f"{model}.yaml").write_text(body, encoding="utf-8")
    return MockProvider("mock", tmp_path)


def request(
    *messages: ChatMessage | str, member: str | None = None, system: str = "You are helpful."
) -> GenerationRequest:
    msgs = [UserMessage(text=m) if isinstance(m, str) else m for m in messages]
    return GenerationRequest(model="m", system=system, messages=msgs, member=member)


async def answer(provider: MockProvider, req: GenerationRequest) -> str:
    """The streamed text, or the marker UNMATCHED when the script has no answer."""
    try:
        events: list[StreamEvent] = [e async for e in provider.stream(req)]
    except ProviderError as exc:
        if str(exc).startswith("🤖 Mock Response Not Found"):
            return "UNMATCHED"
        raise
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("list the files", "A"),
        ("  List   THE\n files \t", "A"),
        ("list the files please", "UNMATCHED"),
        ("list files", "UNMATCHED"),
    ],
)
async def test_exact_match_is_trimmed_case_insensitive_and_whitespace_collapsed(
    tmp_path: Path, text: str, expected: str
) -> None:
    provider = write_script(tmp_path, 'responses:\n  - match: "List the  files"\n    response: A\n')
    assert await answer(provider, request(text)) == expected


async def test_contains_single_string_and_list_need_all_parts(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - contains: ["readme", "summar"]
    response: both
  - contains: "README"
    response: one
""",
    )
    assert await answer(provider, request("Please SUMMARISE the readme.md")) == "both"
    assert await answer(provider, request("open readme")) == "one"
    assert await answer(provider, request("open the docs")) == "UNMATCHED"


async def test_contains_collapses_whitespace_on_both_sides(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path, 'responses:\n  - contains: "hello   world"\n    response: ok\n'
    )
    assert await answer(provider, request("say Hello\n\n  WORLD now")) == "ok"


async def test_regex_uses_search_with_dotall_on_the_raw_text(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - regex: 'start.*end'
    response: dotall
  - regex: '\\d{3}-\\d{4}'
    response: phone
""",
    )
    assert await answer(provider, request("start\nmiddle\nend")) == "dotall"
    assert await answer(provider, request("call 555-1234 today")) == "phone"
    assert await answer(provider, request("START END")) == "UNMATCHED"  # case-sensitive


async def test_member_filter(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: hi
    member: alice
    response: from alice
  - match: hi
    member: bob
    response: from bob
""",
    )
    assert await answer(provider, request("hi", member="alice")) == "from alice"
    assert await answer(provider, request("hi", member="bob")) == "from bob"
    assert await answer(provider, request("hi", member="carol")) == "UNMATCHED"
    assert await answer(provider, request("hi")) == "UNMATCHED"


async def test_member_filter_alone_is_a_catch_all_for_that_member(tmp_path: Path) -> None:
    provider = write_script(tmp_path, "responses:\n  - member: reviewer\n    response: LGTM\n")
    assert await answer(provider, request("anything at all", member="reviewer")) == "LGTM"
    assert await answer(provider, request("anything at all", member="dev")) == "UNMATCHED"


async def test_role_filter_distinguishes_user_text_from_tool_results(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - contains: done
    role: tool
    response: tool said done
  - contains: done
    role: user
    response: user said done
""",
    )
    call = ToolCall(id="call_1", name="shell", arguments="{}")
    tool_dialog = request(
        "run it",
        AssistantMessage(tool_calls=[call]),
        ToolResultMessage(call_id="call_1", name="shell", content="DONE (exit 0)"),
    )
    assert await answer(provider, tool_dialog) == "tool said done"
    assert await answer(provider, request("I am done")) == "user said done"


async def test_last_message_text_of_an_assistant_message_is_matched(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        "responses:\n  - match: previous answer\n    role: assistant\n    response: go on\n",
    )
    req = request("question", AssistantMessage(text="Previous  answer"))
    assert await answer(provider, req) == "go on"


async def test_context_contains_searches_system_prompt_and_whole_history(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - match: next
    context_contains: ["you are the reviewer", "read_file", "step one"]
    response: reviewer next
  - match: next
    response: plain next
""",
    )
    call = ToolCall(id="call_1", name="read_file", arguments='{"path": "a"}')
    history = request(
        "Step   One",
        AssistantMessage(text="ok", tool_calls=[call]),
        ToolResultMessage(call_id="call_1", name="read_file", content="x"),
        "next",
        system="You are the REVIEWER.",
    )
    assert await answer(provider, history) == "reviewer next"
    assert await answer(provider, request("step one", "next")) == "plain next"


async def test_first_matching_entry_in_file_order_wins(tmp_path: Path) -> None:
    provider = write_script(
        tmp_path,
        """responses:
  - contains: files
    response: first
  - match: list the files
    response: second
  - default: true
    response: fallback
""",
    )
    assert await answer(provider, request("list the files")) == "first"
    assert await answer(provider, request("something else")) == "fallback"


async def test_default_entry_answers_a_request_without_messages(tmp_path: Path) -> None:
    provider = write_script(tmp_path, "responses:\n  - default: true\n    response: hello\n")
    empty = GenerationRequest(model="m", system="s", messages=[])
    assert await answer(provider, empty) == "hello"


async def test_each_model_reads_its_own_script(tmp_path: Path) -> None:
    (tmp_path / "small.yaml").write_text("responses:\n  - default: true\n    response: small\n")
    (tmp_path / "big.yaml").write_text("responses:\n  - default: true\n    response: big\n")
    provider = MockProvider("mock", tmp_path)
    small = GenerationRequest(model="small", system="", messages=[UserMessage(text="x")])
    big = GenerationRequest(model="big", system="", messages=[UserMessage(text="x")])
    assert await answer(provider, small) == "small"
    assert await answer(provider, big) == "big"
