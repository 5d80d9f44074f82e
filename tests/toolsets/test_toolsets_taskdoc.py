"""The change_mind / recall_taskdoc Tools as the engine calls them, and the canonical copy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mindloop.store import Store
from mindloop.store.records import DialogRecord, QuestionRecord
from mindloop.taskdoc import encapsulation_rules, tool_description
from mindloop.tools.base import Tool, ToolContext
from mindloop.toolsets.taskdoc import ROOT_ONLY_TOOLS, StoreTaskdocAudit, taskdoc_tools
from tests.taskdoc.taskdoc_testutil import make_package, tree_snapshot


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state.sqlite", durable=False)
    yield s
    s.close()


def tools() -> dict[str, Tool[Any]]:
    return {t.name: t for t in taskdoc_tools()}


def ctx(tmp_path: Path, db: Store | None, *, is_root: bool = True, **fields: Any) -> ToolContext:
    base: dict[str, Any] = {
        "task_path": "tasks/t.tsk",
        "taskdoc_audit": StoreTaskdocAudit(db) if db is not None else None,
        "root_member": "lead",
    }
    base.update(fields)
    return ToolContext.for_test(tmp_path, member="worker", dialog_id="d-1", is_root=is_root, **base)


def test_tool_list_and_root_only_set() -> None:
    assert set(tools()) == {"change_mind", "recall_taskdoc"}
    assert {"change_mind"} == set(ROOT_ONLY_TOOLS)
    # Acceptance 35: a side dialog's list (filtered by the engine) excludes change_mind.
    side = [t.name for t in taskdoc_tools() if t.name not in ROOT_ONLY_TOOLS]
    assert side == ["recall_taskdoc"]
    schema = tools()["change_mind"].schema()
    assert set(schema["required"]) == {"selector", "content"}
    # A model asking for `goals` has no category to give: it must get the "always
    # injected" answer, not a missing-argument error (DESIGN.md decision 6).
    assert set(tools()["recall_taskdoc"].schema()["required"]) == {"selector"}


async def test_change_mind_tool_records_actor_and_calls_hook(tmp_path: Path, store: Store) -> None:
    make_package(tmp_path, progress="old")
    seen: list[str] = []
    tool = tools()["change_mind"]
    out = await tool.run(
        tool.args_model(selector="progress", content="new"),
        ctx(tmp_path, store, on_taskdoc_changed=seen.append),
    )
    assert not out.is_error
    [change] = store.taskdoc_history("tasks/t.tsk")
    assert (change.actor_member, change.actor_dialog) == ("worker", "d-1")
    assert seen == ["progress.md"]


async def test_change_mind_tool_in_side_dialog(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path, progress="old")
    before = tree_snapshot(pkg.path)
    called: list[object] = []
    tool = tools()["change_mind"]
    out = await tool.run(
        tool.args_model(selector="progress", content="new"),
        ctx(tmp_path, store, is_root=False, on_taskdoc_changed=called.append),
    )
    assert out.is_error
    assert out.text.startswith(
        "Error: `change_mind` is only available in the mainline dialog (not in sideline "
        "dialogs). Ask the Taskdoc maintainer @lead"
    )
    assert tree_snapshot(pkg.path) == before and called == []
    assert store.taskdoc_history("tasks/t.tsk") == []


async def test_tools_fail_clearly_without_services(tmp_path: Path, store: Store) -> None:
    tool = tools()["change_mind"]
    out = await tool.run(
        tool.args_model(selector="progress", content="x"), ctx(tmp_path, store, task_path=None)
    )
    assert out.is_error and "No Taskdoc is bound" in out.text
    out = await tool.run(tool.args_model(selector="progress", content="x"), ctx(tmp_path, None))
    assert out.is_error and "store" in out.text


async def test_recall_tool(tmp_path: Path, store: Store) -> None:
    make_package(tmp_path, ux__checklist="c")
    tool = tools()["recall_taskdoc"]
    ok = await tool.run(tool.args_model(category="ux", selector="checklist"), ctx(tmp_path, store))
    assert not ok.is_error and "`ux/checklist.md`" in ok.text
    bad = await tool.run(tool.args_model(category="", selector="x"), ctx(tmp_path, store))
    assert bad.is_error and bad.text == "Error: category is required."
    top = await tool.run(tool.args_model(category="x", selector="goals"), ctx(tmp_path, store))
    assert top.is_error and "always injected" in top.text
    missing = await tool.run(
        tool.args_model(category="ux", selector="none"), ctx(tmp_path, store, is_root=False)
    )
    assert not missing.is_error and missing.text.startswith("Not found: `ux/none.md`.")
    assert "ask the Taskdoc maintainer @lead" in missing.text
    root_missing = await tool.run(
        tool.args_model(category="ux", selector="none"), ctx(tmp_path, store)
    )
    assert "Use `change_mind` to create/update it" in root_missing.text
    zh = await tool.run(
        tool.args_model(category="", selector="x"), ctx(tmp_path, store, work_language="zh")
    )
    assert zh.is_error and "category" in zh.text and zh.text.startswith("错误")


async def test_recall_without_a_category(tmp_path: Path, store: Store) -> None:
    make_package(tmp_path, bearinmind__risks="r")
    tool = tools()["recall_taskdoc"]
    top = await tool.run(tool.args_model(selector="goals"), ctx(tmp_path, store))
    assert top.is_error and "always injected" in top.text
    other = await tool.run(tool.args_model(selector="risks"), ctx(tmp_path, store))
    assert other.is_error and "category" in other.text


def assert_states_encapsulation_and_injection(text: str, lang: str) -> None:
    """The two things the seed's canonical copy must make explicit, with its semantics."""
    for needle in (
        "**/*.tsk/**",
        "read_file",
        "write_file",
        "list_dir",
        "change_mind",
        "recall_taskdoc",
        "`goals.md`、`constraints.md`、`progress.md`"
        if lang == "zh"
        else "`goals.md`, `constraints.md`, `progress.md`",
        "## Bear In Mind",
        "## Constraints",
        "## Progress",
    ):
        assert needle in text, needle
    assert text.index("## Constraints") < text.index("## Progress")
    order = ["contracts.md", "acceptance.md", "grants.md", "runbook.md", "decisions.md", "risks.md"]
    positions = [text.index(f"`{name}`") for name in order]
    assert positions == sorted(positions)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_canonical_copy_states_encapsulation_and_injection(lang: str) -> None:
    text = encapsulation_rules(lang)  # type: ignore[arg-type]
    assert_states_encapsulation_and_injection(text, lang)
    assert "recall_taskdoc({ category, selector })" in text


