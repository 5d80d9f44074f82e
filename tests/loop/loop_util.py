"""Helpers for the work-loop tests: scripted turns that plan, work, check and adjust nodes
through the real workspace tools, and a runtime wired as `mindloop run TASK` wires it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mindloop import DialogRuntime
from mindloop.loop.driver import LoopPolicies, LoopReport, TaskLoop
from mindloop.providers.base import Provider
from mindloop.testing import Call, Turn, call
from mindloop.workspace import repo
from mindloop.workspace.state import WorkspaceState

TASK = "tasks/example.tsk"


def runtime(rtws: Path, model: Provider, **kw: Any) -> tuple[DialogRuntime, LoopPolicies]:
    policies = LoopPolicies("en")
    rt = DialogRuntime(rtws, providers={"mock": model}, policies=policies, **kw)
    return rt, policies


async def run_task(
    rtws: Path, model: Provider, message: str | None = None, task: str = TASK, **kw: Any
) -> tuple[LoopReport, DialogRuntime]:
    """One `mindloop run TASK` in-process: the report and the (still open) runtime."""
    rt, policies = runtime(rtws, model, **kw)
    loop = TaskLoop(rt, policies, task)
    report = await loop.run(message)
    return report, rt


def workspace(rt: DialogRuntime, task: str = TASK) -> WorkspaceState:
    return repo.load(rt.store, task)


def create(
    title: str,
    *,
    deps: list[str] | None = None,
    bench: bool = False,
    assignee: str = "MAIN",
    verify: str | None = "true",
    step_budget: int | None = None,
) -> Call:
    args: dict[str, Any] = {
        "parent_id": "root",
        "kind": "EXECUTION",
        "title": title,
        "requirement": f"do {title}",
        "acceptance_criteria": [{"when": "done", "then": "works", "verify": verify}],
        "assignee": assignee,
    }
    if deps:
        args["deps"] = deps
    if bench:
        args["type"] = "BENCH"
    if step_budget is not None:
        args["step_budget"] = step_budget
    return call("node_create", **args)


def end(hint: str, progress: str = "ok", **summary: Any) -> Call:
    return call(
        "phase_end",
        next_behavior=hint,
        summary={"progress": progress, **summary},
        reason=f"{hint} next",
    )


def complete(node: str) -> Call:
    return call(
        "node_transition",
        node_id=node,
        to="COMPLETE",
        reason="self-check passed",
        self_check=[{"criterion": "AC1", "passed": True, "evidence": "ran it"}],
        no_artifacts_reason="a test node",
    )


def verdict(node: str, ok: bool = True) -> Call:
    if ok:
        return call(
            "node_transition", node_id=node, to="DONE", reason="checked", conclusion=f"{node} works"
        )
    return call(
        "node_transition",
        node_id=node,
        to="CHECK_FAILED",
        reason="the check failed",
        evidence="AC1 failed",
    )


def give_up(node: str, why: str) -> Call:
    """ADJUST judges the node infeasible: FAILED, with `why` as its conclusion."""
    return call(
        "node_transition", node_id=node, to="FAILED", reason="cannot be done", conclusion=why
    )


def retry(node: str) -> Call:
    """ADJUST sends the node back to work (on an accepted cycle: `cycle` first)."""
    return call("node_transition", node_id=node, to="IN_PROGRESS", reason="a new approach")


def cycle(plan: str, kind: str = "STRATEGY", failure: str = "CHECK_FAIL") -> Call:
    """ADJUST proposes a cycle (`retry_propose`): its fix plan is its fingerprint."""
    return call(
        "retry_propose",
        failure_class=failure,
        evidence="check report: AC1 failed, empty input crashes the parser",
        reflection="WRONG_APPROACH: the check report shows the empty case is unhandled",
        change_kind=kind,
        change_summary=plan,
        plan=plan,
    )


def turn(*calls: Call, text: str = "") -> Turn:
    return Turn(text=text, tool_calls=list(calls))


PHASE_LINE = "# Work loop phase: "


def phase_of(req: Any) -> str | None:
    """The work-loop phase a request is in (its system prompt says), None outside one."""
    for line in req.system.splitlines():
        if line.startswith(PHASE_LINE):
            return str(line.removeprefix(PHASE_LINE))
    return None


def phases(model: Any) -> list[str]:
    """The phase of each root request the model saw, in order."""
    return [p for req in model.requests if (p := phase_of(req)) is not None]


def per_member(**turns: list[Any]) -> Mapping[str, list[Any]]:
    return turns
