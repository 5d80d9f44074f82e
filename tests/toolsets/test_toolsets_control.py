"""Dialog-control tools as a model uses them, through the runtime: reminders (add with a
position, update, delete, every bad input an error that changes nothing) and where the
reminders appear in the next generation's context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.providers.base import GenerationRequest, UserMessage
from mindloop.rtws import init_rtws
from tests.scenario_util import write_script, write_team


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def _drive(
    rtws: Path, steps: list[list[dict[str, Any]]]
) -> tuple[DialogRuntime, str, list[GenerationRequest]]:
    """The model calls `steps[i]` in generation i+1, then answers "done"."""
    entries: list[dict[str, Any]] = [{"match": "go", "tool_calls": steps[0]}]
    for i, calls in enumerate(steps[1:], start=1):
        entries.append({"role": "tool", "context_contains": f"[step {i}]", "tool_calls": calls})
    init_rtws(rtws, provider="mock")
    write_team(rtws, {"dev": {"toolsets": ["control"]}})
    script = [{**e, "response": f"[step {i + 1}]"} for i, e in enumerate(entries)]
    # Entries are tried in order: the latest step first, so each generation moves on.
    write_script(
        rtws,
        [
            {"role": "tool", "context_contains": f"[step {len(steps)}]", "response": "done"},
            *reversed(script),
        ],
    )
    rt = DialogRuntime(rtws)
    seen: list[GenerationRequest] = []
    stream = rt.providers.stream

    def spy(provider: str, req: GenerationRequest) -> Any:
        seen.append(req)
        return stream(provider, req)

    rt.providers.stream = spy  # type: ignore[method-assign]
    rec = rt.create_root_dialog("tasks/example.tsk")
    rt.post_user_message(rec.id, "go")
    await Scheduler(rt).run()
    return rt, rec.id, seen


def _results(rt: DialogRuntime, did: str) -> list[tuple[bool, str]]:
    return [
        (m.data["is_error"], m.data["content"])
        for m in rt.store.load_history(did)
        if m.kind == "tool_result"
    ]


async def test_add_update_delete_and_bad_input_changes_nothing(tmp_path: Path) -> None:
    rt, did, _ = await _drive(
        tmp_path / "p",
        [
            [
                _call("add_reminder", content="a"),
            ],
            [_call("add_reminder", content="b", position=1)],
            [_call("add_reminder", content="c", position=9)],  # out of range
            [_call("add_reminder", content="   ")],  # blank
            [_call("update_reminder", reminder_no=2, content="a2")],
            [_call("update_reminder", reminder_no=3, content="x")],  # no such reminder
            [_call("update_reminder", reminder_no=0, content="x")],  # not 1-based
            [_call("delete_reminder", reminder_no=5)],  # no such reminder
            [_call("delete_reminder", reminder_no=1)],
        ],
    )
    results = _results(rt, did)
    assert [ok for ok, _ in results] == [False, False, True, True, False, True, True, True, False]
    texts = [t for _, t in results]
    assert texts[0].startswith("added reminder 1") and texts[1].startswith("added reminder 1")
    assert texts[2].startswith("Error: position 9 is out of range: there are 2 reminder(s)")
    assert texts[3] == "Error: reminder content is required (content)."
    assert texts[4] == "updated reminder 2\nreminders:\n1. b\n2. a2"
    assert texts[5] == "Error: no reminder 3 (there are 2)."
    assert "reminder_no" in texts[6]  # argument validation names the argument
    assert texts[7] == "Error: no reminder 5 (there are 2)."
    assert texts[8] == "deleted reminder 1\nreminders:\n1. a2"
    assert [r.content for r in rt.store.reminders(did)] == ["a2"]
    assert rt.store.load_history(did)[-1].data["text"] == "done"
    await rt.aclose()


async def test_reminders_are_shown_just_before_the_last_user_message(tmp_path: Path) -> None:
    rt, did, seen = await _drive(
        tmp_path / "p",
        [
            [
                _call("add_reminder", content="keep it short"),
                _call("add_reminder", content="cite files"),
            ]
        ],
    )
    assert not any("[reminders]" in getattr(m, "text", "") for m in seen[0].messages)
    later = seen[-1].messages
    users = [i for i, m in enumerate(later) if isinstance(m, UserMessage)]
    note, last = later[users[-2]], later[users[-1]]
    assert users[-2] == users[-1] - 1
    assert (
        isinstance(note, UserMessage)
        and note.text == "[reminders]\n1. keep it short\n2. cite files"
    )
    assert isinstance(last, UserMessage) and last.text == "go"
    # Rendered, never persisted: the stored history has no reminder message.
    assert not any("[reminders]" in m.data.get("text", "") for m in rt.store.load_history(did))
    await rt.aclose()
