"""The phases of the work loop as one table: what each may do and what may follow.

agent-loop §3 gives each phase a row of the tool matrix, a step cap (`loop.phases` in
team.yaml, `step_cap`) and (§4) the hints it may give when it ends. Here that is data: `PHASES` maps a `Phase` to a `PhaseSpec`; the
turn policy (`policy.py`), the router (`routing.py`) and the docs read the same rows, so
the prompt, the enforcement and the printed table cannot drift apart.

Tools fall into classes (`ToolClass`) by name (`TOOL_CLASSES`); a tool the table does not
name (an MCP or Python tool) counts as `WRITE`, so it is offered only where workspace
writes are (DO): a loop phase never runs a tool whose effects nobody classified. The
loop-owned tools (`phase_end`, the workspace tools, `wait_for`, `self_md_patch`,
`kb_request`, `retry_propose`; DESIGN.md §8.9) are offered by the phase whatever the member's toolsets
say; every other tool must also be one of the member's.

Some cells depend on a call's arguments, not only on the tool; a row says how
(`node_scope`, `node_fields`, `shell`) and the turn policy checks the call
(`phase_calls.py`). How the cells that need reading are read:

- **DO, node updates: "own node: notes and artifacts".** `node_update`,
  `node_transition`, `node_dispatch` and a `doc_lookup` that references docs on a node
  act only on the node the entry works (`NodeScope.OWN`); `node_update` sets only notes
  and artifacts (a conclusion belongs to a terminal status, which DO never sets); the
  moves are those the transition table gives DO (COMPLETE, CHECK_FAILED), checked by the
  workspace. Dispatching its own node to a member is DO's "wait on a member's reply".
- **CHECK, node updates: "report"**, and "must not write anything but the check report".
  The report is the phase's summary (`phase_end`) plus, on each node under check (the
  entry's targets, `NodeScope.TARGETS`), its verdict (`node_transition` to DONE or
  CHECK_FAILED with evidence and a conclusion) and its notes or conclusion
  (`node_update`); a node's artifacts, and nodes not under check, are not CHECK's. No
  workspace write tool is offered.
- **CHECK, shell: "test runners only".** A command line made of the test runners of
  `loop.check.test_runners` (optionally piped into `loop.check.pipe_filters`), or exactly
  a `verify` command of a criterion of a node under check (`runners.py`).
- **PLAN, workspace write: "structure only".** No file writes and no shell; nodes, deps,
  doc references, rules and summaries: `node_update` sets notes and conclusions, not
  artifacts (those are deliverables). `change_mind` stays: PLAN records the plan's
  progress in the Taskdoc and distills progress.md when it passes its budget (§7.1).
- **The Taskdoc (`change_mind`)** has no row in the matrix; only PLAN and SELF_IMPROVE
  (memory compaction) are offered it. DO works one node and must not widen the scope,
  CHECK writes only its report, ADJUST changes the plan through the nodes.
- **Control tools** (reminders, `clear_mind`) touch only the dialog's own memory, not the
  workspace: every phase has them. **`doc_lookup`** is a read (it indexes the docs it
  finds, bookkeeping of the index), with the node scope above when it names a node.
- **SELF_IMPROVE, node updates: "consistency"**: any node, any field; it is no actor of
  the transition table, so it moves no node.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mindloop.config.loop import LoopPhaseName, PhaseSteps
from mindloop.store.loop_state import Hint, Phase


class NodeScope(StrEnum):
    """Which nodes a phase's node tools may act on."""

    ANY = "any node"
    OWN = "own node"  # the node the DO entry works
    TARGETS = "nodes under check"  # the COMPLETE and ready BENCH nodes CHECK was given


class ShellScope(StrEnum):
    ANY = "any command"
    TEST_RUNNERS = "test runners only"  # `loop.check`, or a verify command under check


# The code of a call or tellask the phase's row of the matrix does not allow.
TOOL_NOT_ALLOWED_IN_PHASE = "TOOL_NOT_ALLOWED_IN_PHASE"

# `node_update`'s fields (agent-loop §5.1: a node's notes, artifacts, conclusion).
UPDATE_FIELDS: frozenset[str] = frozenset({"notes", "artifacts", "conclusion"})


