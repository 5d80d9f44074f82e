"""The tool matrix's cells that depend on a call's arguments, enforced by the runtime in
the running loop (agent-loop §3): CHECK's shell runs test runners only and CHECK writes
nothing but its report and verdicts; DO changes only its own node (notes, artifacts, the
moves of §5.4); PLAN writes structure only; no phase is offered a tool its row does not
give. Every refusal is `TOOL_NOT_ALLOWED_IN_PHASE`, counted (a FORMAT failure, L0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mindloop.loop.driver import LoopOutcome
from mindloop.loop.phases import PHASES, Phase, ToolClass
from mindloop.loop.policy import TOOL_NOT_ALLOWED_IN_PHASE
from mindloop.store import loop_state as ls
from mindloop.testing import ScriptedModel, call
from tests.loop.loop_util import (
    TASK,
    complete,
    create,
    end,
    phase_of,
    phases,
    run_task,
    turn,
    verdict,
    workspace,
)
from tests.scenario_util import write_team

REFUSED = f"Error [{TOOL_NOT_ALLOWED_IN_PHASE}]"


def write_team_with_loop(rtws: Path, members: dict[str, Any], loop: dict[str, Any]) -> None:
    write_team(rtws, members)
    path = rtws / ".minds" / "team.yaml"
    team = yaml.safe_load(path.read_text("utf-8"))
    team["loop"] = loop
    path.write_text(yaml.safe_dump(team, sort_keys=False), "utf-8")


def results_of(rt: Any, root_id: str) -> list[dict[str, Any]]:
    return [m.data for m in rt.store.load_history(root_id) if m.kind == "tool_result"]


def shell(command: str) -> Any:
    return call("run_shell", command=command)


async def test_check_runs_test_runners_and_the_verify_commands_of_its_nodes_only(
    rtws: Path,
) -> None:
    """`loop.check.test_runners` (here only `echo`) and the `verify` commands of the nodes
    under check run; anything else a shell could do — another program, a redirection to a
    file, a second command after `;`, a command substitution — is refused before it runs,
    like a file write."""
    write_team_with_loop(
        rtws,
        {"dev": {"toolsets": ["fs", "shell"]}},
        {"check": {"test_runners": ["echo"]}},
    )
    model = ScriptedModel(
        [
            turn(create("a", verify="test -f a.txt"), end("DO")),
            turn(call("write_file", path="a.txt", content="a"), complete("n1"), end("CHECK")),
            turn(
                shell("echo checking n1"),  # a configured runner
                shell("test -f a.txt"),  # n1's verify command
                shell("touch b.txt"),  # another program
                shell("echo x > c.txt"),  # a runner writing a file
                shell("echo ok; rm a.txt"),  # a runner, then something else
                shell("echo $(rm a.txt)"),  # a command substitution
                call("write_file", path="d.txt", content="d"),
            ),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "make a")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert phases(model) == ["PLAN", "DO", "CHECK", "CHECK", "SELF_IMPROVE"]
    check = [r for r in results_of(rt, report.root_id) if r["name"] in ("run_shell", "write_file")]
    by_text = [(r["is_error"], r["content"]) for r in check[1:]]  # after DO's write
    assert by_text[0] == (False, "exit code 0\nchecking n1\n")
    assert by_text[1] == (False, "exit code 0\n(no output)")
    for is_error, text in by_text[2:]:
        assert is_error and text.startswith(REFUSED), text
    assert "loop.check.test_runners" in by_text[2][1]
    assert (rtws / "a.txt").exists()
    assert not any((rtws / f).exists() for f in ("b.txt", "c.txt", "d.txt"))
    state = ls.get(rt.store, TASK)
    assert state is not None and state.refusals == 5
    await rt.aclose()


async def test_do_changes_only_its_own_node_and_check_only_the_nodes_it_checks(
    rtws: Path,
) -> None:
    """DO: notes, artifacts and the moves the transition table gives DO, on the node being
    worked; another node, or another field, is refused. CHECK: a report (notes, a
    conclusion) and a verdict on the nodes it checks, nothing else."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("a"), create("b"), end("DO")),
            turn(
                call("node_update", node_id="n2", notes="b is next"),  # another node
                call("node_update", node_id="n1", conclusion="a works"),  # not DO's field
                call("node_transition", node_id="n2", to="CHECK_FAILED", reason="no"),
                call("doc_lookup", query="README", node_id="n2"),
            ),
            turn(
                call("node_update", node_id="n1", notes="done by hand", artifacts=["a.txt"]),
                complete("n1"),
                end("CHECK"),
            ),
            turn(
                call("node_update", node_id="n2", notes="looks fine"),  # not under check
                call("node_update", node_id="n1", artifacts=["other.txt"]),  # not a report
                call("node_update", node_id="n1", notes="report: AC1 passed"),
                verdict("n1"),
                end("DO"),
            ),
            turn(complete("n2"), end("CHECK")),
            turn(verdict("n2"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "make a and b")
    assert report.outcome is LoopOutcome.DONE, report.reason
    assert phases(model) == ["PLAN", "DO", "DO", "CHECK", "DO", "CHECK", "SELF_IMPROVE"]
    results = results_of(rt, report.root_id)
    do_refused = [r["content"] for r in results[3:7]]
    assert all(t.startswith(REFUSED) for t in do_refused), do_refused
    assert "n1" in do_refused[0] and "n2" in do_refused[0]
    assert "conclusion" in do_refused[1]
    check = [r for r in results if r["content"].startswith(REFUSED)][4:]
    assert len(check) == 2
    assert "n2" in check[0]["content"] and "artifacts" in check[1]["content"]
    ws = workspace(rt)
    assert ws.nodes["n2"].notes == "" and ws.nodes["n2"].status.value == "DONE"
    assert ws.nodes["n1"].notes == "report: AC1 passed"
    assert ws.nodes["n1"].artifacts == ["a.txt"]
    state = ls.get(rt.store, TASK)
    assert state is not None and state.refusals == 6
    await rt.aclose()


async def test_plan_writes_structure_only(rtws: Path) -> None:
    """PLAN records nodes, deps and summaries; a node's artifacts are the work's."""
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = ScriptedModel(
        [
            turn(create("a")),
            turn(
                call("node_update", node_id="n1", artifacts=["a.txt"]),
                call("node_update", node_id="n1", notes="plan: write a.txt"),
                end("DO"),
            ),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "make a")
    assert report.outcome is LoopOutcome.DONE, report.reason
    results = results_of(rt, report.root_id)
    assert results[1]["content"].startswith(REFUSED) and "artifacts" in results[1]["content"]
    assert not results[2]["is_error"]
    assert workspace(rt).nodes["n1"].notes == "plan: write a.txt"
    await rt.aclose()


def test_the_taskdoc_is_changed_only_where_the_matrix_allows() -> None:
    """The matrix has no Taskdoc row: `change_mind` is PLAN's (it records the plan's
    progress and distills progress.md, §7.1) and SELF_IMPROVE's (compaction), not DO's,
    CHECK's or ADJUST's."""
    with_taskdoc = {p for p, s in PHASES.items() if ToolClass.TASKDOC in s.tools}
    assert with_taskdoc == {Phase.PLAN, Phase.SELF_IMPROVE}


async def test_do_and_adjust_are_not_offered_change_mind(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs", "control"]}})
    model = ScriptedModel(
        [
            turn(create("a"), end("DO")),
            turn(call("change_mind", selector="progress", content="a is under way")),
            turn(complete("n1"), end("CHECK")),
            turn(verdict("n1"), end("END")),
            turn(end("END")),
        ]
    )
    report, rt = await run_task(rtws, model, "make a")
    assert report.outcome is LoopOutcome.DONE, report.reason
    offered = {phase_of(r): [t.name for t in r.tools] for r in model.requests}
    assert "change_mind" in offered["PLAN"] and "change_mind" in offered["SELF_IMPROVE"]
    assert "change_mind" not in offered["DO"]
    [res] = [r for r in results_of(rt, report.root_id) if r["name"] == "change_mind"]
    assert res["content"].startswith(REFUSED)
    await rt.aclose()
