"""The argument models of the `workspace` toolset: strict (an unknown argument is an
error), closed enums (an unknown value is an error naming the allowed ones), and sizes from
`workspace.fields.LIMITS`, so the JSON schema a model sees states the same limits the
commands enforce."""

from __future__ import annotations

from pydantic import Field

from mindloop.tools.registry import ToolArgs
from mindloop.workspace.fields import LIMITS
from mindloop.workspace.models import MAIN, ROOT_ID, NodeKind, NodeStatus, NodeType, RefAction

_L = LIMITS


class DocArg(ToolArgs):
    path: str = Field(
        max_length=_L["path"],
        description="rtws-relative path of a project file, or an http(s) URL.",
    )
    description: str = Field(default="", max_length=_L["description"])


class CriterionArg(ToolArgs):
    when: str = Field(max_length=_L["criterion_text"], description="The situation.")
    then: str = Field(max_length=_L["criterion_text"], description="The expected result.")
    verify: str | None = Field(
        default=None,
        max_length=_L["criterion_text"],
        description="A command that checks it, or `MANUAL:<procedure>`.",
    )
    id: str | None = Field(default=None, max_length=40, description="Default: AC1, AC2, ...")


class SelfCheckArg(ToolArgs):
    criterion: str = Field(description="The acceptance criterion's id (AC1 …).")
    passed: bool
    evidence: str = Field(default="", max_length=_L["evidence"])


class NodeCreateArgs(ToolArgs):
    parent_id: str = Field(description="A planning node (`root` is one).")
    kind: NodeKind = Field(description="PLANNING groups children; EXECUTION is worked on.")
    title: str = Field(max_length=_L["title"], description='One line, no / \\ : * ? " < > |.')
    requirement: str = Field(
        max_length=_L["requirement"],
        description="What the node must achieve, with its own constraints. Structure it "
        "with `###` sub-headings if needed (a line starting `## ` is refused).",
    )
    docs: list[DocArg] | None = Field(
        default=None,
        max_length=_L["list"],
        description="Exactly the docs this node gets (nothing is inherited from its "
        "parent); each is added to the workspace index if it is not there.",
    )
    acceptance_criteria: list[CriterionArg] | None = Field(
        default=None, max_length=_L["list"], description="How the node is judged done."
    )
    type: NodeType = Field(default=NodeType.TASK, description="BENCH: an integration test.")
    deps: list[str] | None = Field(default=None, max_length=_L["list"], description="Node ids.")
    skills: list[str] | None = Field(
        default=None, max_length=_L["list"], description="Skills the work needs."
    )
    assignee: str = Field(default=MAIN, description="MAIN, or MEMBER:<member id>.")
    can_start_immediately: bool = Field(
        default=False, description="Independent of earlier siblings: may start at once."
    )
    supersedes: str | None = Field(
        default=None,
        description="A terminal node (DONE, FAILED, CANCELLED) this one reopens; terminal "
        "nodes are final, so new work on them is a new node pointing back.",
    )
    step_budget: int | None = Field(
        default=None,
        ge=1,
        description="DO steps one attempt at this node may take (default: the team's "
        "loop.nodes.step_budget); give a large node more, up to loop.nodes.max_step_budget.",
    )


class NodeSplitArgs(ToolArgs):
    parent_id: str = Field(
        description="An IN_PROGRESS node. An execution node becomes a planning node whose "
        "children are the new node and the rest of its own work."
    )
    title: str = Field(max_length=_L["title"], description="The new node's title, one line.")
    requirement: str = Field(
        max_length=_L["requirement"], description="What the new node must achieve."
    )
    docs: list[DocArg] | None = Field(
        default=None, max_length=_L["list"], description="Exactly the docs the new node gets."
    )
    inherit_context: bool = Field(
        default=True, description="false: the new node is isolated (no ancestor chain)."
    )


class NodeReferenceArgs(ToolArgs):
    node_id: str = Field(description="The node's id (n1, n2 …; the root is `root`).")
    target: str = Field(max_length=_L["path"], description="The doc's path or URL.")
    action: RefAction = Field(
        description="add | remove | expire (kept, listed, never in a prompt) | activate."
    )
    description: str | None = Field(
        default=None, max_length=_L["description"], description="The doc's description."
    )
    expected_version: int | None = Field(
        default=None, description="The node's version you last read; refused if it moved on."
    )


class NodeAddDepsArgs(ToolArgs):
    node_id: str = Field(description="A node that has not started (NEW, or a BENCH in WAIT).")
    deps: list[str] = Field(
        min_length=1,
        max_length=_L["list"],
        description="Node ids it must wait for (added to its deps; the deps stay a DAG).",
    )
    expected_version: int | None = Field(
        default=None, description="The node's version you last read; refused if it moved on."
    )


class NodeGetArgs(ToolArgs):
    node_id: str = Field(description="The node's id (n1, n2 …; the root is `root`).")


class NodeListArgs(ToolArgs):
    root_id: str = Field(default=ROOT_ID, description="List this node's subtree.")
    depth: int | None = Field(default=None, ge=0, description="Levels below root_id.")


class NodeUpdateArgs(ToolArgs):
    node_id: str = Field(description="The node's id (n1, n2 …; the root is `root`).")
    notes: str | None = Field(
        default=None, max_length=_L["notes"], description="Working notes (replaced)."
    )
    artifacts: list[str] | None = Field(
        default=None, max_length=_L["list"], description="The node's artifacts (replaced)."
    )
    conclusion: str | None = Field(
        default=None, max_length=_L["conclusion"], description="The node's result."
    )
    expected_version: int | None = Field(
        default=None, description="The node's version you last read; refused if it moved on."
    )


class NodeTransitionArgs(ToolArgs):
    node_id: str = Field(description="The node's id (n1, n2 …; the root is `root`).")
    to: NodeStatus = Field(description="The status to move to.")
    reason: str = Field(max_length=_L["reason"], description="Why, one line.")
    evidence: str | None = Field(
        default=None,
        max_length=_L["evidence"],
        description="What shows it (a command's result, a ref); for COMPLETE the "
        "checkpoint, for DONE the checked ref.",
    )
    self_check: list[SelfCheckArg] | None = Field(
        default=None,
        max_length=_L["list"],
        description="For COMPLETE: every acceptance criterion, passed.",
    )
    no_artifacts_reason: str | None = Field(
        default=None, max_length=_L["reason"], description="For COMPLETE without artifacts."
    )
    conclusion: str | None = Field(
        default=None,
        max_length=_L["conclusion"],
        description="Required for DONE, FAILED, CANCELLED.",
    )
    expected_version: int | None = Field(
        default=None, description="The node's version you last read; refused if it moved on."
    )


class NodeDispatchArgs(ToolArgs):
    node_id: str = Field(description="The node's id (n1, n2 …; the root is `root`).")
    member: str | None = Field(
        default=None, description="Give the node to this member (default: its assignee)."
    )
    expected_version: int | None = Field(
        default=None, description="The node's version you last read; refused if it moved on."
    )


class DocLookupArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=_L["query"], description="A name or topic.")
    node_id: str | None = Field(default=None, description="Reference what is found on this node.")


class RuleAddArgs(ToolArgs):
    rule: str = Field(max_length=_L["rule"], description="The rule, one line.")
    quote: str = Field(
        max_length=_L["quote"],
        description="The user's words in this dialog that state it, verbatim.",
    )
