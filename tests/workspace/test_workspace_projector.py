"""The projections are written incrementally and, in a work loop's run, coalesced: a commit
rewrites only the files it touched; a burst of commits writes them once; a crash before
they are written leaves nothing that looks like a hand edit, and the next run repairs it;
a hand edit is still detected, kept and reported."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mindloop.store import Store
from mindloop.workspace import markdown, projection, projector, repo
from mindloop.workspace.api import execute, refresh_all
from mindloop.workspace.models import NodeKind
from mindloop.workspace.transitions import Authority

TASK = "tasks/login.tsk"
CHAT = Authority.chat("@dev")


@pytest.fixture
def rtws(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".minds").mkdir(parents=True)
    (root / TASK).mkdir(parents=True)
    (root / TASK / "goals.md").write_text("log in\n")
    return root


@pytest.fixture
def store(rtws: Path) -> Store:
    return Store.for_rtws(rtws, durable=False)


def _tree(store: Store, rtws: Path) -> None:
    def build(s):  # type: ignore[no-untyped-def]
        s.create_node(parent_id="root", kind=NodeKind.PLANNING, title="Backend", requirement="b")
        s.create_node(parent_id="n1", kind=NodeKind.EXECUTION, title="API", requirement="r")
        s.create_node(parent_id="n1", kind=NodeKind.EXECUTION, title="DB", requirement="d")

    execute(store, rtws, TASK, CHAT, build)


def _ws(rtws: Path) -> Path:
    return rtws / TASK / "workspace"


def _inodes(rtws: Path) -> dict[str, int]:
    ws = _ws(rtws)
    return {
        p.relative_to(ws).as_posix(): p.stat().st_ino
        for p in ws.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def _notes(rtws: Path, node_dir: str) -> str:
    text = (_ws(rtws) / f"nodes/{node_dir}/Info.md").read_text()
    return str(markdown.parse_info_md(text)["notes"])


def test_a_commit_touching_one_node_rewrites_only_its_files(rtws: Path, store: Store) -> None:
    _tree(store, rtws)
    before = _inodes(rtws)
    execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="halfway"))
    after = _inodes(rtws)
    changed = sorted(rel for rel in before if after[rel] != before[rel])
    # graph.json shows every node's version; the node's log got the update's row
    assert changed == ["graph.json", "nodes/API_n2/Info.md", "nodes/API_n2/Log.md"]
    assert _notes(rtws, "API_n2") == "halfway"
    execute(store, rtws, TASK, CHAT, lambda s: s.add_rule("type hints everywhere", {"by": "test"}))
    again = _inodes(rtws)
    assert sorted(rel for rel in after if again[rel] != after[rel]) == ["Log.md", "Workspace.md"]
    assert projection.problems(store, rtws, TASK) == []


def test_a_burst_of_commits_in_a_coalescing_scope_is_written_once_at_its_end(
    rtws: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(store, rtws)
    monkeypatch.setattr(projector, "INTERVAL", 3600.0)
    info = _ws(rtws) / "nodes/API_n2/Info.md"
    ino = info.stat().st_ino
    with projector.coalescing(store):  # the files were written just now (by `_tree`)
        for text in ("one", "two", "three", "four"):
            execute(store, rtws, TASK, CHAT, lambda s, t=text: s.update(node_id="n2", notes=t))
        assert info.stat().st_ino == ino and _notes(rtws, "API_n2") == ""
        stale = projection.problems(store, rtws, TASK)
        assert stale and all("disagrees with the store" in p for p in stale)
    assert _notes(rtws, "API_n2") == "four"
    assert projection.problems(store, rtws, TASK) == []


async def test_while_coalescing_a_timer_writes_within_the_interval(
    rtws: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(store, rtws)
    monkeypatch.setattr(projector, "INTERVAL", 0.05)
    with projector.coalescing(store):
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="one"))
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n3", notes="two"))
        assert _notes(rtws, "DB_n3") == ""  # waits for the timer
        for _ in range(400):  # the scope is still open: only the timer can write it
            if _notes(rtws, "DB_n3") == "two":
                break
            await asyncio.sleep(0.01)
        assert _notes(rtws, "DB_n3") == "two"
        assert projection.problems(store, rtws, TASK) == []


def test_a_rolled_back_change_writes_nothing_of_it(rtws: Path, store: Store) -> None:
    _tree(store, rtws)
    with pytest.raises(RuntimeError), store.tx():
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="never"))
        raise RuntimeError("rolled back")
    execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n3", notes="kept"))
    assert _notes(rtws, "API_n2") == "" and _notes(rtws, "DB_n3") == "kept"
    assert projection.problems(store, rtws, TASK) == []


def test_a_crash_before_the_files_are_written_is_repaired_by_the_next_run(
    rtws: Path, store: Store
) -> None:
    _tree(store, rtws)
    # another process commits in a coalescing scope and dies before it writes the files
    script = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        from mindloop.store import Store
        from mindloop.workspace import projector
        from mindloop.workspace.api import execute
        from mindloop.workspace.transitions import Authority
        projector.INTERVAL = 3600.0
        rtws = Path({str(rtws)!r})
        store = Store.for_rtws(rtws)
        with projector.coalescing(store):
            for i in range(3):
                execute(store, rtws, {TASK!r}, Authority.chat("@dev"),
                        lambda s, i=i: s.update(node_id="n2", notes=f"crash {{i}}"))
            os._exit(0)  # no scope end, no atexit: the scope's commits' files unwritten
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert repo.load(store, TASK).nodes["n2"].notes == "crash 2"
    assert _notes(rtws, "API_n2") == ""
    stale = projection.problems(store, rtws, TASK)
    assert stale and all("disagrees with the store" in p for p in stale)
    assert refresh_all(store, rtws) == [TASK]  # what `mindloop run` does at its start
    assert _notes(rtws, "API_n2") == "crash 2"
    assert projection.problems(store, rtws, TASK) == []


def test_a_hand_edit_of_an_untouched_file_is_kept_and_reported(rtws: Path, store: Store) -> None:
    _tree(store, rtws)
    info = _ws(rtws) / "nodes/DB_n3/Info.md"
    edited = info.read_text().replace("\nd\n", "\nmy way\n")
    info.write_text(edited)
    execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="other node"))
    assert info.read_text() == edited  # not touched by that commit
    [problem] = projection.problems(store, rtws, TASK)
    assert problem.startswith(f"{TASK}/workspace/nodes/DB_n3/Info.md: edited by hand")
    with projector.coalescing(store):
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n3", notes="mine"))
    kept = list((_ws(rtws) / "nodes/DB_n3").glob("Info.edited-*.md"))
    assert len(kept) == 1 and kept[0].read_text() == edited
    assert _notes(rtws, "DB_n3") == "mine"
    [problem] = projection.problems(store, rtws, TASK)
    assert "a hand edit kept" in problem


def test_a_stale_file_that_is_the_stores_rendering_is_not_a_hand_edit(
    rtws: Path, store: Store
) -> None:
    """A file replaced but its manifest record not (a kill between them): what is on disk
    is exactly what the store renders, so nothing is kept or reported."""
    _tree(store, rtws)
    with store.tx():
        execute(store, rtws, TASK, CHAT, lambda s: s.update(node_id="n2", notes="x"))
        files = projection.render(repo.load(store, TASK), repo.log(store, TASK))
    # the commit's files were written; put the new text in place of a missing manifest entry
    manifest = _ws(rtws) / ".projection.json"
    manifest.write_text('{"files": {}}\n')
    (_ws(rtws) / "nodes/API_n2/Info.md").write_text(files["nodes/API_n2/Info.md"])
    assert projection.problems(store, rtws, TASK) == []
    written = projection.write(store, rtws, TASK)
    assert written.kept == [] and not list(_ws(rtws).rglob("*.edited-*"))


def test_a_commits_staging_adds_what_its_change_touched_to_whats_staged(
    store: Store, rtws: Path
) -> None:
    """Staging adds each change to the files staged (`Dirty.add`): the same files as the
    changes' `Dirty.of` merged, whatever came first (a workspace made, a node moved, a
    rule added, a note)."""
    from mindloop.workspace.projection import Dirty

    changes = [execute(store, rtws, TASK, CHAT, lambda s: None)[1]]  # the workspace made
    _tree(store, rtws)
    steps = [
        lambda s: s.update(node_id="n2", notes="half way"),
        lambda s: s.add_rule("Use type hints", {}),
        lambda s: s.create_node(
            parent_id="root", kind=NodeKind.EXECUTION, title="UI", requirement="u"
        ),
    ]
    changes += [execute(store, rtws, TASK, CHAT, step)[1] for step in steps]
    for start in range(len(changes)):
        added, merged = Dirty(), Dirty()
        for change in changes[start:]:
            added.add(change)
            merged.merge(Dirty.of(change))
        assert added == merged
    later = Dirty()
    later.add(changes[-1])
    assert later.nodes == {"n4", "root"} and later.graph and not later.workspace
    assert later.logs == {"n4"}
    rule = Dirty()
    rule.add(changes[2])
    assert rule.workspace and not rule.graph and rule.logs == {None}
