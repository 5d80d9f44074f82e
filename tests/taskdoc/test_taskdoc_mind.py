"""change_mind / recall_taskdoc / section_status: rejections write nothing, audit is exact."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from taskdoc_testutil import audit_snapshot, make_package, tree_snapshot, write

from mindloop.store import Store, TaskdocChange
from mindloop.taskdoc import (
    SectionError,
    TaskPackage,
    change_mind,
    mismatches,
    recall_taskdoc,
    reconcile,
    render_effective_taskdoc,
    section_status,
)
from mindloop.taskdoc.fsio import sha256_text, write_temp

PAT = r"^[a-zA-Z][a-zA-Z0-9_-]*(\.[a-zA-Z0-9_-]+)*$"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state" / "state.sqlite", durable=False)
    yield s
    s.close()


def cm(pkg: TaskPackage, store: Store, **kw: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "actor_member": "lead",
        "actor_dialog": "d-root",
        "is_root": True,
        "store": store,
    }
    args.update(kw)
    return change_mind(pkg, **args)  # type: ignore[arg-type]


REJECTIONS: list[tuple[dict[str, object], str]] = [
    (
        {"selector": "goals", "category": "bearinmind", "content": "x"},
        "Error: Selector 'goals' is reserved for top-level sections (goals/constraints/progress) "
        "and must not be used with category='bearinmind'.",
    ),
    (
        {"selector": "grants", "content": "x"},
        "Error: Invalid selector 'grants'. Use: top-level goals|constraints|progress; under "
        "bearinmind: contracts|acceptance|grants|runbook|decisions|risks; or any identifier "
        "(e.g. `ux.checklist`).",
    ),
    (
        {"selector": "risks", "category": "ux", "content": "x"},
        "Error: Selector 'risks' is only valid under category='bearinmind' (got category='ux').",
    ),
    (
        {"selector": "x", "category": "9bad", "content": "x"},
        f"Error: Invalid category '9bad'. Must match `{PAT}`.",
    ),
    (
        {"selector": "bad selector", "category": "ux", "content": "x"},
        f"Error: Invalid category selector 'bad selector'. Must match `{PAT}`.",
    ),
    ({"selector": "", "content": "x"}, "Error: selector is required."),
    ({"selector": None, "content": "x"}, "Error: selector is required."),
    ({"selector": "notes", "category": "workspace", "content": "x"}, "Error: Category 'workspace'"),
    ({"selector": "notes", "category": "../etc", "content": "x"}, "Error: Invalid category"),
    ({"selector": "progress", "content": "   "}, "Error: Taskdoc content is required (content)."),
    ({"selector": "progress", "content": ""}, "Error: Taskdoc content is required (content)."),
    ({"selector": "progress", "content": None}, "Error: Taskdoc content is required (content)."),
    (
        {"selector": "progress", "content": "x", "is_root": False},
        "Error: `change_mind` is only available in the mainline dialog (not in sideline "
        "dialogs). Ask the Taskdoc maintainer @lead ",
    ),
]


# Acceptance 33, 34, 35 (error part): each rejection, exact text, nothing written.
@pytest.mark.parametrize(("kwargs", "text"), REJECTIONS)
def test_rejections_write_nothing(
    tmp_path: Path, store: Store, kwargs: dict[str, object], text: str
) -> None:
    pkg = make_package(tmp_path, goals="g\n", progress="old\n")
    cm(pkg, store, selector="constraints", content="seed")
    before_tree, before_audit = tree_snapshot(tmp_path / "tasks"), audit_snapshot(store)
    result = cm(pkg, store, maintainer="lead", **kwargs)
    assert not result.ok and result.change is None
    assert result.text.startswith(text)
    if text.endswith("."):
        assert result.text == text or text.startswith("Error: Taskdoc content")
    assert tree_snapshot(tmp_path / "tasks") == before_tree
    assert audit_snapshot(store) == before_audit


def test_blank_content_error_has_example(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path)
    text = cm(pkg, store, selector="progress", content="\n \t").text
    assert text.splitlines()[0] == "Error: Taskdoc content is required (content)."
    assert '"selector": "progress"' in text


# Acceptance 36: one file, trimmed, nothing else touched; visible in the next message.
def test_change_writes_exactly_one_file_trimmed(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path, goals="g\n", constraints="old\n", progress="p\n")
    side_view = render_effective_taskdoc(pkg, is_root=False, maintainer="lead")
    before = tree_snapshot(pkg.path)
    result = cm(pkg, store, selector="!constraints", content="\n  - MUST x\n\n")
    assert result.ok and result.section == "constraints.md"
    after = tree_snapshot(pkg.path)
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed == {"constraints.md"}
    assert (pkg.path / "constraints.md").read_text() == "- MUST x\n"
    assert "no new course" in result.text
    new_side_view = render_effective_taskdoc(pkg, is_root=False, maintainer="lead")
    assert new_side_view != side_view and "## Constraints\n- MUST x\n" in new_side_view


def test_change_creates_bearinmind_and_extra_sections(tmp_path: Path, store: Store) -> None:
    pkg = TaskPackage(tmp_path, "tasks/new.tsk")
    assert cm(pkg, store, selector="grants", category="bearinmind", content="- ok").ok
    assert cm(pkg, store, selector="checklist", category="ux", content="c").ok
    assert (pkg.path / "bearinmind" / "grants.md").read_text() == "- ok\n"
    assert (pkg.path / "ux" / "checklist.md").read_text() == "c\n"


def test_symlinked_category_cannot_escape(tmp_path: Path, store: Store) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    pkg = make_package(tmp_path)
    (pkg.path / "ux").symlink_to(outside)
    before_audit = audit_snapshot(store)
    result = cm(pkg, store, selector="checklist", category="ux", content="c")
    assert not result.ok and "not a plain directory" in result.text
    assert list(outside.iterdir()) == []
    assert audit_snapshot(store) == before_audit


def test_package_swapped_for_a_symlink_is_not_written(tmp_path: Path, store: Store) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    pkg = make_package(tmp_path, goals="g\n")  # opened while it was a plain directory
    real = pkg.path.rename(tmp_path / "moved.tsk")
    pkg.path.symlink_to(outside)
    result = cm(pkg, store, selector="progress", content="p")
    assert not result.ok and "not a plain directory" in result.text
    assert list(outside.iterdir()) == [] and (real / "goals.md").exists()
    assert audit_snapshot(store) == []


# Acceptance 58 / decision 5: actor, time, section, hashes, previous content.
def test_audit_history(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path, progress="v0\n")
    cm(pkg, store, selector="progress", content="v1", actor_member="alice", actor_dialog="d1")
    cm(pkg, store, selector="progress", content="v2", actor_member="bob", actor_dialog="d2")
    cm(pkg, store, selector="goals", content="g1")
    hist = store.taskdoc_history("tasks/t.tsk", "progress.md")
    assert [(h.actor_member, h.actor_dialog) for h in hist] == [("alice", "d1"), ("bob", "d2")]
    assert [h.content_before for h in hist] == ["v0\n", "v1\n"]
    assert [h.content_after for h in hist] == ["v1\n", "v2\n"]
    assert hist[0].hash_before == sha256_text("v0\n")
    assert hist[0].hash_after == sha256_text("v1\n") == hist[1].hash_before
    assert hist[0].ts <= hist[1].ts
    goals = store.taskdoc_history("tasks/t.tsk", "goals.md")
    assert goals[0].hash_before is None and goals[0].content_before is None


def test_section_status_actor_and_outside_changes(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path, goals="human wrote\n")
    cm(pkg, store, selector="progress", content="p", actor_member="alice", actor_dialog="d1")
    status = {s.section: s for s in section_status(pkg, store)}
    assert status["progress.md"].actor_member == "alice"
    assert status["progress.md"].actor_dialog == "d1" and not status["progress.md"].changed_outside
    assert status["goals.md"].actor_member == "human/unknown" and status["goals.md"].changed_outside
    assert not status["constraints.md"].exists and status["constraints.md"].updated_at is None
    assert not status["bearinmind/risks.md"].exists
    (pkg.path / "progress.md").write_text("edited by hand\n")
    edited = {s.section: s for s in section_status(pkg, store)}["progress.md"]
    assert edited.changed_outside and edited.actor_member == "human/unknown"
    assert (pkg.path / "progress.md").read_text() == "edited by hand\n"  # never overwritten


def _record(store: Store, pkg: TaskPackage, before: str, after: str) -> None:
    store.record_taskdoc_change(
        TaskdocChange(
            task_path=pkg.rel_path,
            section="progress.md",
            actor_member="alice",
            actor_dialog="d1",
            ts=time.time(),
            hash_before=sha256_text(before),
            hash_after=sha256_text(after),
            content_before=before,
            content_after=after,
        )
    )


def test_crash_between_audit_and_replace_is_rolled_forward(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path, progress="old\n")
    # The state a kill leaves between the commit and the replace: the record, and the
    # temp file holding its content (the crash tests make it with a real process).
    write_temp(pkg.path, "new\n")
    _record(store, pkg, "old\n", "new\n")
    assert [m.kind for m in mismatches(pkg, store)] == ["interrupted"]
    status = {s.section: s for s in section_status(pkg, store)}["progress.md"]
    assert (pkg.path / "progress.md").read_text() == "new\n"
    assert status.actor_member == "alice" and not status.changed_outside
    assert sorted(p.name for p in pkg.path.iterdir()) == ["progress.md"]  # temp consumed
    assert reconcile(pkg, store) == []  # idempotent
    assert mismatches(pkg, store) == []


def test_record_without_its_temp_is_an_outside_edit(tmp_path: Path, store: Store) -> None:
    """Only the temp file proves a replace is pending: without it the file was changed
    by someone else after the change, and is reported, never overwritten."""
    pkg = make_package(tmp_path, progress="old\n")
    _record(store, pkg, "old\n", "new\n")
    assert reconcile(pkg, store) == []
    assert section_status(pkg, store)[2].changed_outside
    assert (pkg.path / "progress.md").read_text() == "old\n"
    [m] = mismatches(pkg, store)
    assert m.kind == "changed_outside" and "changed outside mindloop" in m.describe("tasks/t.tsk")


def test_stray_temp_without_record_is_removed_on_read(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path, progress="old\n")
    write_temp(pkg.path, "never committed\n")
    assert reconcile(pkg, store) == []
    assert sorted(p.name for p in pkg.path.iterdir()) == ["progress.md"]
    assert (pkg.path / "progress.md").read_text() == "old\n"


def test_human_revert_after_change_is_not_rolled_forward(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path, progress="old\n")
    cm(pkg, store, selector="progress", content="new")
    target = pkg.path / "progress.md"
    target.write_text("old\n")
    assert reconcile(pkg, store) == []
    assert target.read_text() == "old\n"
    assert [m.kind for m in mismatches(pkg, store)] == ["changed_outside"]


# Acceptance 32 (read part), 37, 56.
def test_recall_taskdoc(tmp_path: Path) -> None:
    pkg = make_package(tmp_path, ux__checklist="- [ ] a\n", bearinmind__risks="R\n")
    assert recall_taskdoc(pkg, category="ux", selector="checklist") == (
        "**recall_taskdoc:** `ux/checklist.md`\n\n---\n- [ ] a\n\n---"
    )
    assert "R\n" in recall_taskdoc(pkg, category="bearinmind", selector="risks")
    missing = recall_taskdoc(pkg, category="ux", selector="none")
    assert missing.startswith("Not found: `ux/none.md`.")
    assert 'change_mind({"category":"ux","selector":"none","content":"..."})' in missing
    with pytest.raises(SectionError, match=r"^Error: category is required\.$"):
        recall_taskdoc(pkg, category="", selector="checklist")
    with pytest.raises(SectionError, match=r"^Error: selector is required\.$"):
        recall_taskdoc(pkg, category="ux", selector=" ")
    for top in ("goals", "constraints", "progress"):
        for category in (None, "", "bearinmind", "ux"):
            with pytest.raises(SectionError) as info:
                recall_taskdoc(pkg, category=category, selector=top)
            assert "always injected" in info.value.text


def test_recall_truncates_over_100_kib(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    write(pkg.path, "ux/big.md", "y" * (100 * 1024 + 10))
    text = recall_taskdoc(pkg, category="ux", selector="big")
    assert text.endswith(
        "⚠️ Truncated: content is too large (102410 bytes); showing first 102400 bytes."
    )
    assert text.split("\n---")[1].count("y") == 100 * 1024


def test_recall_never_creates(tmp_path: Path) -> None:
    pkg = TaskPackage(tmp_path, "tasks/none.tsk")
    recall_taskdoc(pkg, category="ux", selector="x")
    assert not pkg.path.exists()


# Reliability bar: oversized content gets a clear error naming the argument, nothing written.
def test_oversized_section_content_is_rejected(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path, goals="g\n")
    before_tree, before_audit = tree_snapshot(tmp_path / "tasks"), audit_snapshot(store)
    for selector, category in (("progress", None), ("notes", "ux")):
        # Stored as trimmed text plus one final newline: 102,401 bytes.
        result = cm(pkg, store, selector=selector, category=category, content="x" * 102_400)
        assert not result.ok
        assert result.text.startswith(
            "Error: Taskdoc content is too large (content: 102401 bytes); one section holds "
            "at most 102400 bytes. Nothing was written"
        )
    assert cm(pkg, store, selector="notes", category="ux", content="x" * 102_399).ok
    assert audit_snapshot(store) != before_audit
    assert tree_snapshot(tmp_path / "tasks") != before_tree


def test_change_that_would_stop_injection_is_rejected(tmp_path: Path, store: Store) -> None:
    pkg = make_package(tmp_path, goals="g" * 60_000, constraints="c\n")
    before_tree, before_audit = tree_snapshot(tmp_path / "tasks"), audit_snapshot(store)
    for selector, category in (("constraints", None), ("risks", "bearinmind")):
        result = cm(pkg, store, selector=selector, category=category, content="y" * 50_000)
        assert not result.ok
        assert "over the 102400-byte limit" in result.text and "Nothing was written" in result.text
    assert tree_snapshot(tmp_path / "tasks") == before_tree
    assert audit_snapshot(store) == before_audit
    # Extra sections are not injected: they do not count towards the body.
    assert cm(pkg, store, selector="big", category="ux", content="y" * 50_000).ok
    # A body already too large (a human wrote it) may still be shrunk or kept the same size.
    write(pkg.path, "progress.md", "p" * 50_000)
    assert "too large to inline" in render_effective_taskdoc(pkg, is_root=True, maintainer="m")
    assert cm(pkg, store, selector="goals", content="short").ok
    assert "## Goals\nshort\n" in render_effective_taskdoc(pkg, is_root=True, maintainer="m")
