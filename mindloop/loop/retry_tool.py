"""`retry_propose`: how DO records a self-repair attempt and ADJUST an adjust cycle
(agent-loop §8.2–8.3), a loop-owned tool of the DO and ADJUST phases.

The model proposes what its retry answers (the failure class and the failing output,
which the runtime digests), a reflection, the kind of change and a summary; ADJUST also
gives its fix plan. The runtime fingerprints the retry — a DO attempt by the workspace
as it is when the attempt is proposed, after a failed self-check and before its change
(its ref: git HEAD plus a hash of what differs from it, or a tree hash without git; the
same ref twice means the attempt in between changed nothing), an ADJUST cycle by its
normalised plan — and puts it to the node's `RetryLedger` in the transaction that
records the call's result:

- **accepted**: the RetryRecord is written. In DO, the entry may change files again
  (after a failed self-check the runtime refuses changes until then: `self_repair`),
  then runs the self-check again; in ADJUST, the node may now go back to work
  (`node_transition` → IN_PROGRESS, or `node_dispatch`), which the workspace refuses
  without an accepted cycle it has not used (`RETRY_RECORD_REQUIRED`);
- **rejected** (a fingerprint repeating an earlier attempt, rules (a)–(e), a reflection
  over `loop.retries.reflection_tokens`): nothing is written; the model must propose
  another;
- **exhausted**: past `loop.retries.do_repairs` (2) attempts of one DO entry the entry
  ends and its node goes to CHECK_FAILED(DO_EXHAUSTED), for ADJUST to analyse (a failed
  self-check with no attempt left ends it the same way without a call: `self_repair`); past
  `loop.retries.adjust_per_node` (3) cycles the ADJUST entry ends and the runtime fails
  the node, telling the user (the driver, `phase_ops.fail_at_adjust_cap`).

The tool is registered in the runtime's registry when the loop binds to it
(`LoopPolicies.bind`, which also hands it the runtime's store): its rules live in this
layer, above the toolsets. Like the workspace tools, a call is judged against the store as
it is when the tool runs (the result the live view shows), then again in the step's
transaction, whose verdict stands (it replaces the first when they differ).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from mindloop.config.loop_retries import RetriesConfig
from mindloop.dialogs.wait_kinds import WaitKind, WaitOutcome
from mindloop.errors import NotFoundError
from mindloop.loop.ladder import TAXONOMY, Exhausted, FailureClass, Level
from mindloop.loop.phases import Phase
from mindloop.loop.retries import (
    Accepted,
    ChangeKind,
    Rejected,
    RetryLedger,
    RetryProposal,
    evidence_digest,
    plan_fingerprint,
)
from mindloop.store import Store, WaitStatus
from mindloop.store import loop_state as ls
from mindloop.tools.base import EffectResult, StoreEffect, Tool, ToolContext, ToolOutput
from mindloop.tools.offload import run_blocking
from mindloop.tools.registry import ToolArgs
from mindloop.workspace import repo
from mindloop.workspace.models import NodeType
from mindloop.workspace.ref import workspace_ref

RETRY_TOOL = "retry_propose"
RETRY_TOOLSET = "loop_retries"
EVIDENCE_CHARS = 20_000

# The retry level of each phase that retries.
LEVELS: dict[Phase, Level] = {Phase.DO: Level.L2, Phase.ADJUST: Level.L3}
# The failures a retry of each level answers (agent-loop §8.1): DO repairs what its own
# self-check or tools found; ADJUST any failure that brought the node to it.
ANSWERS: dict[Level, frozenset[FailureClass]] = {
    Level.L2: frozenset({FailureClass.VERIFY_FAIL, FailureClass.TOOL_ERROR}),
    Level.L3: frozenset(c for c, rule in TAXONOMY.items() if rule.counts_toward is not None),
}
# How a result that ends the entry starts (the phase's policy then stops the drive).
DO_EXHAUSTED = "DO_EXHAUSTED"
ADJUST_EXHAUSTED = "ADJUST_EXHAUSTED"
ENDS_ENTRY = (DO_EXHAUSTED, ADJUST_EXHAUSTED)
# How an accepted DO self-repair attempt's result starts (`self_repair` reads it back).
L2_ACCEPTED = "ACCEPTED: DO self-repair attempt"


class RetryProposeArgs(ToolArgs):
    failure_class: FailureClass = Field(
        description="What failed: DO: VERIFY_FAIL (its self-check) or TOOL_ERROR; ADJUST: "
        "the failure that brought the node here (CHECK_FAIL, BENCH_FAIL, WAIT_NEGATIVE, "
        "STUCK, VERIFY_FAIL …)."
    )
    evidence: str = Field(
        max_length=EVIDENCE_CHARS,
        description="The failing output as it is (test log, check report, error).",
    )
    evidence_refs: list[str] = Field(
        default_factory=list, description="Where it is: worklog ids, files, message ids."
    )
    reflection: str = Field(
        description="Why it failed and what to do differently, at most 120 tokens."
    )
    change_kind: ChangeKind = Field(
        description="What this retry changes: PARAMS, STRATEGY, TOOL or CONTEXT (DO and "
        "ADJUST); DECOMPOSE, ASSIGNEE or ACCEPTANCE (ADJUST only)."
    )
    change_summary: str = Field(description="What changes, in one line.")
    plan: str | None = Field(
        default=None,
        description="ADJUST: this cycle's fix plan (it must differ from the earlier ones). "
        "DO: leave it out (an attempt is told apart by the workspace's changes).",
    )
    relaxes_acceptance: bool = Field(
        default=False,
        description="ACCEPTANCE: the change weakens a criterion. The call then waits for "
        "the human's approval (it runs once they approve; a rejection comes as a note).",
    )
    approval_id: str | None = Field(
        default=None,
        description="An approval the user gave for relaxing a criterion (leave it out: "
        "the runtime asks for one).",
    )


DESCRIPTION = (
    "Record a retry of the current node: in DO a self-repair attempt (after a failed "
    "self-check, before changing anything: the runtime refuses changes until one is "
    "recorded; at most {repairs} per entry, then the entry ends DO_EXHAUSTED), in ADJUST a "
    "cycle (before sending the node back to work; at most {cycles} per node). The runtime "
    "refuses a retry that repeats an earlier one (nothing changed since an earlier attempt, "
    "the same plan) or breaks a rule, and says which; then propose a different one."
)


def asks_approval(arguments: str) -> bool:
    """Rule (e): a retry that relaxes an acceptance criterion runs only once the human
    approved it (the call waits for their decision, WAIT_USER_APPROVAL); the approved
    call then carries its approval (`ToolContext.approval_id`)."""
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return False  # the call fails validation anyway
    return (
        isinstance(args, dict)
        and args.get("change_kind") == ChangeKind.ACCEPTANCE.value
        and args.get("relaxes_acceptance") is True
        and not args.get("approval_id")
    )


def approved(store: Store, approval_id: str) -> bool:
    """Whether `approval_id` is an approval the user gave (rule (e))."""
    try:
        rec = store.get_wait(approval_id)
    except NotFoundError:
        return False
    outcome = (rec.resolution or {}).get("outcome")
    return (
        rec.kind == WaitKind.APPROVAL
        and rec.status is WaitStatus.RESOLVED
        and outcome == WaitOutcome.OK.value
    )


def _fingerprint_of_workspace(rtws: Path) -> str:
    """A DO attempt's fingerprint: the workspace's state as the attempt starts from it
    (what its failed self-check saw)."""
    ref = workspace_ref(rtws)
    return hashlib.sha256(f"workspace:{ref}".encode()).hexdigest()


class RetryTool:
    """`retry_propose` under one `loop.retries` config; `store` is the runtime's (set by
    the loop when it binds; reads only, for the verdict shown before the commit)."""

    def __init__(self, config: RetriesConfig) -> None:
        self.config = config
        self.store: Store | None = None

    async def run(self, args: RetryProposeArgs, ctx: ToolContext) -> ToolOutput:
        return await _propose(args, ctx, self.config, self.store)

    def tools(self) -> list[Tool[Any]]:
        """The `loop_retries` toolset."""
        text = DESCRIPTION.format(
            repairs=self.config.do_repairs, cycles=self.config.adjust_per_node
        )
        return [
            Tool(
                RETRY_TOOL,
                text,
                RetryProposeArgs,
                self.run,
                RETRY_TOOLSET,
                store_only=True,
                asks_approval=asks_approval,
            )
        ]


async def _propose(
    args: RetryProposeArgs, ctx: ToolContext, config: RetriesConfig, store: Store | None
) -> ToolOutput:
    phase = Phase.__members__.get(ctx.phase or "")
    level = LEVELS.get(phase) if phase is not None else None
    if phase is None or level is None:
        where = ctx.phase or "a dialog outside the work loop"
        return ToolOutput(
            f"Error: retry_propose is for the work loop's DO and ADJUST phases, not {where}.",
            is_error=True,
        )
    if args.failure_class not in ANSWERS[level]:
        allowed = ", ".join(sorted(ANSWERS[level]))
        return ToolOutput(
            f"Error: failure_class: a {phase} retry answers {allowed}, not {args.failure_class}.",
            is_error=True,
        )
    if level is Level.L3 and not (args.plan or "").strip():
        return ToolOutput("Error: plan: give this ADJUST cycle's fix plan.", is_error=True)
    if level is Level.L2 and args.plan is not None:
        return ToolOutput(
            "Error: plan is ADJUST's; a DO attempt is told apart by its workspace changes "
            "(leave plan out).",
            is_error=True,
        )
    if level is Level.L2:  # outside the transaction: a git call
        rtws = Path(ctx.rtws)
        fingerprint = await run_blocking(
            ("workspace_fingerprint", rtws), lambda: _fingerprint_of_workspace(rtws)
        )
    else:
        fingerprint = plan_fingerprint(args.plan or "")
    digest = evidence_digest(args.evidence)
    root = ctx.dialog_id
    if args.approval_id is None and ctx.approval_id is not None:  # the human approved it
        args = args.model_copy(update={"approval_id": ctx.approval_id})

    def decide(at: Store, *, write: bool) -> EffectResult:
        return _decide(at, root, phase, level, args, digest, fingerprint, config, write=write)

    shown = decide(store, write=False) if store is not None else None

    def apply(at: Any) -> EffectResult | None:
        final = decide(at, write=True)
        return None if final == shown else final

    effect = StoreEffect(apply, what=RETRY_TOOL)
    if shown is None:
        return ToolOutput("(judged when the step commits)", effects=(effect,))
    return ToolOutput(shown.text, is_error=shown.is_error, effects=(effect,))


def _decide(
    store: Store,
    root: str,
    phase: Phase,
    level: Level,
    args: RetryProposeArgs,
    digest: str,
    fingerprint: str,
    config: RetriesConfig,
    *,
    write: bool,
) -> EffectResult:
    """The ledger's verdict, and (with `write`, inside the step's transaction) what it
    implies: the record written, or the entry ended."""
    state = ls.by_root(store, root)
    if state is None or not state.in_phase or state.phase is not phase:
        return EffectResult(f"Error: this dialog is not in a {phase} phase of a task's loop.", True)
    node_id = state.node_id
    if node_id is None:
        return EffectResult(
            f"Error: this {phase} entry has no current node (plan mode): nothing to retry.", True
        )
    ledger = RetryLedger(store, config)
    bench = False  # a failed BENCH goes back to WAIT (plan mode), not to work
    if level is Level.L3:
        node = repo.load(store, state.task_path).nodes.get(node_id)
        bench = node is not None and node.type is NodeType.BENCH
        used = node.adjust_count if node is not None else 0
        cycles = sum(1 for r in ledger.records(state.task_path, node_id) if r.level is Level.L3)
        if cycles > used:
            return EffectResult(
                f"Error [RETRY_CYCLE_OPEN]: ADJUST cycle {cycles} of {node_id} is accepted and "
                "not used yet: move the node (node_transition to IN_PROGRESS, or node_dispatch) "
                "instead of proposing another.",
                True,
            )
    proposal = RetryProposal(
        task_path=state.task_path,
        todo_id=node_id,
        level=level,
        entry=state.entry if level is Level.L2 else 0,
        failure_class=args.failure_class,
        evidence_digest=digest,
        evidence_refs=tuple(args.evidence_refs),
        reflection=args.reflection.strip(),
        change_kind=args.change_kind,
        change_summary=" ".join(args.change_summary.split()),
        fingerprint=fingerprint,
        relaxes_acceptance=args.relaxes_acceptance,
        approval_id=args.approval_id,
    )
    judge = ledger.propose if write else ledger.judge
    verdict = judge(proposal, approved=lambda aid: approved(store, aid))
    if isinstance(verdict, Rejected):
        return EffectResult(verdict.text().rstrip(".") + ". Nothing was recorded.", True)
    if isinstance(verdict, Accepted):
        rec = verdict.record
        if level is Level.L2:
            return EffectResult(
                f"{L2_ACCEPTED} {rec.attempt} of {config.do_repairs} for "
                f"{node_id} recorded ({rec.change_kind}: {rec.change_summary}). Make the "
                "change, then run the self-check again."
            )
        then = (
            "Now add its fix nodes to its deps (node_add_deps) and move it back to WAIT."
            if bench
            else "Now send the node back to work: node_transition to IN_PROGRESS, or "
            "node_dispatch to a member."
        )
        return EffectResult(
            f"ACCEPTED: ADJUST cycle {rec.attempt} of {config.adjust_per_node} for {node_id} "
            f"recorded ({rec.change_kind}: {rec.change_summary}). {then}"
        )
    return _exhausted(store, state, verdict, node_id, config, write=write)


def _exhausted(
    store: Store,
    state: ls.LoopState,
    verdict: Exhausted,
    node_id: str,
    config: RetriesConfig,
    *,
    write: bool,
) -> EffectResult:
    """The rung is used up: the entry ends (the driver moves the node)."""
    if verdict.level is Level.L2:
        why = (
            f"{DO_EXHAUSTED}: the {config.do_repairs} self-repair attempts of this DO entry "
            f"(loop.retries.do_repairs) did not fix {node_id}"
        )
        text = f"{why}. The DO entry ends here; ADJUST analyses the node."
    else:
        why = (
            f"{ADJUST_EXHAUSTED}: {node_id} used its {config.adjust_per_node} ADJUST cycles "
            "(loop.retries.adjust_per_node)"
        )
        text = f"{why}. The ADJUST entry ends here; the node FAILS and the user is told."
    if write:
        end = ls.PhaseEnd(by=ls.EndedBy.RUNTIME, reason=why, at=time.time())
        ls.end_phase(store, state.root_id, end)
    return EffectResult(text)
