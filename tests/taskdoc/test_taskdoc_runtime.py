"""The Taskdoc through the dialog runtime: injection, tool lists, change_mind seen tree-wide.

Issue 4 parts 2-4 end to end on the scripted mock provider, through the public runtime API
(`DialogRuntime` + `Scheduler`); dominds.md acceptance 27, 35, 36. Every request the model
receives is captured, so the assertions are on exactly what a model would see.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.events.types import Event
from mindloop.providers.base import GenerationRequest, StreamEvent
from mindloop.providers.mock import MockProvider
from mindloop.taskdoc import InvalidTaskdocPath, encapsulation_rules, tool_description
from tests.scenario_util import write_script, write_team

TASK = "tasks/example.tsk"
MARK = "MARK7c1e"
NEW_CONSTRAINTS = f"- MUST keep {MARK}"
TEAM: dict[str, dict[str, Any]] = {"dev": {"toolsets": ["*"]}, "pangu": {"toolsets": ["*"]}}


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[GenerationRequest]:
    """Every request the mock provider answers, in order."""
    seen: list[GenerationRequest] = []
    original = MockProvider.stream

    def spy(self: MockProvider, request: GenerationRequest) -> AsyncIterator[StreamEvent]:
        seen.append(request)
        return original(self, request)

    monkeypatch.setattr(MockProvider, "stream", spy)
    return seen


def _tools(req: GenerationRequest) -> set[str]:
    return {t.name for t in req.tools}


def _script(side_call: bool = False) -> list[dict[str, Any]]:
    """Root asks pangu (session `rev`), changes the constraints, then asks pangu again:
    the second answer exists only if pangu's next generation shows the new constraints."""
    side_second: dict[str, Any] = {
        "member": "pangu",
        "contains": "second look",
        "context_contains": [f"## Constraints\n{NEW_CONSTRAINTS}"],
        "response": f"SEEN {MARK}",
    }
    if side_call:  # the side dialog tries change_mind anyway
        side_second["tool_calls"] = [
            {"name": "change_mind", "arguments": {"selector": "progress", "content": "side"}}
        ]
        side_second["response"] = "trying"
    return [
        {
            "member": "dev",
            "match": "go",
            "response": "!?@pangu !tellaskSession rev\n!?first look\n",
        },
        {"member": "pangu", "contains": "first look", "response": "ok first"},
        {
            "member": "dev",
            "contains": "ok first",
            "response": "updating the constraints",
            "tool_calls": [
                {
                    "name": "change_mind",
                    "arguments": {"selector": "constraints", "content": NEW_CONSTRAINTS},
                }
            ],
        },
        {
            "member": "dev",
            "role": "tool",
            "contains": "replaced",
            "response": "!?@pangu !tellaskSession rev\n!?second look\n",
        },
        side_second,
        {"member": "pangu", "role": "tool", "response": "could not"},
        {"member": "dev", "contains": "provided response", "response": "done"},
    ]


async def _run(rtws: Path) -> tuple[DialogRuntime, str]:
    rt = DialogRuntime(rtws)
    rec = rt.create_root_dialog(TASK, "dev")
    rt.post_user_message(rec.id, "go")
    await Scheduler(rt).run()
    return rt, rec.id


