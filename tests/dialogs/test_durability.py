"""Which commits fsync: those before an effect outside the store, and no others.

A tool must never run before the generation that asked for it is durable; a question for
the human and a root's final answer are durable when shown; everything internal (a side
dialog's answer, drive bookkeeping, tool results) rides on the next fsync.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.store import Store
from mindloop.tools.base import Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs, ToolRegistry
from tests.scenario_util import write_script, write_team


class ProbeArgs(ToolArgs):
    n: int


def _probe_registry(seen: list[tuple[int, int]], store_of: list[Store]) -> ToolRegistry:
    """A tool that records, when it runs, how many durable commits the store has made."""

    async def probe(args: ProbeArgs, ctx: ToolContext) -> ToolOutput:
        seen.append((args.n, store_of[0].stats.durable_commits))
        return ToolOutput(f"probed {args.n}")

    reg = ToolRegistry()
    reg.add_toolset("probe", [Tool("probe", "Record the commit count.", ProbeArgs, probe)])  # type: ignore[arg-type]
    return reg


async def test_every_tool_runs_after_its_generation_is_fsynced(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["probe"]}})
    calls = [{"name": "probe", "arguments": {"n": i}} for i in (1, 2, 3)]
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "tool_calls": [calls[0]]},
            {"member": "dev", "role": "tool", "match": "probed 1", "tool_calls": [calls[1]]},
            {"member": "dev", "role": "tool", "match": "probed 2", "tool_calls": [calls[2]]},
            {"member": "dev", "role": "tool", "match": "probed 3", "response": "done"},
        ],
    )
    seen: list[tuple[int, int]] = []
    holder: list[Store] = []
    rt = DialogRuntime(rtws, tools=_probe_registry(seen, holder))
    holder.append(rt.store)
    starts: list[int] = []
    rt.bus.subscribe(
        lambda ev: (
            starts.append(rt.store.stats.durable_commits) if ev.type == "generation_start" else None
        )
    )
    rec = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(rec.id, "go")
    (result,) = await Scheduler(rt).run()
    assert result.final_text == "done"
    # each tool ran after exactly one more durable commit than its generation started with
    assert [n for n, _ in seen] == [1, 2, 3]
    assert [durable for _, durable in seen] == [starts[i] + 1 for i in range(3)]
    # and the final answer is durable too: 3 tool-call generations + 1 answer
    assert rt.store.stats.durable_commits - starts[0] == 4
    await rt.aclose()


async def test_store_only_tools_ride_on_the_fsync_of_their_results(rtws: Path) -> None:
    """A generation that calls only tools acting inside the store (`Tool.store_only`: the
    workspace's, `phase_end`, …) is not flushed before they run: their effects and
    results commit durably together, and that flush covers the generation. A call to a
    tool acting outside (here the probe) is preceded by its generation's own flush."""
    write_team(rtws, {"dev": {"toolsets": ["probe", "workspace"]}})
    node = {"parent_id": "root", "kind": "EXECUTION", "title": "A", "requirement": "do A"}
    write_script(
        rtws,
        [
            {
                "member": "dev",
                "match": "go",
                "tool_calls": [{"name": "node_create", "arguments": node}],
            },
            {
                "member": "dev",
                "role": "tool",
                "contains": "n1",
                "tool_calls": [{"name": "probe", "arguments": {"n": 1}}],
            },
            {"member": "dev", "role": "tool", "match": "probed 1", "response": "done"},
        ],
    )
    seen: list[tuple[int, int]] = []
    holder: list[Store] = []
    tools = _probe_registry(seen, holder)
    from mindloop.toolsets.workspace import workspace_tools

    tools.add_toolset("workspace", workspace_tools())
    rt = DialogRuntime(rtws, tools=tools)
    holder.append(rt.store)
    rec = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(rec.id, "go")
    before = rt.store.stats.durable_commits
    (result,) = await Scheduler(rt).run()
    assert result.final_text == "done"
    # node_create: its results' commit (1); the probe: its generation (2) before it runs,
    # then its results ride on the final answer's flush (3)
    assert [durable - before for _, durable in seen] == [2]
    assert rt.store.stats.durable_commits - before == 3
    await rt.aclose()


async def _fan_out(rtws: Path, width: int) -> int:
    """Durable commits of a root that tellasks `width` workers and then answers."""
    write_team(rtws, {"dev": {"toolsets": []}, "worker": {"toolsets": []}})
    tellasks = "\n\n".join(f"!?@worker job {i}" for i in range(width))
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": tellasks + "\n"},
            {"member": "worker", "response": "job done"},
            {"member": "dev", "contains": "job done", "response": "all in"},
        ],
    )
    rt = DialogRuntime(rtws)
    rec = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(rec.id, "go")
    before = rt.store.stats.durable_commits
    await Scheduler(rt).run()
    assert rt.store.load_history(rec.id)[-1].data["text"] == "all in"
    durable = rt.store.stats.durable_commits - before
    await rt.aclose()
    return durable


async def test_internal_replies_ride_on_the_next_fsync(tmp_path: Path) -> None:
    """Side dialogs' answers reach nothing outside the store: a wider fan-out costs no
    more fsyncs — only the root's final answer is durable."""
    from mindloop.rtws import init_rtws

    counts = []
    for width in (1, 6):
        root = tmp_path / f"w{width}"
        init_rtws(root, provider="mock")
        counts.append(await _fan_out(root, width))
    assert counts == [1, 1]


async def test_a_question_for_the_human_is_durable_before_it_is_shown(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": []}})
    write_script(rtws, [{"member": "dev", "match": "go", "response": "!?@human Which DB?\n"}])
    rt = DialogRuntime(rtws)
    rec = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(rec.id, "go")
    before = rt.store.stats.durable_commits
    await Scheduler(rt).run()
    assert len(rt.store.open_questions()) == 1
    assert rt.store.stats.durable_commits - before == 1
    await rt.aclose()


@pytest.mark.sqlite_only  # SQLite's pragma (PostgreSQL's lazy commit: test_store_postgres)
def test_a_lazy_transaction_commits_lazily_and_the_next_durable_one_with_full_sync(
    tmp_path: Path,
) -> None:
    """The level is set when a transaction needs another one than the last (it is not
    put back after a lazy one): what matters is the level each commit runs at."""
    store = Store.for_rtws(tmp_path)
    db = tmp_path / ".mindloop" / "state.sqlite"

    def level() -> int:
        return int(store.dialect.dbapi.execute("PRAGMA synchronous").fetchone()[0])

    assert level() == 2  # FULL
    durable0 = store.stats.durable_commits  # creating the schema committed durably
    levels = []
    for lazy in (True, True, False, True, False, False):
        with store.tx(durable=not lazy):
            store.record_event("probe", None, {"lazy": lazy})
            levels.append(level())
    assert levels == [1, 1, 2, 1, 2, 2]  # NORMAL for a lazy commit, FULL for a durable one
    assert store.stats.lazy_commits == 3 and store.stats.durable_commits == durable0 + 3
    store.close()
    con = sqlite3.connect(db)  # another connection sees both
    assert con.execute("SELECT count(*) FROM events WHERE type = 'probe'").fetchone()[0] == 6
    con.close()
