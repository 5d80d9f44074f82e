"""The human's side of a Taskdoc (`taskdoc.human`): an edit is audited as `human`, made
only if the section still holds the text it started from, and refused with the same
words as `change_mind` otherwise; created sections start their history."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindloop.errors import MindloopError
from mindloop.store import Store
from mindloop.taskdoc import TaskPackage, section_status
from mindloop.taskdoc.human import (
    HUMAN_ACTOR,
    EditConflict,
    content_hash,
    edit_section,
    maintainer,
)
from mindloop.taskdoc.mind import record_created


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.for_rtws(tmp_path)
    yield s
    s.close()


@pytest.fixture
def pkg(tmp_path: Path, store: Store) -> TaskPackage:
    rtws = tmp_path / "rtws"
    rtws.mkdir()
    made = TaskPackage.create(rtws, "login", goal="Users can log in", constraints=["No cookies"])
    record_created(made, store, HUMAN_ACTOR)
    return made


def test_created_sections_start_their_history_as_written_by_the_human(
    pkg: TaskPackage, store: Store
) -> None:
    statuses = {s.section: s for s in section_status(pkg, store)}
    for rel in ("goals.md", "constraints.md", "progress.md"):
        assert statuses[rel].actor_member == "human", rel
        assert not statuses[rel].changed_outside
    assert [c.section for c in store.taskdoc_history(pkg.rel_path)] == [
        "goals.md",
        "constraints.md",
        "progress.md",
    ]


def test_an_edit_from_the_current_text_is_recorded_with_the_human_as_actor(
    pkg: TaskPackage, store: Store
) -> None:
    before = pkg.read_section("goals.md")
    change = edit_section(
        pkg,
        "goals",
        "Users can log in with a passkey",
        store=store,
        expected_hash=content_hash(before),
    )
    assert (change.actor_member, change.actor_dialog) == ("human", None)
    assert change.content_before == before
    assert pkg.read_section("goals.md") == "Users can log in with a passkey\n"
    assert store.taskdoc_history(pkg.rel_path, "goals.md")[-1].id == change.id


def test_an_edit_from_a_text_changed_meanwhile_is_refused_and_writes_nothing(
    pkg: TaskPackage, store: Store
) -> None:
    stale = content_hash(pkg.read_section("progress.md"))
    edit_section(pkg, "progress", "- agent: started", store=store, expected_hash=None)
    count = len(store.taskdoc_history(pkg.rel_path))
    with pytest.raises(EditConflict, match="changed since this edit started \\(by human\\)"):
        edit_section(pkg, "progress", "- my stale text", store=store, expected_hash=stale)
    assert pkg.read_section("progress.md") == "- agent: started\n"
    assert len(store.taskdoc_history(pkg.rel_path)) == count


def test_a_section_created_by_the_edit_starts_from_empty(pkg: TaskPackage, store: Store) -> None:
    change = edit_section(
        pkg, "bearinmind/risks", "- none yet", store=store, expected_hash=content_hash(None)
    )
    assert change.section == "bearinmind/risks.md" and change.hash_before is None


@pytest.mark.parametrize(
    ("section", "content", "words"),
    [
        ("goals", "   ", "content is required"),
        ("risks", "x", "bearinmind"),
        ("nope/../goals", "x", "section"),
    ],
)
def test_what_change_mind_refuses_is_refused_naming_the_section(
    pkg: TaskPackage, store: Store, section: str, content: str, words: str
) -> None:
    count = len(store.taskdoc_history(pkg.rel_path))
    with pytest.raises(MindloopError, match=words):
        edit_section(pkg, section, content, store=store, expected_hash=None)
    assert len(store.taskdoc_history(pkg.rel_path)) == count


def test_the_maintainer_is_the_latest_roots_member(pkg: TaskPackage, store: Store) -> None:
    assert maintainer(store, pkg.rel_path, "dev") == "dev"
    assert maintainer(None, pkg.rel_path, "dev") == "dev"
