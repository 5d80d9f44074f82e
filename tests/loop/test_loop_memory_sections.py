"""Every loop generation's input is compiled from the budgeted sections of agent-loop §7.1
(issue 12, part 5): the phase's input pinned (P0: it never falls out of the request, however
many turns the entry takes), the last step summary, the workspace tree as it is now, the
workspace summary (written on PLAN entry and on a CHECK pass, §7.2 triggers 4–5), the
member's memory (written by SELF_IMPROVE only, §7.3), then the recent turns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.loop.driver import LoopOutcome, TaskLoop
from mindloop.loop.phases import Phase
from mindloop.loop.policy import TOOL_NOT_ALLOWED_IN_PHASE, LoopPolicy
from mindloop.loop.request_sections import tree_section
from mindloop.memory import workspace_summary as wsum
from mindloop.memory.member import MemberMemory
from mindloop.memory.workspace_summary import workspace_summary
from mindloop.providers.base import GenerationRequest, ToolResultMessage, UserMessage
from mindloop.testing import FunctionModel, Turn, call
from mindloop.testing.model import Call
from mindloop.workspace.models import Criterion, Node, NodeKind, NodeStatus
from mindloop.workspace.state import WorkspaceState
from tests.loop.loop_util import (
    TASK,
    complete,
    create,
    end,
    phase_of,
    run_task,
    verdict,
    workspace,
)
from tests.loop.loop_util import runtime as loop_runtime
from tests.scenario_util import write_team

READS = 10


def texts(req: GenerationRequest) -> str:
    return "\n".join(m.text for m in req.messages if isinstance(m, UserMessage))


def _files(rtws: Path, n: int) -> None:
    for i in range(n):
        (rtws / f"f{i}.txt").write_text(f"file {i}\n", "utf-8")


async def test_the_phase_input_stays_in_every_request_of_a_long_entry(rtws: Path) -> None:
    """The audit's repro: a DO entry of more than K = 6 turns lost its node (requirement,
    criteria) from the request after its sixth step. It is pinned now, and sent once."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    _files(rtws, READS + 1)
    steps = 0
    do: list[GenerationRequest] = []

    def respond(req: GenerationRequest) -> Turn:
        nonlocal steps
        phase = phase_of(req)
        if phase == "PLAN":
            return Turn(tool_calls=[create("uniquetitleXYZ"), end("DO", "planned one node")])
        if phase == "DO":
            do.append(req)
            steps += 1
            if steps <= READS:
                return Turn(tool_calls=[call("read_file", path=f"f{steps}.txt")])
            return Turn(tool_calls=[complete("n1"), end("CHECK")])
        if phase == "CHECK":
            return Turn(tool_calls=[verdict("n1"), end("END")])
        return Turn(tool_calls=[end("END")])

    report, rt = await run_task(rtws, FunctionModel(respond), "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert len(do) == READS + 1
    for i, req in enumerate(do):
        text = texts(req)
        assert "do uniquetitleXYZ" in text, f"DO request {i}: the node's requirement is gone"
        assert "WHEN done THEN works" in text, f"DO request {i}: its criteria are gone"
        assert text.count("[work loop] Phase DO (entry 2).") == 1, f"DO request {i}"
        assert "planned one node" in text, f"DO request {i}: the last step summary is gone"
    # the history still holds the latest turns, as before
    last = do[-1]
    results = [m.content for m in last.messages if isinstance(m, ToolResultMessage)]
    assert any(f"file {READS}" in r for r in results)
    await rt.aclose()


async def test_the_tree_section_shows_the_workspace_as_it_is_now(rtws: Path) -> None:
    """The tree is a section of its own, built at each step: a node PLAN created in its
    first step is in the tree of its second step (the input posted at entry had none)."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    plan: list[GenerationRequest] = []

    def respond(req: GenerationRequest) -> Turn:
        phase = phase_of(req)
        if phase == "PLAN":
            plan.append(req)
            if len(plan) == 1:
                return Turn(tool_calls=[create("alpha")])
            return Turn(tool_calls=[end("DO")])
        if phase == "DO":
            return Turn(tool_calls=[complete("n1"), end("CHECK")])
        if phase == "CHECK":
            return Turn(tool_calls=[verdict("n1"), end("END")])
        return Turn(tool_calls=[end("END")])

    report, rt = await run_task(rtws, FunctionModel(respond), "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    tree = _section(plan[1], "## Workspace tree")
    assert "n1 [NEW ready] TASK 'alpha'" in tree
    await rt.aclose()


def _section(req: GenerationRequest, heading: str) -> str:
    """The text of the user message a section is rendered as (its heading first)."""
    found = [
        m.text for m in req.messages if isinstance(m, UserMessage) and m.text.startswith(heading)
    ]
    assert len(found) == 1, (heading, [m for m in req.messages if isinstance(m, UserMessage)])
    return found[0]


async def test_plan_entry_and_a_check_pass_write_the_workspace_summary_read_back_later(
    rtws: Path,
) -> None:
    """§7.2 triggers 4 and 5: a CHECK pass records the ref it passed at and the commands
    it ran; PLAN entry refreshes the layout (the artifacts) and the verify commands. Each
    later request shows the summary as its P3 section."""
    write_team(rtws, {"dev": {"toolsets": ["fs", "shell"]}})
    requests: list[GenerationRequest] = []

    def respond(req: GenerationRequest) -> Turn:
        requests.append(req)
        phase = phase_of(req)
        prior = [p for r in requests[:-1] if (p := phase_of(r)) is not None]
        if phase == "PLAN":
            if "CHECK" in prior:  # the second scope: PLAN again
                return Turn(tool_calls=[end("END")])
            return Turn(tool_calls=[create("app", verify="python -m pytest -q"), end("DO")])
        if phase == "DO":
            return Turn(
                tool_calls=[
                    call("write_file", path="src/app.py", content="print('hi')\n"),
                    call("node_update", node_id="n1", artifacts=["src/app.py"]),
                    complete("n1"),
                    end("CHECK"),
                ]
            )
        if phase == "CHECK":
            if prior.count("CHECK") == 0:
                return Turn(tool_calls=[call("run_shell", command="python src/app.py")])
            return Turn(tool_calls=[verdict("n1"), end("END")])
        return Turn(tool_calls=[end("END")])

    model = FunctionModel(respond)
    report, rt = await run_task(rtws, model, "build the app")
    assert report.outcome is LoopOutcome.DONE, report.reason
    summary = workspace_summary(rt.store, TASK)
    assert summary is not None and summary.checked_ref
    assert "python src/app.py" in summary.commands
    improve = [r for r in requests if phase_of(r) == "SELF_IMPROVE"]
    text = _section(improve[0], "## Workspace summary")
    assert f"last green checked_ref: {summary.checked_ref}" in text
    assert "python src/app.py" in text
    await rt.aclose()

    # new scope: PLAN's entry refreshes it with the deliverables and the verify commands
    report, rt = await run_task(rtws, model, "now document it")
    assert report.outcome is LoopOutcome.DONE, report.reason
    summary = workspace_summary(rt.store, TASK)
    assert summary is not None and summary.layout == ["src/app.py"]
    assert "python -m pytest -q" in summary.commands and summary.checked_ref
    plan = [r for r in requests if phase_of(r) == "PLAN"][-1]
    assert "layout: src/app.py" in _section(plan, "## Workspace summary")
    await rt.aclose()


def _remember(text: str, confidence: float = 0.8) -> Any:
    return call("memory_remember", text=text, confidence=confidence)


async def test_self_improve_writes_member_memory_and_later_requests_show_it(rtws: Path) -> None:
    """Member memory (P1) is written by SELF_IMPROVE only (its loop-owned tool), at a
    confidence of at least 0.55 and without private data; every loop request of the
    member shows it."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    requests: list[GenerationRequest] = []

    def respond(req: GenerationRequest) -> Turn:
        requests.append(req)
        phase = phase_of(req)
        improved = sum(1 for r in requests[:-1] if phase_of(r) == "SELF_IMPROVE")
        if phase == "PLAN":
            if improved:  # the second scope: nothing more to do
                return Turn(tool_calls=[end("END")])
            return Turn(tool_calls=[create("a"), end("DO")])
        if phase == "DO":
            return Turn(tool_calls=[_remember("not here"), complete("n1"), end("CHECK")])
        if phase == "CHECK":
            return Turn(tool_calls=[verdict("n1"), end("END")])
        if improved == 0:
            return Turn(
                tool_calls=[
                    _remember("The user wants answers in short bullet lists"),
                    _remember("Reach the user at someone@example.com"),
                    _remember("A hunch", 0.3),
                    end("END"),
                ]
            )
        return Turn(tool_calls=[end("END")])

    report, rt = await run_task(rtws, FunctionModel(respond), "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    memory = MemberMemory(rtws, "dev")
    assert [i.text for i in memory.items()] == ["The user wants answers in short bullet lists"]
    history = rt.store.load_history(report.root_id)
    results = [m.data for m in history if m.kind == "tool_result"]
    refused = [r["content"] for r in results if r["name"] == "memory_remember" and r["is_error"]]
    assert refused[0].startswith(f"Error [{TOOL_NOT_ALLOWED_IN_PHASE}]")  # DO may not
    assert any("e-mail" in r for r in refused) and any("confidence" in r for r in refused)
    assert all(
        "memory_remember" not in [t.name for t in r.tools]
        for r in requests[:-1]
        if phase_of(r) != "SELF_IMPROVE"
    )
    await rt.aclose()

    seen = len(requests)
    report, rt = await run_task(rtws, FunctionModel(respond), "more work")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert [phase_of(r) for r in requests[seen:]] == ["PLAN", "SELF_IMPROVE"]
    for req in requests[seen:]:
        mem = _section(req, "## Your memory")
        assert "- The user wants answers in short bullet lists" in mem
    await rt.aclose()


async def _do_compile_statements(
    rtws: Path, work: Callable[[int], Call], n: int
) -> tuple[DialogRuntime, list[int]]:
    """Run a one-node task whose DO entry takes `n` steps calling `work(k)` (k = 1…n)
    before it completes the node: the SQL statements each DO request's compile ran."""
    counts: list[tuple[str | None, int]] = []
    original = LoopPolicy.compile_request
    steps = 0

    def respond(req: GenerationRequest) -> Turn:
        nonlocal steps
        phase = phase_of(req)
        if phase == "PLAN":
            return Turn(tool_calls=[create("a"), end("DO")])
        if phase == "DO":
            steps += 1
            if steps <= n:
                return Turn(tool_calls=[work(steps)])
            return Turn(tool_calls=[complete("n1"), end("CHECK")])
        if phase == "CHECK":
            return Turn(tool_calls=[verdict("n1"), end("END")])
        return Turn(tool_calls=[end("END")])

    rt, policies = loop_runtime(rtws, FunctionModel(respond))
    stats = rt.store.stats

    def counted(self: LoopPolicy, live: Any, parts: Any, tools: Any) -> GenerationRequest:
        before = stats.statements
        out = original(self, live, parts, tools)
        counts.append((self.phase.value, stats.statements - before))
        return out

    LoopPolicy.compile_request = counted  # type: ignore[method-assign]
    try:
        report = await TaskLoop(rt, policies, TASK).run("go")
    finally:
        LoopPolicy.compile_request = original  # type: ignore[method-assign]
    assert report.outcome is LoopOutcome.DONE, report.reason
    return rt, [k for phase, k in counts if phase == "DO"]


async def test_a_step_of_a_loop_root_reads_at_most_the_workspace_stamp(rtws: Path) -> None:
    """Per-step cost: after an entry's first request, compiling the next ones runs at most
    one statement (the workspace's stamp, for the tree) — the input, the summaries and the
    memory are read once per entry."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    _files(rtws, 6)
    rt, do = await _do_compile_statements(rtws, lambda k: call("read_file", path=f"f{k}.txt"), 5)
    assert len(do) == 6
    assert max(do[1:]) <= 1, do
    await rt.aclose()


async def test_a_step_after_a_workspace_write_reads_the_stamp_once(rtws: Path) -> None:
    """A step whose workspace moved since the last one (each DO step writes the node's
    notes): the tree section is built again at the stamp the system prompt's rules just
    read — one statement for the whole compile, not a read of the tree's own."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    rt, do = await _do_compile_statements(
        rtws, lambda k: call("node_update", node_id="n1", notes=f"step {k}"), 4
    )
    assert workspace(rt).nodes["n1"].notes == "step 4"  # every DO step wrote it
    assert len(do) == 5
    assert max(do[1:]) <= 1, do
    await rt.aclose()


async def test_a_system_prompt_over_its_cap_is_not_sent_and_the_error_says_what_to_shorten(
    rtws: Path,
) -> None:
    """`loop.memory.system_prompt` (6,000 tokens, the Taskdoc not counted: it is sent whole)
    caps the system prompt of every loop request: one over it is never sent; the run
    stops with an error naming the cap and what to shorten."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    persona = rtws / ".minds" / "team" / "dev" / "persona.md"
    persona.parent.mkdir(parents=True, exist_ok=True)
    persona.write_text("You are careful. " * 1600, "utf-8")  # ~6,800 tokens
    model = FunctionModel(lambda req: Turn(tool_calls=[end("END")]))
    report, rt = await run_task(rtws, model, "go")
    assert report.outcome is LoopOutcome.ERROR
    assert "loop.memory.system_prompt (6,000)" in report.reason and "persona" in report.reason
    assert model.requests == []
    await rt.aclose()


async def test_reminders_show_and_clear_mind_keeps_the_phase_input(rtws: Path) -> None:
    """The control tools work in a loop phase as in a chat: a reminder is shown in every
    later request; after `clear_mind` (a new course: the history is gone) the phase's
    input, the reminder and its continuation are still there."""
    write_team(rtws, {"dev": {"toolsets": ["fs", "control"]}})
    do: list[GenerationRequest] = []

    def respond(req: GenerationRequest) -> Turn:
        phase = phase_of(req)
        if phase == "PLAN":
            return Turn(tool_calls=[create("uniquetitleXYZ"), end("DO")])
        if phase == "DO":
            do.append(req)
            if len(do) == 1:
                return Turn(tool_calls=[call("add_reminder", content="keep it small")])
            if len(do) == 2:
                return Turn(tool_calls=[call("clear_mind", reminder_content="n1 is half done")])
            return Turn(tool_calls=[complete("n1"), end("CHECK")])
        if phase == "CHECK":
            return Turn(tool_calls=[verdict("n1"), end("END")])
        return Turn(tool_calls=[end("END")])

    report, rt = await run_task(rtws, FunctionModel(respond), "go")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert len(do) == 3
    assert "keep it small" in texts(do[1])
    last = texts(do[2])
    assert "do uniquetitleXYZ" in last and "keep it small" in last and "n1 is half done" in last
    await rt.aclose()


def _state() -> WorkspaceState:
    def node(id: str, status: NodeStatus, **kw: Any) -> Node:
        return Node(
            id=id, parent_id="root", kind=NodeKind.EXECUTION, title=f"t{id}", status=status, **kw
        )

    nodes = {
        "root": Node(
            id="root", kind=NodeKind.PLANNING, title="task", children=["n1", "n2", "n3", "n4"]
        ),
        "n1": node("n1", NodeStatus.DONE),
        "n2": node("n2", NodeStatus.IN_PROGRESS, deps=["n1"]),
        "n3": node("n3", NodeStatus.NEW),
        "n4": node("n4", NodeStatus.CANCELLED),
    }
    return WorkspaceState(task=TASK, nodes=nodes, exists=True, stamp="s1")


def test_the_tree_section_pins_what_the_phase_works_on_and_folds_the_rest() -> None:
    """§7.1 P4: the current node, its ancestors and deps and every open node are kept
    whole; terminal nodes fold to `id status title` first. DO shows its node and deps
    only (the reference's DO override)."""
    ws = _state()
    check = tree_section(ws, Phase.CHECK, None, ["n2"], "en")
    parts = {p.id: p for p in check.parts}
    assert list(parts) == ["root", "n1", "n2", "n3", "n4"]
    assert all(parts[n].pinned for n in ("root", "n1", "n2", "n3"))  # n1: n2's dep
    assert not parts["n4"].pinned and parts["n4"].folded == "  - n4 CANCELLED tn4"
    plan = {p.id: p for p in tree_section(ws, Phase.PLAN, None, [], "en").parts}
    assert not plan["n1"].pinned and plan["n1"].folded == "  - n1 DONE tn1"
    do = tree_section(ws, Phase.DO, "n2", [], "en")
    assert [p.id for p in do.parts] == ["n1", "n2"] and all(p.pinned for p in do.parts)
    assert do.parts[1].text == "- n2 [IN_PROGRESS] TASK 'tn2' (deps n1)"


def test_the_workspace_summary_is_refreshed_from_the_nodes_and_a_check_pass() -> None:
    ws = _state()
    ws.nodes["n1"] = ws.nodes["n1"].model_copy(
        update={
            "artifacts": ["src/b.py", "src/a.py"],
            "acceptance_criteria": [Criterion(id="AC1", when="w", then="t", verify="make test")],
        }
    )
    ws.nodes["n4"] = ws.nodes["n4"].model_copy(update={"artifacts": ["gone.py"]})
    first = wsum.planned(ws, None)
    assert first.layout == ["src/a.py", "src/b.py"] and first.commands == ["make test"]
    passed = wsum.checked(first, "ref1", ["pytest -q", "make test"])
    assert passed.checked_ref == "ref1" and passed.commands == ["pytest -q", "make test"]
    assert wsum.planned(ws, passed).checked_ref == "ref1"  # kept by PLAN's refresh
    section = passed.section()
    assert [p.id for p in section.parts] == ["layout", "commands"]
    assert all(p.pinned for p in section.parts)


async def test_a_root_driven_outside_its_loop_still_gets_its_input_from_the_store(
    rtws: Path,
) -> None:
    """A loop root this process's loop does not drive (its phase looked up in the store)
    is compiled the same way: the entry's input is read back from its stored message."""
    from mindloop.loop import phase_ops
    from mindloop.loop.tasks import loop_root
    from mindloop.store import loop_state as ls
    from tests.loop import loop_util

    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    _files(rtws, 8)
    plan: list[GenerationRequest] = []

    def respond(req: GenerationRequest) -> Turn:
        plan.append(req)
        if len(plan) < 8:
            return Turn(tool_calls=[call("read_file", path=f"f{len(plan)}.txt")])
        return Turn(tool_calls=[end("END")])

    rt, policies = loop_util.runtime(rtws, FunctionModel(respond))
    policies.bind(rt)
    root = loop_root(rt, TASK, member="dev")
    state = ls.get(rt.store, TASK)
    assert state is not None
    phase_ops.enter_phase(rt, state, Phase.PLAN, notes=["REMEMBER-THIS-NOTE"])
    await rt.drive(root.root_id)
    assert len(plan) == 8
    for i, req in enumerate(plan):
        text = texts(req)
        assert text.count("[work loop] Phase PLAN (entry 1).") == 1, i
        assert "REMEMBER-THIS-NOTE" in text, i
    await rt.aclose()