# Acceptance 35 (tool lists) and 36 (one file, no new course, every dialog sees it next).
async def test_change_mind_reaches_every_dialog_of_the_tree_next_generation(
    rtws: Path, requests: list[GenerationRequest]
) -> None:
    write_team(rtws, TEAM)
    write_script(rtws, _script())
    pkg_dir = rtws / TASK
    before = {p.name: p.read_bytes() for p in pkg_dir.iterdir()}

    rt = DialogRuntime(rtws)
    observed: list[Event] = []
    rt.bus.subscribe(observed.append)  # an observer (CLI renderer, web UI)
    root = rt.create_root_dialog(TASK, "dev")
    rt.store.set_reminders(root.id, ["keep going"])
    rt.post_user_message(root.id, "go")
    await Scheduler(rt).run()

    history = rt.store.load_history(root.id)
    assert history[-1].data["text"] == "done"
    [side] = [d for d in rt.store.list_dialogs(root_id=root.id) if d.kind == "side"]

    dev = [r for r in requests if r.member == "dev"]
    pangu = [r for r in requests if r.member == "pangu"]
    assert len(dev) == 4 and len(pangu) == 2
    # Root tool lists offer change_mind; side dialog tool lists do not (recall_taskdoc stays).
    assert all("change_mind" in _tools(r) and "recall_taskdoc" in _tools(r) for r in dev)
    assert all("change_mind" not in _tools(r) and "recall_taskdoc" in _tools(r) for r in pangu)
    # Every generation of every dialog carries the canonical copy and the effective Taskdoc.
    for r in requests:
        assert encapsulation_rules("en") in r.system
        assert "# Taskdoc (Dialog Tree)" in r.system
        assert "**Taskdoc:** `tasks/example.tsk`" in r.system
    # The status block says whether this dialog may change the Taskdoc.
    assert all("This dialog may change the Taskdoc: yes" in r.system for r in dev)
    assert all("This dialog may change the Taskdoc: no" in r.system for r in pangu)
    assert all("Taskdoc maintainer (runs `change_mind`): @dev" in r.system for r in requests)
    # Before the change nobody sees it; from the next generation on everybody does.
    assert [MARK in r.system for r in dev] == [False, False, True, True]
    assert [MARK in r.system for r in pangu] == [False, True]

    # Observers are told which section changed, by which dialog.
    changed = [
        (e.dialog_id, e.payload()["section"]) for e in observed if e.type == "taskdoc_changed"
    ]
    assert changed == [(root.id, "constraints.md")]

    # Exactly one file changed, trimmed; the audit names the root member and dialog.
    after = {p.name: p.read_bytes() for p in pkg_dir.iterdir()}
    assert {k for k in after if before.get(k) != after[k]} == {"constraints.md"}
    assert after["constraints.md"] == f"{NEW_CONSTRAINTS}\n".encode()
    [change] = rt.store.taskdoc_history(TASK)
    assert (change.actor_member, change.actor_dialog) == ("dev", root.id)
    assert change.content_before == before["constraints.md"].decode()

    # No new course, reminders kept, history only appended to, no question touched.
    fresh = rt.store.get_dialog(root.id)
    assert fresh.course == root.course and rt.store.get_dialog(side.id).course == side.course
    assert [r.content for r in rt.store.reminders(root.id)] == ["keep going"]
    assert history[0].data["text"] == "go"
    assert rt.store.open_questions() == []
    await rt.aclose()


