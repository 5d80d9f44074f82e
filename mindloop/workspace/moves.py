"""Moving nodes: every status change goes through `transition` (the table of
`transitions.py`, its guards, the log row), and the runtime's own moves — a node given
to a member (`dispatch`), the member's reply (`member_reply`) — through the same `_move`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mindloop.workspace import fields
from mindloop.workspace.errors import IllegalTransition, WorkspaceError
from mindloop.workspace.models import (
    MAIN,
    MEMBER_PREFIX,
    TERMINAL,
    Node,
    NodeDispatch,
    NodeKind,
    NodeStatus,
    NodeType,
    SelfCheck,
)
from mindloop.workspace.ref import bench_scope
from mindloop.workspace.session import SessionBase, enum_value
from mindloop.workspace.state import is_ready
from mindloop.workspace.transitions import (
    Actor,
    Effect,
    Guard,
    Row,
    find_rows,
    legal_targets,
)

MAX_ADJUSTS = 3
_REF_EFFECTS = frozenset({Effect.CHECKPOINT, Effect.CHECKED})  # rows that record a ref


class Moves(SessionBase):
    """Transitions, dispatch and member replies of a session."""

    # ------------------------------------------------------------------ transitions

    def _authorise(
        self, rows: list[Row], source: NodeStatus | None, target: NodeStatus, type: NodeType
    ) -> Actor:
        return self._authorised(rows, source, target, type)[0]

    def _authorised(
        self, rows: list[Row], source: NodeStatus | None, target: NodeStatus, type: NodeType
    ) -> tuple[Actor, Row]:
        """The actor this authority takes the first row it may take as, and that row."""
        for row in rows:
            actor = self.authority.acts_as(row)
            if actor is not None:
                return actor, row
        by = self.authority.label()
        if not rows:
            legal = ", ".join(legal_targets(source, type)) or "none (terminal)"
            raise IllegalTransition(
                str(source or "–"), target.value, by, f"not in the table; legal from there: {legal}"
            )
        allowed = ", ".join(sorted({a.value for r in rows for a in r.by}))
        raise IllegalTransition(str(source or "–"), target.value, by, f"only {allowed} may take it")

    def transition(
        self,
        *,
        node_id: str,
        to: NodeStatus,
        reason: str,
        evidence: str = "",
        self_check: Sequence[SelfCheck] | None = None,
        no_artifacts_reason: str | None = None,
        conclusion: str | None = None,
        expected_version: int | None = None,
        workspace_ref: str | None = None,
    ) -> Node:
        """Move a node along a row of the table. `evidence` is the mover's and is logged;
        `workspace_ref` is the runtime's (the deliverables' state now: `workspace.ref`),
        recorded as `checkpoint_ref` / `checked_ref` by the rows that record one (None
        when it was not computed: the field is cleared, never filled from the evidence).
        A CHECK verdict's log row becomes the node's check report (`check_report_ref`,
        set when the row is written: `repo.write`)."""
        self._require_init()
        to = enum_value("to", NodeStatus, to)
        node = self.node(node_id)
        self._version(node, expected_version)
        if node.kind is NodeKind.PLANNING:
            raise WorkspaceError(
                "NODE_IS_PLANNING",
                f"{node.id} is a planning node: its status is derived from its children "
                "(invariant 7)",
                arg="node_id",
            )
        rsn = fields.line("reason", reason, "reason")
        ev = fields.line("evidence", evidence, "evidence", required=False)
        actor, row = self._authorised(
            find_rows(node.status, to, node.type), node.status, to, node.type
        )
        # what the call brings, checked before anything changes
        checks = list(self_check or [])
        if checks:
            fields.check_list("self_check", checks)
        reason_na = (
            fields.line("no_artifacts_reason", no_artifacts_reason, "reason")
            if no_artifacts_reason
            else None
        )
        concl = fields.text("conclusion", conclusion, "conclusion") if conclusion else None
        self._guard(node, row, to, checks, reason_na, concl)
        if checks:
            node.self_check = checks
        if reason_na:
            node.no_artifacts_reason = reason_na
        if concl:
            node.conclusion = concl
        self._move(node, to, actor, rsn, ev, row, ref=workspace_ref)
        return node

    def _guard(
        self,
        node: Node,
        row: Row,
        to: NodeStatus,
        checks: list[SelfCheck],
        no_artifacts: str | None,
        conclusion: str | None,
    ) -> None:
        g = row.guard
        if to in TERMINAL and not (conclusion or node.conclusion.strip()):
            raise WorkspaceError(
                "CONCLUSION_REQUIRED",
                f"{to} is terminal: give a conclusion (invariant 4)",
                arg="conclusion",
            )
        if g is Guard.READY:
            if node.assignee != MAIN:
                raise WorkspaceError(
                    "NOT_READY",
                    f"{node.id} is assigned to {node.assignee}: dispatch it (node_dispatch)",
                    arg="node_id",
                )
            if not is_ready(self.state, node):
                waiting = [
                    d for d in node.deps if self.state.view()[d].status is not NodeStatus.DONE
                ]
                raise WorkspaceError(
                    "NOT_READY",
                    f"{node.id} waits for deps that are not DONE: {', '.join(waiting)}",
                    arg="node_id",
                )
            # a scan of every node: the enum members bound once (a look-up through the
            # class costs more than the test)
            in_progress, execution = NodeStatus.IN_PROGRESS, NodeKind.EXECUTION
            busy = [
                n.id
                for n in self.state.view().values()
                if n.status is in_progress
                and n.kind is execution
                and n.assignee == MAIN
                and n.id != node.id
            ]
            if busy:
                raise WorkspaceError(
                    "CONCURRENT_EXECUTION",
                    f"{busy[0]} is IN_PROGRESS already: one MAIN node at a time (invariant 1)",
                    arg="node_id",
                )
        elif g is Guard.SELF_CHECK:
            passed = {c.criterion for c in (checks or node.self_check) if c.passed}
            missing = [c.id for c in node.acceptance_criteria if c.id not in passed]
            if missing:
                raise WorkspaceError(
                    "SELF_CHECK_REQUIRED",
                    f"COMPLETE needs a passed self-check of every acceptance criterion; "
                    f"missing: {', '.join(missing)} (invariant 3)",
                    arg="self_check",
                )
            if not node.artifacts and not (no_artifacts or node.no_artifacts_reason):
                raise WorkspaceError(
                    "ARTIFACTS_REQUIRED",
                    "COMPLETE needs artifacts (node_update) or a no_artifacts_reason (invariant 3)",
                    arg="no_artifacts_reason",
                )
        elif g is Guard.CYCLE:  # a failed BENCH re-planned: an ADJUST cycle (§8.2 L3)
            self._cycle_accepted(node)
        elif g is Guard.RETRY:
            self._cycle_accepted(node)
            if node.assignee != MAIN:
                raise WorkspaceError(
                    "NOT_MAIN", f"{node.id} is assigned to {node.assignee}", arg="node_id"
                )
        elif g is Guard.BENCH_READY:
            problem = self.bench_not_ready(node)
            if problem:
                raise WorkspaceError("BENCH_NOT_READY", problem, arg="node_id")
        elif g is Guard.MEMBER_REPLY and to is NodeStatus.COMPLETE:
            raise WorkspaceError(
                "REPLY_ONLY",
                f"{node.id} becomes COMPLETE through its member's reply, not a transition",
                arg="to",
            )
        elif g is Guard.WAITS_DONE:
            if node.type is NodeType.BENCH:  # its wait is BENCH_READY (§5.2): CHECK's
                problem = self.bench_not_ready(node)
                if problem:
                    raise WorkspaceError("BENCH_NOT_READY", problem, arg="node_id")
            if node.dispatch is not None:
                raise WorkspaceError(
                    "WAIT_OPEN", f"{node.id} still waits on @{node.dispatch.member}", arg="to"
                )
            if (to is NodeStatus.IN_PROGRESS) != node.started:
                back = "IN_PROGRESS" if node.started else "NEW"
                raise WorkspaceError(
                    "NOT_STARTED" if not node.started else "STARTED",
                    f"{node.id} {'had' if node.started else 'had not'} started: it returns "
                    f"to {back}",
                    arg="to",
                )

    def _cycle_accepted(self, node: Node) -> None:
        """A node leaves ADJUSTING for work on a cycle of its own: with the loop's
        `adjust_cycles`, an accepted ADJUST cycle it has not used yet; without (a dialog
        without phases), fewer than `MAX_ADJUSTS` adjusts so far."""
        cycles = self.authority.adjust_cycles
        if cycles is None:
            if node.adjust_count >= MAX_ADJUSTS:
                raise WorkspaceError(
                    "ADJUST_CAP",
                    f"{node.id} was adjusted {node.adjust_count} times; it can only FAIL now",
                    arg="to",
                )
            return
        accepted = cycles(self.state.task, node.id)
        if accepted <= node.adjust_count:
            raise WorkspaceError(
                "RETRY_RECORD_REQUIRED",
                f"{node.id} has no accepted ADJUST cycle left to use ({accepted} accepted, "
                f"{node.adjust_count} used): propose this one first with `retry_propose` "
                "(failure, evidence, reflection, change kind and a fix plan unlike the earlier "
                "ones), then move the node",
                arg="node_id",
            )

    def bench_not_ready(self, bench: Node) -> str | None:
        """agent-loop §5.5: why a BENCH node may not be tested now (None: it may) —
        conditions 1, 2 and 4, then condition 3 (the workspace ref against the last
        checked ref) when the authority carries its gate (the work loop's CHECK)."""
        nodes = self.state.view()
        scope = bench_scope(self.state, bench)
        open_ = [d for d in scope if nodes[d].status is not NodeStatus.DONE]
        if open_:
            return f"scope not done: {', '.join(open_)} not DONE"
        busy = [
            n.id
            for n in nodes.values()
            if n.kind is NodeKind.EXECUTION
            and (
                n.status in (NodeStatus.IN_PROGRESS, NodeStatus.ADJUSTING)
                or (n.status is NodeStatus.WAIT and n.dispatch is not None)
            )
        ]
        if busy:
            return f"workspace not quiescent: {', '.join(busy)} at work"
        if not all(c.verify for c in bench.acceptance_criteria):
            return "every criterion needs a `verify`"
        gate = self.authority.since_checks
        return gate(scope) if gate is not None else None

    def _move(
        self,
        node: Node,
        to: NodeStatus,
        actor: Actor,
        reason: str,
        evidence: str,
        row: Row,
        *,
        ref: str | None = None,
    ) -> None:
        source = node.status
        node.status = to
        if to is not NodeStatus.WAIT and node.dispatch is not None:
            # a node that leaves WAIT waits on nobody: a later reply is only logged
            self._log(node.id, "dispatch", f"dispatch to @{node.dispatch.member} closed")
            node.dispatch = None
        for effect in row.effects:
            if effect is Effect.STARTED:
                node.started = True
                self.state.focus = node.id
            elif effect is Effect.ATTEMPT:  # a new attempt: a fresh step budget (§5.1)
                node.attempt += 1
                node.steps_used = 0
            elif effect is Effect.ADJUST:
                node.adjust_count += 1
            elif effect is Effect.CHECKPOINT:
                node.checkpoint_ref = ref
            elif effect is Effect.CHECKED:
                node.checked_ref = ref
        who = self.authority.who
        extra: dict[str, object] = {}
        if ref is not None and not _REF_EFFECTS.isdisjoint(row.effects):
            extra["ref"] = ref
        if Effect.REPORT in row.effects:
            extra["report"] = True
        self._log(
            node.id,
            "transition",
            f"{source} → {to} by {actor} ({who}): {reason}",
            **{"from": source.value, "to": to.value, "by": actor.value, "who": who},
            reason=reason,
            evidence=evidence,
            **extra,
        )

    def count_steps(self, *, node_id: str, steps: int) -> Node:
        """The runtime counts the model steps a DO entry spent on a node: its `steps_used`
        in the current attempt, against its `step_budget` (agent-loop §5.1, §8.1)."""
        if Actor.RT not in self.authority.actors:
            raise WorkspaceError(
                "RUNTIME_ONLY", "only the runtime counts a node's steps", arg="node_id"
            )
        if steps < 0:
            raise WorkspaceError("INVALID_VALUE", f"steps must be >= 0, got {steps}", arg="steps")
        node = self.node(node_id)
        if steps and not node.terminal:
            node.steps_used += steps
        return node

    # ------------------------------------------------------------------ dispatch

    def dispatch(
        self,
        *,
        node_id: str,
        dispatch_id: str,
        side_id: str,
        caller_id: str,
        member: str | None = None,
        members: frozenset[str] | None = None,
        expected_version: int | None = None,
    ) -> Node:
        """Give a node to its member (agent-loop: a tellask for a MEMBER node): NEW or
        ADJUSTING → WAIT, bound to the detached side dialog `side_id`."""
        self._require_init()
        node = self.node(node_id)
        self._version(node, expected_version)
        if node.kind is not NodeKind.EXECUTION or node.type is not NodeType.TASK:
            raise WorkspaceError(
                "NOT_DISPATCHABLE", f"{node.id} is not an execution TASK node", arg="node_id"
            )
        if member is not None:
            node.assignee = self._assignee("member", f"{MEMBER_PREFIX}{member.lstrip('@')}")
        target = node.member
        if target is None:
            raise WorkspaceError(
                "NO_MEMBER",
                f"{node.id} is assigned to MAIN; name the member (member=...) to dispatch it",
                arg="member",
            )
        if members is not None and target not in members:
            raise WorkspaceError(
                "UNKNOWN_MEMBER",
                f"no member {target!r} in the team (members: {', '.join(sorted(members))})",
                arg="member",
            )
        if node.status not in (NodeStatus.NEW, NodeStatus.ADJUSTING):
            raise WorkspaceError(
                "NOT_DISPATCHABLE",
                f"{node.id} is {node.status}; only a NEW or ADJUSTING node is dispatched",
                arg="node_id",
            )
        waiting = [d for d in node.deps if self.state.view()[d].status is not NodeStatus.DONE]
        if waiting:
            raise WorkspaceError(
                "NOT_READY",
                f"{node.id} waits for deps that are not DONE: {', '.join(waiting)}",
                arg="node_id",
            )
        if not (self.authority.actors & {Actor.PLAN, Actor.DO, Actor.ADJUST, Actor.RT}):
            raise IllegalTransition(
                node.status.value,
                "WAIT",
                self.authority.label(),
                "only PLAN, DO or ADJUST dispatch",
            )
        adjusting = node.status is NodeStatus.ADJUSTING
        if adjusting:  # a re-dispatch counts as an ADJUST cycle
            self._cycle_accepted(node)
        rows = [
            r
            for r in find_rows(node.status, NodeStatus.WAIT, node.type)
            if r.guard is Guard.DISPATCH
        ]
        row = rows[0]
        actor = row.by[0]
        node.dispatch = NodeDispatch(
            member=target,
            dispatch_id=dispatch_id,
            side_id=side_id,
            caller_id=caller_id,
            at=self.now,
        )
        node.blockers = []
        if adjusting:
            node.adjust_count += 1
        self._move(node, NodeStatus.WAIT, actor, f"dispatched to @{target}", side_id, row)
        return node

    def member_reply(
        self, *, node_id: str, dispatch_id: str, ok: bool, text: str, side_id: str, member: str
    ) -> str:
        """The dispatched member's final reply (the runtime, in the reply's transaction):
        COMPLETE on success, CHECK_FAILED on a failure or on `BLOCKED:` lines (each one a
        blocker). A reply for a node no longer waiting on this dispatch is only logged.
        Returns the note for the dispatching dialog."""
        node = self.state.nodes.get(node_id)
        if node is None:
            self._log(None, "reply", f"reply of @{member} for unknown node {node_id} ignored")
            return f"[workspace] A reply of @{member} names node {node_id}, which does not exist."
        current = node.dispatch
        if (
            node.status is not NodeStatus.WAIT
            or current is None
            or current.dispatch_id != dispatch_id
        ):
            self._log(node.id, "reply", f"late reply of @{member} ignored (node is {node.status})")
            return (
                f"[workspace] @{member} replied for node {node.id}, which no longer waits on "
                f"that dispatch ({node.status}); the reply is kept in its side dialog {side_id}."
            )
        parsed = parse_reply(text)
        node.dispatch = None
        rows = find_rows(
            NodeStatus.WAIT, NodeStatus.COMPLETE if ok else NodeStatus.CHECK_FAILED, node.type
        )
        if not ok or parsed.blockers:
            node.blockers = parsed.blockers or [f"@{member} failed: {parsed.body[:400]}"]
            row = find_rows(NodeStatus.WAIT, NodeStatus.CHECK_FAILED, node.type)[0]
            outcome = "BLOCKED" if parsed.blockers else "FAILED"
            self._move(
                node, NodeStatus.CHECK_FAILED, Actor.RT, f"WAIT_SUBAGENT_{outcome}", side_id, row
            )
            return (
                f"[workspace] Node {node.id} {node.title!r}: WAIT → CHECK_FAILED "
                f"(@{member} {outcome.lower()}). Blockers: " + "; ".join(node.blockers)
            )
        row = rows[0]
        node.conclusion = fields.text(
            "conclusion", parsed.body[: fields.LIMITS["conclusion"]], "conclusion"
        )
        if parsed.artifacts:
            node.artifacts = parsed.artifacts
        if not node.artifacts:
            node.no_artifacts_reason = parsed.no_artifacts or f"@{member} reported none"
        node.self_check = [
            SelfCheck(criterion=c.id, passed=True, evidence=f"reply of @{member} ({side_id})")
            for c in node.acceptance_criteria
        ]
        self._move(node, NodeStatus.COMPLETE, Actor.RT, "WAIT_SUBAGENT completed", side_id, row)
        return (
            f"[workspace] Node {node.id} {node.title!r}: WAIT → COMPLETE (reply of @{member}); "
            "it awaits CHECK."
        )


# ---------------------------------------------------------------------- member replies

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_BLOCKED = re.compile(r"^\s*(?:BLOCKED|受阻)\s*[:：]\s*(.+)$", re.MULTILINE)
_ARTIFACT = re.compile(r"^\s*(?:ARTIFACT|产物)\s*[:：]\s*(.+)$", re.MULTILINE)
_NO_ARTIFACTS = re.compile(r"^\s*(?:NO_ARTIFACTS|无产物)\s*[:：]\s*(.+)$", re.MULTILINE)


@dataclass
class ParsedReply:
    body: str
    blockers: list[str]
    artifacts: list[str]
    no_artifacts: str


def parse_reply(text: str) -> ParsedReply:
    """The marker lines of a member's reply (the dispatch message asks for them):
    `BLOCKED: <what is missing>`, `ARTIFACT: <path>`, `NO_ARTIFACTS: <why>`."""
    blockers = [m.strip()[: fields.LIMITS["blocker"]] for m in _BLOCKED.findall(text)]
    artifacts = [m.strip()[: fields.LIMITS["path"]] for m in _ARTIFACT.findall(text)]
    na = _NO_ARTIFACTS.findall(text)
    body = _CONTROL.sub("", text.replace("\r\n", "\n")).strip()
    body = "\n".join(
        ("### " + ln[3:]) if ln.startswith("## ") else ln for ln in body.split("\n")
    )  # a reply's own `## ` headings must not break the node's sections
    return ParsedReply(
        body=body,
        blockers=blockers[: fields.LIMITS["list"]],
        artifacts=artifacts[: fields.LIMITS["list"]],
        no_artifacts=na[0].strip()[: fields.LIMITS["reason"]] if na else "",
    )
