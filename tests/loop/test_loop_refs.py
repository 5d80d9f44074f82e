"""A node's workspace refs and its check report (agent-loop §5.1, §5.4), recorded by the
runtime in the running loop: `checkpoint_ref` is the workspace (git HEAD plus a hash of
what differs from it, or a tree hash without git) when DO moves the node to COMPLETE,
`checked_ref` the workspace when CHECK passes it; the model's `evidence` is logged as
evidence, never taken for a ref. When CHECK moves a node to DONE or CHECK_FAILED, its
`check_report_ref` names the report: that transition's worklog row (the verdict, its
reason and evidence, the ref), which `node show` and `status` print."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from mindloop.loop.api import task_status
from mindloop.loop.driver import LoopOutcome
from mindloop.testing import Call, call
from mindloop.workspace import repo
from mindloop.workspace.ref import workspace_ref
from tests.loop.loop_util import (
    TASK,
    WorkScript,
    create,
    end,
    give_up,
    run_task,
    turn,
    verdict,
    workspace,
)
from tests.scenario_util import ml, write_team


def write(path: str, content: str) -> Call:
    return call("write_file", path=path, content=content)


def complete(node: str, evidence: str) -> Call:
    return call(
        "node_transition",
        node_id=node,
        to="COMPLETE",
        reason="self-check passed",
        evidence=evidence,
        self_check=[{"criterion": "AC1", "passed": True, "evidence": "ran it"}],
        no_artifacts_reason="a test node",
    )


def transitions(rt: Any, node: str) -> list[Any]:
    return [e for e in repo.log(rt.store, TASK) if e.node_id == node and e.kind == "transition"]


async def test_refs_are_the_workspace_at_complete_and_check_and_the_report_is_the_verdict(
    rtws: Path,
) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    model = WorkScript(
        [
            turn(create("a"), create("b"), end("DO")),  # PLAN
            turn(write("a.txt", "a\n")),  # DO n1
            turn(complete("n1", "tests green"), end("CHECK")),
            turn(verdict("n1"), end("DO")),  # CHECK: n1 DONE
            turn(write("b.txt", "b\n")),  # DO n2
            turn(complete("n2", "looks fine"), end("CHECK")),
            turn(verdict("n2", ok=False), end("ADJUST")),  # CHECK: n2 fails ("AC1 failed")
            turn(give_up("n2", "b cannot be done"), end("END")),  # ADJUST
        ]
    )
    report, rt = await run_task(rtws, model, "make a and b")
    assert report.outcome is LoopOutcome.FAILED and model.remaining == 0, report.reason
    ws = workspace(rt)
    n1, n2 = ws.nodes["n1"], ws.nodes["n2"]
    both = workspace_ref(rtws)  # a.txt and b.txt: what n2 completed with
    assert both.startswith("tree:")
    assert n2.checkpoint_ref == both and n2.checked_ref is None  # it failed its check
    (rtws / "b.txt").unlink()
    only_a = workspace_ref(rtws)
    assert n1.checkpoint_ref == only_a and n1.checked_ref == only_a != both
    # the model's evidence is evidence: in the transition's row, not a ref
    [done_n1] = [e for e in transitions(rt, "n1") if e.data["to"] == "COMPLETE"]
    assert done_n1.data["evidence"] == "tests green" and done_n1.data["ref"] == only_a
    # the check report: the CHECK transition's worklog row
    [passed] = [e for e in transitions(rt, "n1") if e.data["by"] == "CHECK"]
    [failed] = [e for e in transitions(rt, "n2") if e.data["by"] == "CHECK"]
    assert n1.check_report_ref == f"worklog:{passed.id}" and passed.data["to"] == "DONE"
    assert passed.data["ref"] == only_a
    assert n2.check_report_ref == f"worklog:{failed.id}" and failed.data["to"] == "CHECK_FAILED"
    assert failed.data["evidence"] == "AC1 failed" and failed.data["reason"] == "the check failed"
    assert failed.id in n2.worklog_refs
    # `status` names each checked node's report
    st = task_status(rt.store, TASK)
    line = {n.id: n for n in st.nodes}
    assert line["n2"].check_report == (
        f"worklog:{failed.id} COMPLETE → CHECK_FAILED by CHECK: the check failed "
        "(evidence: AC1 failed)"
    )
    assert line["n1"].check_report.startswith(f"worklog:{passed.id} COMPLETE → DONE by CHECK")
    await rt.aclose()
    # `node show` prints the report, its JSON carries it
    out = ml("node", "show", "-C", str(rtws), TASK, "n2")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert f"Check report (worklog:{failed.id})" in text
    assert "COMPLETE → CHECK_FAILED by CHECK: the check failed" in text
    assert "evidence: AC1 failed" in text
    assert f"checkpoint {both}" in text
    shown = json.loads(ml("node", "show", "-C", str(rtws), TASK, "n2", "--json").stdout)
    assert shown["check_report"]["id"] == failed.id
    assert shown["node"]["check_report_ref"] == f"worklog:{failed.id}"
    out = ml("status", "-C", str(rtws), TASK)
    assert out.returncode in (0, 5), out.stderr
    assert f"report worklog:{failed.id}" in out.stdout


def _git(rtws: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=rtws,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


async def test_in_git_the_refs_are_head_plus_what_differs_from_it(rtws: Path) -> None:
    write_team(rtws, {"dev": {"toolsets": ["fs"]}})
    _git(rtws, "init", "-q")
    _git(rtws, "add", "-A")
    _git(rtws, "commit", "-q", "-m", "start")
    head = _git(rtws, "rev-parse", "HEAD")
    model = WorkScript(
        [
            turn(create("a"), end("DO")),  # PLAN
            turn(write("a.txt", "a\n")),  # DO
            turn(complete("n1", "HEAD is fine"), end("CHECK")),
            turn(verdict("n1"), end("END")),  # CHECK
        ]
    )
    report, rt = await run_task(rtws, model, "make a")
    assert report.outcome is LoopOutcome.DONE, report.reason
    n1 = workspace(rt).nodes["n1"]
    assert n1.checkpoint_ref is not None
    assert n1.checkpoint_ref.startswith(f"git:{head}+dirty:")  # a.txt, not committed
    assert n1.checked_ref == n1.checkpoint_ref == workspace_ref(rtws)
    _git(rtws, "add", "a.txt")
    _git(rtws, "commit", "-q", "-m", "a")
    assert workspace_ref(rtws) == f"git:{_git(rtws, 'rev-parse', 'HEAD')}"
    await rt.aclose()