# Issue part 4: side dialogs get a clear error and nothing is written (acceptance 35).
async def test_change_mind_called_from_a_side_dialog_gets_the_mainline_error(
    rtws: Path, requests: list[GenerationRequest]
) -> None:
    write_team(rtws, TEAM)
    write_script(rtws, _script(side_call=True))
    progress = (rtws / TASK / "progress.md").read_bytes()
    rt, root = await _run(rtws)
    [side] = [d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side"]
    results = [m for m in rt.store.load_history(side.id) if m.kind == "tool_result"]
    assert [m.data["name"] for m in results] == ["change_mind"]
    assert results[0].data["is_error"]
    assert (
        results[0]
        .data["content"]
        .startswith(
            "Error: `change_mind` is only available in the mainline dialog (not in sideline "
            "dialogs). Ask the Taskdoc maintainer @dev"
        )
    )
    assert (rtws / TASK / "progress.md").read_bytes() == progress
    assert [c.section for c in rt.store.taskdoc_history(TASK)] == ["constraints.md"]
    await rt.aclose()


async def test_side_dialog_change_mind_call_changes_nothing(
    rtws: Path, requests: list[GenerationRequest]
) -> None:
    """Whatever the error text, a side dialog's change_mind call writes nothing."""
    write_team(rtws, TEAM)
    write_script(rtws, _script(side_call=True))
    progress = (rtws / TASK / "progress.md").read_bytes()
    rt, root = await _run(rtws)
    [side] = [d for d in rt.store.list_dialogs(root_id=root) if d.kind == "side"]
    results = [m for m in rt.store.load_history(side.id) if m.kind == "tool_result"]
    assert [m.data["name"] for m in results] == ["change_mind"] and results[0].data["is_error"]
    assert (rtws / TASK / "progress.md").read_bytes() == progress
    assert [c.section for c in rt.store.taskdoc_history(TASK)] == ["constraints.md"]
    await rt.aclose()


# Issue part 3: the canonical copy and the Taskdoc in the dialog's work language.
async def test_work_language_zh_prompt_and_tool_copy(
    rtws: Path, requests: list[GenerationRequest]
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["*"]}})
    team_file = rtws / ".minds" / "team.yaml"
    team = yaml.safe_load(team_file.read_text("utf-8"))
    team["work_language"] = "zh"
    team_file.write_text(yaml.safe_dump(team, allow_unicode=True), "utf-8")
    write_script(rtws, [{"member": "dev", "match": "go", "response": "好"}])
    rt, _ = await _run(rtws)
    [req] = requests
    assert encapsulation_rules("zh") in req.system
    assert "# 差遣牒（对话树）" in req.system and "本对话可否修改差遣牒：可以" in req.system
    descriptions = {t.name: t.description for t in req.tools}
    assert descriptions["change_mind"] == tool_description("change_mind", "zh")
    assert descriptions["recall_taskdoc"] == tool_description("recall_taskdoc", "zh")
    assert descriptions["clear_mind"] == tool_description("clear_mind", "zh")
    await rt.aclose()


# Acceptance 27: a path that is not a `*.tsk` directory fails dialog creation clearly.
@pytest.mark.parametrize("task", ["legacy.md", "tasks/x.tsk/goals.md", "../out.tsk"])
def test_root_dialog_needs_a_tsk_package(rtws: Path, task: str) -> None:
    (rtws / "legacy.md").write_text("# Goals\n")
    rt = DialogRuntime(rtws)
    try:
        with pytest.raises(InvalidTaskdocPath, match=r"^Invalid Taskdoc path .*TASKDOC_INVALID"):
            rt.create_root_dialog(task, "dev")
        assert rt.store.list_dialogs() == []
    finally:
        rt.store.close()


# Done means: `mindloop demo` shows a change_mind and the updated Taskdoc in a later
# generation (of the root, and of the teammate's side dialog started after it).
async def test_demo_change_mind_is_seen_in_later_generations(
    tmp_path: Path, requests: list[GenerationRequest]
) -> None:
    from rich.console import Console

    from mindloop.cli.demo_cmd import run_demo
    from mindloop.demo.script import PROGRESS_TEXT

    console = Console(record=True, width=200)
    report = await run_demo(tmp_path / "demo", console)
    shown = console.export_text()
    assert "change_mind" in shown and "Taskdoc section progress.md changed" in shown
    assert report.result.reason != "error"

    injected = f"## Progress\n{PROGRESS_TEXT}\n"
    # Root generations (FBR side dialogs of @dev have no tools).
    dev = [r for r in requests if r.member == "dev" and "change_mind" in _tools(r)]
    seen = [injected in r.system for r in dev]
    first = seen.index(True)
    assert first > 0 and not any(seen[:first]) and all(seen[first:])
    reviewer = [r for r in requests if r.member == "reviewer"]
    assert reviewer and all(injected in r.system for r in reviewer)
    assert all("change_mind" not in _tools(r) for r in reviewer)
    [change] = [c for c in _history(report.rtws) if c.section == "progress.md"]
    assert (change.actor_member, change.actor_dialog) == ("dev", report.dialog_id)


def _history(rtws: Path) -> list[Any]:
    from mindloop.store import Store

    store = Store.for_rtws(rtws)
    try:
        return store.taskdoc_history(TASK)
    finally:
        store.close()