class ToolClass(StrEnum):
    """The rows of the tool matrix (agent-loop §3)."""

    READ = "workspace read"
    WRITE = "workspace write"
    SHELL = "shell"
    NODE_STRUCTURE = "node structure"  # node_create, node_split, node_reference, node_add_deps
    NODE_UPDATE = "node update"  # node_update, node_transition
    DISPATCH = "dispatch"  # node_dispatch: a tellask for a MEMBER node
    TASKDOC = "taskdoc"  # change_mind
    CONTROL = "control"  # reminders, clear_mind: the dialog's own memory
    WAIT_FOR = "wait_for"
    SELF_IMPROVE = "self-improve"  # self_md_patch, kb_request
    RETRY = "retry"  # retry_propose: a DO self-repair attempt, an ADJUST cycle
    PHASE_END = "phase_end"


PHASE_END = "phase_end"

# Every tool mindloop ships, by class. A tool not listed is WRITE (see the module doc).
TOOL_CLASSES: dict[str, ToolClass] = {
    "read_file": ToolClass.READ,
    "list_dir": ToolClass.READ,
    "search": ToolClass.READ,
    "recall_taskdoc": ToolClass.READ,
    "node_get": ToolClass.READ,
    "node_list": ToolClass.READ,
    "doc_lookup": ToolClass.READ,
    "write_file": ToolClass.WRITE,
    "move": ToolClass.WRITE,
    "delete": ToolClass.WRITE,
    "run_shell": ToolClass.SHELL,
    "node_create": ToolClass.NODE_STRUCTURE,
    "node_split": ToolClass.NODE_STRUCTURE,
    "node_reference": ToolClass.NODE_STRUCTURE,
    "node_add_deps": ToolClass.NODE_STRUCTURE,
    "rule_add": ToolClass.NODE_STRUCTURE,
    "node_update": ToolClass.NODE_UPDATE,
    "node_transition": ToolClass.NODE_UPDATE,
    "node_dispatch": ToolClass.DISPATCH,
    "change_mind": ToolClass.TASKDOC,
    "add_reminder": ToolClass.CONTROL,
    "update_reminder": ToolClass.CONTROL,
    "delete_reminder": ToolClass.CONTROL,
    "clear_mind": ToolClass.CONTROL,
    "wait_for": ToolClass.WAIT_FOR,
    "self_md_patch": ToolClass.SELF_IMPROVE,
    "kb_request": ToolClass.SELF_IMPROVE,
    "retry_propose": ToolClass.RETRY,
    PHASE_END: ToolClass.PHASE_END,
}

# Offered by the phase whatever the member's toolsets (DESIGN.md §8.9).
LOOP_OWNED: frozenset[str] = frozenset(
    {
        "node_get",
        "node_list",
        "doc_lookup",
        "node_create",
        "node_split",
        "node_reference",
        "node_add_deps",
        "rule_add",
        "node_update",
        "node_transition",
        "node_dispatch",
        "wait_for",
        "self_md_patch",
        "kb_request",
        "retry_propose",
        PHASE_END,
    }
)


def step_cap(steps: PhaseSteps, phase: Phase) -> int:
    """A phase's step cap per entry (`loop.phases` in team.yaml)."""
    return steps.for_phase(PHASE_KEYS[phase])


PHASE_KEYS: dict[Phase, LoopPhaseName] = {
    Phase.PLAN: "plan",
    Phase.DO: "do",
    Phase.CHECK: "check",
    Phase.ADJUST: "adjust",
    Phase.SELF_IMPROVE: "self_improve",
}


def tool_class(name: str) -> ToolClass:
    return TOOL_CLASSES.get(name, ToolClass.WRITE)


@dataclass(frozen=True)
class PhaseSpec:
    """One row of the phase table."""

    phase: Phase
    tools: frozenset[ToolClass]  # the tool matrix's row
    tellask: bool  # `!?@member` (and `!?@self`, FBR): a side dialog the phase waits on
    q4h: bool  # `!?@human`
    hints: tuple[Hint, ...]  # legal `next_behavior` hints when it ends (§4)
    actor: str | None  # who the phase is in the transition table (workspace `Actor`)
    # Asked to distill progress.md (change_mind) when the Taskdoc passed its budget (§7.1).
    distills_taskdoc: bool = False
    node_scope: NodeScope = NodeScope.ANY  # the nodes its node tools may act on
    node_fields: frozenset[str] = UPDATE_FIELDS  # what its `node_update` may set
    shell: ShellScope = ShellScope.ANY  # what its shell may run (where it has one)

    def allows(self, tool: str) -> bool:
        return tool_class(tool) in self.tools


