"""Rules in every dialog of the task, read from the store only when they changed: a task
without a workspace costs no query at all, an unchanged one none either."""

from __future__ import annotations

from pathlib import Path

from mindloop.store import Store
from mindloop.workspace.api import WorkspaceApi
from mindloop.workspace.rules import RulesText

TASK = "tasks/example.tsk"


def test_rules_are_read_once_per_change_and_not_at_all_without_a_workspace(rtws: Path) -> None:
    store = Store.for_rtws(rtws, durable=False)
    rules = RulesText(store, rtws)
    before = store.stats.statements
    assert rules(TASK) == "" and rules("tasks/other.tsk") == ""
    assert store.stats.statements == before  # no workspace: no query
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
    assert store.stats.statements == reads  # unchanged: cached on Workspace.md's stat
    api.add_rule("No third-party auth")
    assert rules(TASK).endswith("- No third-party auth")
    api.remove_rule("Use type hints everywhere")
    api.remove_rule("No third-party auth")
    assert rules(TASK) == ""
    store.close()
