"""The BENCH rule (agent-loop §5.5): all four conditions, including "nothing changed since
the checks" by git HEAD (and what differs from it) or by a tree hash without git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mindloop.loop.bench import ready_benches
from mindloop.workspace.commands import CriterionInput, Session
from mindloop.workspace.models import NodeKind, NodeStatus, NodeType, SelfCheck
from mindloop.workspace.ref import workspace_ref
from mindloop.workspace.state import WorkspaceState
from mindloop.workspace.transitions import Actor, Authority

TASK = "tasks/t.tsk"


def _tree() -> WorkspaceState:
    s = Session(WorkspaceState(task=TASK), Authority.phase(Actor.PLAN, "plan"))
    s.init()
    crit = [CriterionInput(when="built", then="works", verify="true", id="AC1")]
    s.create_node(
        parent_id="root",
        kind=NodeKind.EXECUTION,
        title="A",
        requirement="a",
        node_id="a",
        acceptance_criteria=crit,
    )
    s.create_node(
        parent_id="root",
        kind=NodeKind.EXECUTION,
        title="Bench",
        requirement="b",
        node_id="z",
        type=NodeType.BENCH,
        deps=["a"],
        acceptance_criteria=crit,
    )
    return s.finish().after


def _move(state: WorkspaceState, actor: Actor, to: NodeStatus, **kw: object) -> WorkspaceState:
    s = Session(
        state, Authority.phase(actor, "t") if actor is not Actor.RT else Authority.runtime()
    )
    s.transition(node_id="a", to=to, reason="r", **kw)  # type: ignore[arg-type]
    return s.finish().after


def _done(state: WorkspaceState) -> WorkspaceState:
    state = _move(state, Actor.RT, NodeStatus.IN_PROGRESS)
    state = _move(
        state,
        Actor.DO,
        NodeStatus.COMPLETE,
        self_check=[SelfCheck(criterion="AC1", passed=True)],
        no_artifacts_reason="none",
    )
    return _move(state, Actor.CHECK, NodeStatus.DONE, conclusion="fine")


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.mark.parametrize("git", [False, True])
def test_a_bench_runs_only_when_all_four_conditions_hold(tmp_path: Path, git: bool) -> None:
    root = tmp_path / "p"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("x = 1\n")
    if git:
        _git(root, "init", "-q")
        _git(
            root,
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "start",
        )
    state = _tree()
    # 1. scope not done: the dep is only NEW
    assert ready_benches(state, root, lambda: {}) == (frozenset(), {})
    complete = _move(
        _move(state, Actor.RT, NodeStatus.IN_PROGRESS),
        Actor.DO,
        NodeStatus.COMPLETE,
        self_check=[SelfCheck(criterion="AC1", passed=True)],
        no_artifacts_reason="none",
    )
    assert ready_benches(complete, root, lambda: {}) == (frozenset(), {})  # COMPLETE is not enough
    done = _done(state)
    ref = workspace_ref(root)
    # 3. no check recorded, then a check at this very ref: ready
    ready, why = ready_benches(done, root, lambda: {})
    assert not ready and "no check" in why["z"]
    ready, why = ready_benches(done, root, lambda: {"a": (1.0, ref)})
    assert ready == {"z"} and not why
    # the rtws's own state and caches are not deliverables
    (root / "tasks" / "t.tsk" / "workspace").mkdir(parents=True)
    (root / "tasks" / "t.tsk" / "workspace" / "graph.json").write_text("{}")
    (root / ".mindloop").mkdir()
    (root / ".mindloop" / "state.sqlite").write_text("db")
    (root / "src" / "__pycache__").mkdir()
    (root / "src" / "__pycache__" / "app.pyc").write_text("bytes")
    assert workspace_ref(root) == ref
    # a deliverable changed since the check: not ready, and said why
    (root / "src" / "app.py").write_text("x = 2\n")
    changed = workspace_ref(root)
    assert changed != ref
    ready, why = ready_benches(done, root, lambda: {"a": (1.0, ref)})
    assert not ready and "changed since the checks" in why["z"]
    # 2. not quiescent: a node at work elsewhere blocks it even when checked at this ref
    s = Session(done, Authority.phase(Actor.PLAN, "plan"))
    s.create_node(
        parent_id="root", kind=NodeKind.EXECUTION, title="C", requirement="c", node_id="c"
    )
    busy = s.finish().after
    s = Session(busy, Authority.runtime())
    s.transition(node_id="c", to=NodeStatus.IN_PROGRESS, reason="r")
    busy = s.finish().after
    assert ready_benches(busy, root, lambda: {"a": (1.0, changed)}) == (frozenset(), {})
    if git:  # committed: the ref is HEAD again, clean
        _git(root, "add", "src")
        _git(root, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "x")
        assert workspace_ref(root).startswith("git:") and "dirty" not in workspace_ref(root)


async def test_plan_adds_deps_to_an_existing_bench_so_it_runs_last(rtws: Path) -> None:
    """PLAN creates the BENCH before the last node it must test, then adds that node to
    its deps (`node_add_deps`, refused when it would break the DAG or invariant 5): the
    BENCH is checked only after every node of its scope is DONE (agent-loop §5.5)."""
    from mindloop.loop.driver import LoopOutcome
    from mindloop.testing import call
    from tests.loop.loop_util import WorkScript, complete, create, end, run_task, turn, verdict
    from tests.loop.loop_util import workspace as ws_of
    from tests.scenario_util import write_team

    write_team(rtws, {"dev": {"toolsets": ["fs"]}})

    def add_deps(node: str, *deps: str) -> object:
        return call("node_add_deps", node_id=node, deps=list(deps))

    model = WorkScript(
        [
            # PLAN: n1, the BENCH n2 over n1, then n3 (after n1), then n2 also covers n3
            turn(create("api")),
            turn(create("acceptance", bench=True, deps=["n1"])),
            turn(create("ui", deps=["n1"])),
            turn(add_deps("n1", "n3")),  # a cycle: refused
            turn(add_deps("n3", "n2")),  # a TASK on a BENCH: refused
            turn(add_deps("n2", "n3", "n1"), end("DO", "bench last")),
            turn(complete("n1"), end("CHECK")),  # DO n1
            turn(verdict("n1"), end("DO")),  # CHECK n1: the BENCH is not ready (n3)
            turn(complete("n3"), end("CHECK")),  # DO n3
            turn(verdict("n3"), end("END")),  # CHECK n3
            turn(verdict("n2"), end("END")),  # CHECK the BENCH, last
        ]
    )
    report, rt = await run_task(rtws, model, "ship api and ui")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert model.remaining == 0
    results = [
        m.data["content"] for m in rt.store.load_history(report.root_id) if m.kind == "tool_result"
    ]
    cycle = next(r for r in results if "CYCLE" in r)
    on_bench = next(r for r in results if "TASK_DEPENDS_ON_BENCH" in r)
    added = next(r for r in results if r.startswith("n2: deps"))
    assert "n1 → n3 → n1" in cycle or "n3 → n1 → n3" in cycle
    assert "n3" in on_bench and "deps n1, n3" in added
    ws = ws_of(rt)
    assert ws.nodes["n2"].deps == ["n1", "n3"] and ws.nodes["n3"].deps == ["n1"]
    # the BENCH was a CHECK target only once both its deps were DONE, in the last CHECK
    inputs = [m.data for m in rt.store.load_history(report.root_id) if "loop" in m.data]
    checks = [d["text"] for d in inputs if d["loop"]["phase"] == "CHECK"]
    targets = [c.split("## Workspace tree")[0] for c in checks]
    assert len(targets) == 3 and ["acceptance" in t for t in targets] == [False, False, True]
    await rt.aclose()


async def test_a_bench_whose_scope_changed_since_its_checks_is_refused_and_not_routed(
    rtws: Path,
) -> None:
    """Condition 3 holds at the CHECK transition too, not only in routing: the BENCH is a
    CHECK target (its dep was checked at this workspace ref), but a deliverable changes
    before CHECK moves it, so `node_transition` refuses it (BENCH_NOT_READY, naming the
    change), it stays WAIT, and routing does not send it to CHECK again while the
    workspace differs. Once the file is as it was checked, the next run checks it."""
    from collections import deque
    from collections.abc import Callable

    from mindloop.loop.driver import LoopOutcome
    from mindloop.providers.base import GenerationRequest
    from mindloop.testing import FunctionModel, Turn
    from tests.loop.loop_util import complete, create, end, phase_of, run_task, turn, verdict
    from tests.loop.loop_util import workspace as ws_of
    from tests.scenario_util import write_team

    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    app = rtws / "src" / "app.py"
    app.parent.mkdir()
    app.write_text("x = 1\n")

    def edit() -> None:
        app.write_text("x = 2  # changed after the checks\n")

    script: deque[tuple[Turn, Callable[[], None] | None]] = deque(
        [
            (turn(create("api")), None),  # PLAN
            (turn(create("acceptance", bench=True, deps=["n1"]), end("DO")), None),
            (turn(complete("n1"), end("CHECK")), None),  # DO n1
            (turn(verdict("n1"), end("END")), None),  # CHECK n1: its ref recorded
            (turn(verdict("n2")), edit),  # CHECK the BENCH, but the workspace changed
            (turn(end("END", "the bench waits")), None),
        ]
    )

    def respond(req: GenerationRequest) -> Turn:
        assert script, f"no turn left for a request in {phase_of(req)}"
        t, effect = script.popleft()
        if effect is not None:
            effect()
        return t

    model = FunctionModel(respond)
    report, rt = await run_task(rtws, model, "ship the api, then its acceptance test")
    try:
        assert not script, f"{len(script)} turns left; the loop ended: {report.outcome}"
        history = rt.store.load_history(report.root_id)
        results = [m.data["content"] for m in history if m.kind == "tool_result"]
        refused = next(r for r in results if "BENCH_NOT_READY" in r)
        assert "changed since the checks" in refused, refused
        assert ws_of(rt).nodes["n2"].status is NodeStatus.WAIT
        assert report.outcome is not LoopOutcome.DONE
        # routing holds it back too: no CHECK entry targets it while the file differs
        inputs = [m.data for m in history if "loop" in m.data]
        assert [d["loop"]["phase"] for d in inputs] == ["PLAN", "DO", "CHECK", "CHECK"]
    finally:
        await rt.aclose()
    app.write_text("x = 1\n")  # as checked: the BENCH may run
    script.extend([(turn(verdict("n2"), end("END")), None), (turn(end("END")), None)])
    report, rt = await run_task(rtws, model)
    try:
        assert report.outcome is LoopOutcome.DONE, report.reason
        assert not script
        assert ws_of(rt).nodes["n2"].status is NodeStatus.DONE
    finally:
        await rt.aclose()