_C = ToolClass
_ALWAYS = frozenset({_C.READ, _C.CONTROL, _C.PHASE_END})

PHASES: dict[Phase, PhaseSpec] = {
    Phase.PLAN: PhaseSpec(
        Phase.PLAN,
        tools=_ALWAYS | {_C.NODE_STRUCTURE, _C.NODE_UPDATE, _C.DISPATCH, _C.TASKDOC, _C.WAIT_FOR},
        tellask=True,
        q4h=True,
        hints=(Hint.DO, Hint.WAIT, Hint.END),
        actor="PLAN",
        distills_taskdoc=True,
        node_fields=frozenset({"notes", "conclusion"}),  # structure only: no deliverables
    ),
    Phase.DO: PhaseSpec(
        Phase.DO,
        tools=_ALWAYS | {_C.WRITE, _C.SHELL, _C.NODE_UPDATE, _C.DISPATCH, _C.WAIT_FOR, _C.RETRY},
        tellask=True,
        q4h=True,
        hints=(Hint.CHECK, Hint.ADJUST, Hint.WAIT),
        actor="DO",
        node_scope=NodeScope.OWN,  # "own node: notes and artifacts"
        node_fields=frozenset({"notes", "artifacts"}),
    ),
    Phase.CHECK: PhaseSpec(
        Phase.CHECK,
        tools=_ALWAYS | {_C.SHELL, _C.NODE_UPDATE},
        tellask=False,
        q4h=False,
        hints=(Hint.DO, Hint.ADJUST, Hint.END),
        actor="CHECK",
        node_scope=NodeScope.TARGETS,  # "report": verdicts and notes on what it checks
        node_fields=frozenset({"notes", "conclusion"}),
        shell=ShellScope.TEST_RUNNERS,
    ),
    Phase.ADJUST: PhaseSpec(
        Phase.ADJUST,
        tools=_ALWAYS | {_C.NODE_STRUCTURE, _C.NODE_UPDATE, _C.DISPATCH, _C.WAIT_FOR, _C.RETRY},
        tellask=True,
        q4h=True,
        hints=(Hint.DO, Hint.PLAN, Hint.WAIT, Hint.END),
        actor="ADJUST",
    ),
    Phase.SELF_IMPROVE: PhaseSpec(
        Phase.SELF_IMPROVE,
        tools=_ALWAYS | {_C.NODE_UPDATE, _C.TASKDOC, _C.SELF_IMPROVE},
        tellask=False,
        q4h=False,
        hints=(Hint.END,),
        actor=None,
        distills_taskdoc=True,
    ),
}


_NODE_TOOLS = frozenset({ToolClass.NODE_STRUCTURE, ToolClass.NODE_UPDATE, ToolClass.DISPATCH})


def matrix_markdown() -> str:
    """The tool matrix as the docs print it (checked against the table by a test)."""
    order = list(Phase)
    lines = [
        "| Tool class | " + " | ".join(order) + " |",
        "|---|" + "---|" * len(order),
    ]
    for cls in ToolClass:
        cells = ["✓" if cls in PHASES[p].tools else "–" for p in order]
        lines.append(f"| {cls} | " + " | ".join(cells) + " |")
    for label, attr in (("tellask `!?@member`, `!?@self`", "tellask"), ("Q4H `!?@human`", "q4h")):
        cells = ["✓" if getattr(PHASES[p], attr) else "–" for p in order]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    # the cells that depend on the arguments (`phase_calls`)
    cells = [PHASES[p].node_scope.value if PHASES[p].tools & _NODE_TOOLS else "–" for p in order]
    lines.append("| node tools act on | " + " | ".join(cells) + " |")
    cells = [", ".join(sorted(PHASES[p].node_fields)) for p in order]
    lines.append("| `node_update` sets | " + " | ".join(cells) + " |")
    cells = [PHASES[p].shell.value if ToolClass.SHELL in PHASES[p].tools else "–" for p in order]
    lines.append("| shell runs | " + " | ".join(cells) + " |")
    caps = PhaseSteps()  # the defaults of `loop.phases` in team.yaml
    lines.append(
        "| steps per entry (default) | " + " | ".join(str(step_cap(caps, p)) for p in order) + " |"
    )
    return "\n".join(lines)
