"""`mindloop demo` is a task carried through the whole work loop (issue 12, part 8): planned
into four nodes with dependencies, one dispatched to a teammate, a failed check adjusted
with an FBR round and done again, a question answered, the BENCH node run last, then
SELF_IMPROVE patching self.md and sending a KB request that the next run delivers once —
all offline, on the mock provider."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from mindloop.cli.demo_cmd import run_demo
from mindloop.demo import DEMO_TASK
from mindloop.demo.script import KB_FILE
from mindloop.store import Store
from mindloop.store import loop_state as ls
from mindloop.store.outbox import Outbox
from mindloop.workspace import repo


async def test_the_demo_runs_the_whole_loop(tmp_path: Path) -> None:
    console = Console(record=True, width=200)
    report = await run_demo(tmp_path / "demo", console)
    shown = console.export_text()
    assert report.outcome == "done", shown[-3000:]
    assert report.questions_answered == 1 and report.approvals == 1
    assert "human (approved by the demo): move(" in shown
    for phase in ("PLAN", "DO", "CHECK", "ADJUST", "SELF_IMPROVE"):
        assert f"━━ {phase} (entry" in shown
    assert shown.count("FBR side dialog (tool-less)") == 3
    assert "side dialog" in shown and "@reviewer" in shown
    store = Store.for_rtws(report.rtws)
    try:
        state = ls.get(store, DEMO_TASK)
        assert state is not None and state.status is ls.LoopStatus.DONE
        entries = [
            m.data["loop"]["phase"] for m in store.load_history(state.root_id) if "loop" in m.data
        ]
        assert entries[:5] == ["PLAN", "DO", "CHECK", "ADJUST", "DO"]
        work = [e for e in entries if e != "SELF_IMPROVE"]
        assert work[-1] == "CHECK" and entries[len(work) :] == ["SELF_IMPROVE"] * (
            len(entries) - len(work)
        )
        assert len(entries) - len(work) > 1  # the history takes more than one batch
        ws = repo.load(store, DEMO_TASK)
        assert [n.status.value for n in ws.nodes.values()] == ["DONE"] * 5
        assert ws.nodes["n2"].assignee == "MEMBER:reviewer" and ws.nodes["n3"].deps == ["n1"]
        assert ws.nodes["n1"].attempt == 1 and ws.nodes["n1"].adjust_count == 1
        moves = [e for e in repo.log(store, DEMO_TASK) if e.kind == "transition"]
        done = [e.node_id for e in moves if e.data["to"] == "DONE"]
        assert done[-1] == "n4"  # the BENCH node, last
        failed = [e.node_id for e in moves if e.data["to"] == "CHECK_FAILED"]
        assert failed == ["n1"]
        member = [d for d in store.list_dialogs(root_id=state.root_id) if d.member == "reviewer"]
        assert len(member) == 1 and member[0].kind == "side"
        assert [q.status for q in store.open_questions()] == []
    finally:
        store.close()
    for name in ("CHANGELOG.md", "CONTRIBUTING.md", "RELEASE_NOTES.md"):
        assert (report.rtws / name).is_file()
    assert "## [0.1.0]" in (report.rtws / "CHANGELOG.md").read_text("utf-8")
    # SELF_IMPROVE: a habit in dev's own self.md (with its history), and a KB request the
    # following `mindloop run` delivered once to the KB teammate, who processed it
    self_md = report.rtws / ".minds" / "team" / "dev" / "self.md"
    assert "## Habits" in self_md.read_text("utf-8")
    history = (self_md.parent / "self.history.jsonl").read_text("utf-8").splitlines()
    assert len(history) == 1
    assert (report.rtws / KB_FILE).is_file()
    store = Store.for_rtws(report.rtws)
    try:
        [row] = Outbox(store).all()
        assert row.kind == "kb_request" and row.status.value in ("sent", "acked")
        kb = [d for d in store.list_dialogs() if d.member == "kb"]
        assert len(kb) == 1
        asked = [m for m in store.load_history(kb[0].id) if m.kind == "user"]
        assert len(asked) == 1 and "[kb_request from @dev" in asked[0].data["text"]
    finally:
        store.close()
