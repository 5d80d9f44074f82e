"""Rules in every dialog of the task, from the store (never from `Workspace.md`, a
projection that may be missing or lag), cheaply: a call costs one indexed read of the
workspace's stamp, and the rules are read again only when the workspace changed."""

from __future__ import annotations

from pathlib import Path

from mindloop.store import Store
from mindloop.workspace import repo
from mindloop.workspace.api import WorkspaceApi
from mindloop.workspace.commands import Session
from mindloop.workspace.projection import WORKSPACE_DIR
from mindloop.workspace.rules import RulesText
from mindloop.workspace.transitions import Authority

TASK = "tasks/example.tsk"


def test_rules_are_read_once_per_change_and_one_stamp_read_per_call(rtws: Path) -> None:
    store = Store.for_rtws(rtws, durable=False)
    rules = RulesText(store, rtws)
    before = store.stats.statements
    assert rules(TASK) == "" and rules("tasks/other.tsk") == ""
    assert store.stats.statements == before + 2  # no workspace: the stamp read, no more
    api = WorkspaceApi(rtws, TASK, store=store)
    api.add_rule("Use type hints everywhere")
    text = rules(TASK)
    assert text.splitlines() == [
        "# Workspace rules (set by the user; read-only; every dialog of the task follows them)",
        "- Use type hints everywhere",
    ]
    reads = store.stats.statements
    for _ in range(5):
        assert rules(TASK) == text
    assert store.stats.statements == reads + 5  # unchanged: one stamp read per call
    api.add_rule("No third-party auth")
    assert rules(TASK).endswith("- No third-party auth")
    api.remove_rule("Use type hints everywhere")
    api.remove_rule("No third-party auth")
    assert rules(TASK) == ""
    store.close()


def _add_rule_without_files(rtws: Path, text: str) -> None:
    """Another process adds a rule: its own Store object, a committed store write, and no
    projection written (yet: a running loop writes the files a second later)."""
    other = Store.for_rtws(rtws, durable=False)
    try:
        with other.tx():
            s = Session(repo.load(other, TASK, cached=False), Authority.user("other"))
            s.add_rule(text, {"by": "user"})
            repo.write(other, s.finish())
    finally:
        other.close()


def test_rules_come_from_the_store_when_workspace_md_is_missing(rtws: Path) -> None:
    store = Store.for_rtws(rtws, durable=False)
    rules = RulesText(store, rtws)
    WorkspaceApi(rtws, TASK, store=store).add_rule("Use type hints everywhere")
    assert rules(TASK).endswith("- Use type hints everywhere")
    (rtws / TASK / WORKSPACE_DIR / "Workspace.md").unlink()
    assert rules(TASK).endswith("- Use type hints everywhere")
    fresh = RulesText(store, rtws)  # nothing cached: the file was never seen
    assert fresh(TASK).endswith("- Use type hints everywhere")
    store.close()


def test_a_rule_added_by_another_store_shows_without_any_file_write(rtws: Path) -> None:
    store = Store.for_rtws(rtws, durable=False)
    rules = RulesText(store, rtws)
    WorkspaceApi(rtws, TASK, store=store).add_rule("Use type hints everywhere")
    assert rules(TASK).endswith("- Use type hints everywhere")
    md = rtws / TASK / WORKSPACE_DIR / "Workspace.md"
    before = md.stat()
    _add_rule_without_files(rtws, "No third-party auth")
    assert md.stat().st_mtime_ns == before.st_mtime_ns  # no file was written
    assert rules(TASK).splitlines()[1:] == [
        "- Use type hints everywhere",
        "- No third-party auth",
    ]
    store.close()


def test_after_this_process_wrote_the_workspace_the_rules_cost_only_the_stamp_read(
    rtws: Path,
) -> None:
    """A write keeps the workspace value at its new stamp (`repo.held`): the rules come
    from it, with no read of the rules table; another process's write is read from the
    table (this process holds no value at that stamp)."""
    store = Store.for_rtws(rtws, durable=False)
    rules = RulesText(store, rtws)
    api = WorkspaceApi(rtws, TASK, store=store)
    api.add_rule("Use type hints everywhere")
    api.command(lambda s: s.record(None, "note", "a write that is no rule change"))
    before = store.stats.statements
    text = rules(TASK)
    assert store.stats.statements == before + 1  # the stamp
    assert text.endswith("- Use type hints everywhere")
    _add_rule_without_files(rtws, "No third-party auth")
    assert rules(TASK).splitlines()[1:] == ["- Use type hints everywhere", "- No third-party auth"]
    store.close()