# Seed: "any tool documentation shown to agents MUST make [both] explicit".
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", ["change_mind", "recall_taskdoc"])
def test_tool_descriptions_state_encapsulation_and_injection(name: str, lang: str) -> None:
    text = tool_description(name, lang)  # type: ignore[arg-type]
    assert_states_encapsulation_and_injection(text, lang)
    [tool] = [t for t in taskdoc_tools(lang) if t.name == name]  # type: ignore[arg-type]
    assert tool.description == text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tool_descriptions(lang: str) -> None:
    change = tool_description("change_mind", lang)  # type: ignore[arg-type]
    assert "`*.tsk/`" in change and "clear_mind" in change
    recall = tool_description("recall_taskdoc", lang)  # type: ignore[arg-type]
    assert "*.tsk/**" in recall and "goals/constraints/progress" in recall
    # Part 6: clear_mind is documented alongside, as the separate course-control tool.
    clear = tool_description("clear_mind", lang)  # type: ignore[arg-type]
    assert "change_mind" in clear and "reminder_content" in clear
    assert tools()["change_mind"].description == tool_description("change_mind", "en")


# Acceptance 36: change_mind leaves course, messages, reminders and Q4H of the dialog as
# they were (it starts no new course); only the section file and its audit record change.
async def test_change_mind_leaves_course_messages_reminders_and_q4h(
    tmp_path: Path, store: Store
) -> None:
    make_package(tmp_path, constraints="old\n")
    store.create_dialog(
        DialogRecord(id="d-1", root_id="d-1", member="worker", task_path="tasks/t.tsk", course=2)
    )
    store.append_message("d-1", "user", {"text": "hi"}, course=2)
    store.set_reminders("d-1", ["remember"])
    store.add_question(
        QuestionRecord(
            id="q4h-1",
            dialog_id="d-1",
            root_id="d-1",
            headline="@human x",
            body="y",
            call_id="c",
            course=2,
        )
    )

    def state() -> tuple[object, ...]:
        return (
            store.get_dialog("d-1").model_dump(exclude={"updated_at"}),
            [m.model_dump() for m in store.load_history("d-1")],
            [r.model_dump() for r in store.reminders("d-1")],
            [q.model_dump() for q in store.open_questions()],
        )

    before = state()
    tool = tools()["change_mind"]
    out = await tool.run(
        tool.args_model(selector="constraints", content="- MUST x\n"), ctx(tmp_path, store)
    )
    assert not out.is_error
    assert state() == before
    assert (tmp_path / "tasks/t.tsk/constraints.md").read_text() == "- MUST x\n"
    assert len(store.taskdoc_history("tasks/t.tsk")) == 1
