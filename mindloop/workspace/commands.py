"""Every change to a workspace, as commands on a copy of its value.

A `Session` starts from a `WorkspaceState`, checks each command completely before it
changes anything (so a refused command changes nothing), logs what it did, and `finish()`
derives the planning statuses, checks the invariants against the input's, bumps the
versions of the nodes that changed and returns the `Change` the store writes
(`repo.py`). The same commands serve the tools, the dispatch sink, the CLI and the Python
API: one way to create a node, one way to move it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from mindloop.workspace import fields
from mindloop.workspace.docs import DocCheck, normalise
from mindloop.workspace.errors import IllegalTransition, StaleVersion, WorkspaceError
from mindloop.workspace.invariants import problems
from mindloop.workspace.models import (
    MAIN,
    MEMBER_PREFIX,
    ROOT_ID,
    TERMINAL,
    Criterion,
    DocRef,
    DocStatus,
    LogEntry,
    Node,
    NodeDispatch,
    NodeKind,
    NodeStatus,
    NodeType,
    RefAction,
    Rule,
    SelfCheck,
)
from mindloop.workspace.state import WorkspaceState, find_cycle, is_ready, refresh_planning
from mindloop.workspace.transitions import (
    Actor,
    Authority,
    Effect,
    Guard,
    Row,
    find_rows,
    legal_targets,
)

_MEMBER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DIR_UNSAFE = re.compile(r'[/\\:*?"<>|\s]+')
MAX_ADJUSTS = 3


@dataclass
class DocInput:
    path: str
    description: str = ""


@dataclass
class CriterionInput:
    when: str
    then: str
    verify: str | None = None
    id: str | None = None


@dataclass
class Change:
    """What a session did: the value before and after, and the log rows it adds."""

    before: WorkspaceState
    after: WorkspaceState
    log: list[LogEntry] = field(default_factory=list)

    @property
    def changed_nodes(self) -> list[str]:
        return [
            nid
            for nid, n in self.after.nodes.items()
            if nid not in self.before.nodes or self.before.nodes[nid] != n
        ]


def dir_name(title: str, node_id: str) -> str:
    """`<title>_<id>` with unsafe characters replaced, at most 50 characters of title."""
    safe = _DIR_UNSAFE.sub("_", title).strip("_.") or "node"
    return f"{safe[:50]}_{node_id}"


_E = TypeVar("_E", bound=StrEnum)


def enum_value(arg: str, cls: type[_E], value: str) -> _E:
    """`value` as a member of `cls`, or an error naming the allowed values (upstream's
    silent success on an unknown `action` must be impossible: flaw 3)."""
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise WorkspaceError(
            "INVALID_VALUE", f"{value!r} is not one of: {allowed}", arg=arg
        ) from None


def syntax_only(arg: str, raw: str) -> str:
    """A doc check without the file system (pure tests; the store's own re-checks)."""
    return normalise(arg, raw)


class Session:
    """Commands on one workspace on behalf of one authority (see `transitions`)."""

    def __init__(
        self,
        state: WorkspaceState,
        authority: Authority,
        *,
        doc_check: DocCheck = syntax_only,
        now: float | None = None,
    ) -> None:
        self.before = state
        self.state = state.copy()
        self.authority = authority
        self.doc_check = doc_check
        self.now = time.time() if now is None else now
        self.log: list[LogEntry] = []

    # ------------------------------------------------------------------ helpers

    def node(self, node_id: str, arg: str = "node_id") -> Node:
        node = self.state.nodes.get(node_id)
        if node is None:
            known = ", ".join(list(self.state.nodes)[:20]) or "(none)"
            raise WorkspaceError(
                "UNKNOWN_NODE",
                f"no node {node_id!r} in {self.state.task} (nodes: {known})",
                arg=arg,
            )
        return node

    def _version(self, node: Node, expected: int | None) -> None:
        if expected is not None and expected != node.version:
            raise StaleVersion(node.id, expected, node.version)

    def _log(self, node_id: str | None, kind: str, text: str, **data: Any) -> None:
        self.log.append(
            LogEntry(
                node_id=node_id,
                at=self.now,
                actor=self.authority.who or self.authority.label(),
                kind=kind,
                text=text,
                data=data,
            )
        )

    def record(self, node_id: str | None, kind: str, text: str, **data: Any) -> None:
        """Add a log row (the workspace's own with `node_id` None) without other change."""
        if node_id is not None:
            self.node(node_id)
        self._log(node_id, kind, text, **data)

    def _require_init(self) -> None:
        if not self.state.exists:
            raise WorkspaceError(
                "NO_WORKSPACE", f"the workspace of {self.state.task} is not initialised yet"
            )

    def _docs(self, arg: str, docs: Sequence[DocInput]) -> list[DocRef]:
        fields.check_list(arg, docs)
        out: list[DocRef] = []
        for i, d in enumerate(docs):
            path = self.doc_check(f"{arg}[{i}].path", d.path)
            desc = fields.line(
                f"{arg}[{i}].description", d.description, "description", required=False
            )
            if any(o.path == path for o in out):
                raise WorkspaceError("DUPLICATE_DOC", f"{path!r} is given twice", arg=arg)
            out.append(DocRef(path=path, description=desc))
        return out

    def _index(self, refs: Sequence[DocRef]) -> list[str]:
        """Decision 8: a dispatched doc not in the index is added there (no duplicates)."""
        added = []
        for ref in refs:
            if self.state.index_doc(ref.path) is None:
                self.state.index.append(DocRef(path=ref.path, description=ref.description))
                added.append(ref.path)
        if added:
            self._log(None, "doc", f"indexed: {', '.join(added)}", paths=added)
        return added

    def _criteria(self, arg: str, items: Sequence[CriterionInput]) -> list[Criterion]:
        fields.check_list(arg, items)
        out: list[Criterion] = []
        for i, c in enumerate(items):
            cid = fields.line(f"{arg}[{i}].id", c.id or f"AC{i + 1}", "skill")
            if any(o.id == cid for o in out):
                raise WorkspaceError("DUPLICATE_CRITERION", f"id {cid!r} is given twice", arg=arg)
            verify = c.verify
            if verify is not None:
                verify = fields.line(f"{arg}[{i}].verify", verify, "criterion_text")
            out.append(
                Criterion(
                    id=cid,
                    when=fields.line(f"{arg}[{i}].when", c.when, "criterion_text"),
                    then=fields.line(f"{arg}[{i}].then", c.then, "criterion_text"),
                    verify=verify or None,
                )
            )
        return out

    def _assignee(self, arg: str, value: str) -> str:
        value = value.strip()
        if value == MAIN:
            return value
        member = value[len(MEMBER_PREFIX) :] if value.startswith(MEMBER_PREFIX) else None
        if member is None or not _MEMBER_ID.match(member):
            raise WorkspaceError(
                "INVALID_ASSIGNEE", f"{value!r}: use MAIN or MEMBER:<member id>", arg=arg
            )
        return value

    def _deps(self, arg: str, deps: Sequence[str], node_id: str) -> list[str]:
        fields.check_list(arg, deps)
        out: list[str] = []
        for i, d in enumerate(deps):
            dep = self.node(d, f"{arg}[{i}]")
            if dep.id == node_id:
                raise WorkspaceError("SELF_DEPENDENCY", "a node cannot depend on itself", arg=arg)
            if dep.id not in out:
                out.append(dep.id)
        return out

    def _new_id(self, node_id: str | None) -> str:
        if node_id is None:
            n = len(self.state.nodes)
            while f"n{n}" in self.state.nodes:
                n += 1
            return f"n{n}"
        if node_id in self.state.nodes:
            raise WorkspaceError("NODE_EXISTS", f"node {node_id!r} exists already", arg="node_id")
        return node_id

    def _check_cycle(self, arg: str) -> None:
        cycle = find_cycle(self.state)
        if cycle:
            raise WorkspaceError(
                "CYCLE", f"the deps would form a cycle: {' → '.join(cycle)}", arg=arg
            )

    # ------------------------------------------------------------------ workspace

    def init(
        self, *, lang: str | None = None, offered: Sequence[DocRef] = (), title: str = ""
    ) -> bool:
        """Create the workspace (its root planning node) if it does not exist; the start
        scan's findings are logged by the caller and kept as `offered`."""
        if self.state.exists:
            return False
        if lang in ("en", "zh"):
            self.state.lang = lang  # type: ignore[assignment]
        self.state.exists = True
        self.state.created_at = self.now
        self.state.offered = list(offered)
        name = title or self.state.task.rsplit("/", 1)[-1].removesuffix(".tsk")
        root = Node(
            id=ROOT_ID,
            kind=NodeKind.PLANNING,
            title=fields.title("title", name),
            requirement="The task's goals (goals.md of the Taskdoc).",
            created_by=self.authority.who,
            created_at=self.now,
            updated_at=self.now,
            dir="root",
        )
        self.state.nodes[ROOT_ID] = root
        self.state.focus = ROOT_ID
        self._log(None, "init", f"workspace of {self.state.task} created")
        return True

    # ------------------------------------------------------------------ nodes

    def create_node(
        self,
        *,
        parent_id: str,
        kind: NodeKind,
        title: str,
        requirement: str,
        docs: Sequence[DocInput] = (),
        acceptance_criteria: Sequence[CriterionInput] = (),
        type: NodeType = NodeType.TASK,
        deps: Sequence[str] = (),
        skills: Sequence[str] = (),
        assignee: str = MAIN,
        can_start_immediately: bool = False,
        node_id: str | None = None,
        isolate: bool = False,
        supersedes: str | None = None,
        _row_check: bool = True,
    ) -> Node:
        self._require_init()
        kind = enum_value("kind", NodeKind, kind)
        type = enum_value("type", NodeType, type)
        parent = self.node(parent_id, "parent_id")
        if parent.kind is not NodeKind.PLANNING:
            raise WorkspaceError(
                "EXECUTION_CANNOT_HAVE_CHILDREN",
                f"{parent.id} is an execution node; only planning nodes have children "
                "(node_split an IN_PROGRESS execution node to decompose it)",
                arg="parent_id",
            )
        if parent.terminal and parent.id != ROOT_ID:  # the root takes new scope any time
            raise WorkspaceError(
                "INVALID_PARENT_STATUS",
                f"{parent.id} is {parent.status} (terminal, final); create the node under "
                "another parent, or a new node with `supersedes`",
                arg="parent_id",
            )
        if kind is NodeKind.PLANNING and type is NodeType.BENCH:
            raise WorkspaceError(
                "INVALID_NODE_TYPE", "BENCH applies to execution nodes only", arg="type"
            )
        nid = self._new_id(node_id)
        t = fields.title("title", title)
        req = fields.text("requirement", requirement, "requirement")
        refs = self._docs("docs", docs)
        criteria = self._criteria("acceptance_criteria", acceptance_criteria)
        fields.check_list("skills", skills)
        sk = [fields.line(f"skills[{i}]", s, "skill") for i, s in enumerate(skills)]
        who = self._assignee("assignee", assignee)
        if kind is NodeKind.PLANNING and who != MAIN:
            raise WorkspaceError(
                "INVALID_ASSIGNEE", "a planning node is worked by MAIN", arg="assignee"
            )
        dep_ids = self._deps("deps", deps, nid)
        if type is NodeType.TASK and any(
            self.state.nodes[d].type is NodeType.BENCH for d in dep_ids
        ):
            raise WorkspaceError(
                "TASK_DEPENDS_ON_BENCH", "a TASK node may not depend on a BENCH node", arg="deps"
            )
        if type is NodeType.BENCH and not any(c.verify for c in criteria):
            raise WorkspaceError(
                "BENCH_NEEDS_VERIFY",
                "a BENCH node needs at least one acceptance criterion with `verify`",
                arg="acceptance_criteria",
            )
        if supersedes is not None:
            old = self.node(supersedes, "supersedes")
            if not old.terminal:
                raise WorkspaceError(
                    "INVALID_SUPERSEDES",
                    f"{old.id} is {old.status}; only a terminal node is superseded",
                    arg="supersedes",
                )
        status = NodeStatus.NEW
        by: Actor | None = None
        if kind is NodeKind.EXECUTION:
            status = NodeStatus.WAIT if type is NodeType.BENCH else NodeStatus.NEW
            rows = find_rows(None, status, type)
            by = self._authorise(rows, None, status, type) if _row_check else Actor.RT
        node = Node(
            id=nid,
            parent_id=parent.id,
            kind=kind,
            type=type,
            title=t,
            requirement=req,
            status=status,
            deps=dep_ids,
            skills=sk,
            assignee=who,
            can_start_immediately=can_start_immediately,
            acceptance_criteria=criteria,
            docs=refs,
            isolate=isolate,
            supersedes=supersedes,
            created_by=self.authority.who,
            created_at=self.now,
            updated_at=self.now,
            dir=dir_name(t, nid),
        )
        self.state.nodes[nid] = node
        parent.children.append(nid)
        self._check_cycle("deps")
        self._index(refs)
        self._log(
            nid,
            "create",
            f"created {kind.value.lower()} node {nid} {t!r} under {parent.id}",
            by=by.value if by else None,
            docs=[d.path for d in refs],
        )
        if by is not None:
            self._log(
                nid,
                "transition",
                f"– → {status} by {by} ({self.authority.who})",
                **{"from": None, "to": status.value, "by": by.value, "who": self.authority.who},
                reason="created",
            )
        return node

    def split_node(
        self,
        *,
        parent_id: str,
        title: str,
        requirement: str,
        docs: Sequence[DocInput] = (),
        inherit_context: bool = True,
        node_id: str | None = None,
        rest_id: str | None = None,
    ) -> Node:
        """Decision 5: the parent must be IN_PROGRESS. A planning parent gains the child;
        an execution parent becomes a planning node whose children are the new sub-node
        and the rest of its own work (a node carrying its requirement, criteria, docs and
        artifacts, depending on the sub-node). The child is isolated unless it inherits
        the context; focus moves to it."""
        self._require_init()
        parent = self.node(parent_id, "parent_id")
        if parent.status is not NodeStatus.IN_PROGRESS:
            raise WorkspaceError(
                "SPLIT_REQUIRES_IN_PROGRESS",
                f"{parent.id} is {parent.status}; only an IN_PROGRESS node is split",
                arg="parent_id",
            )
        if parent.kind is NodeKind.EXECUTION and parent.type is NodeType.BENCH:
            raise WorkspaceError("INVALID_NODE_TYPE", "a BENCH node is not split", arg="parent_id")
        # validate the new child's fields before changing the parent
        fields.title("title", title)
        fields.text("requirement", requirement, "requirement")
        self._docs("docs", docs)
        converted = parent.kind is NodeKind.EXECUTION
        if converted:
            parent.kind = NodeKind.PLANNING
            parent.started = True
        child = self.create_node(
            parent_id=parent.id,
            kind=NodeKind.EXECUTION,
            title=title,
            requirement=requirement,
            docs=docs,
            node_id=node_id,
            isolate=not inherit_context,
            _row_check=False,
        )
        self._log(
            parent.id,
            "split",
            f"split: sub-node {child.id} {child.title!r}"
            + ("" if inherit_context else " (isolated)"),
            child=child.id,
        )
        if converted:
            rest = self.create_node(
                parent_id=parent.id,
                kind=NodeKind.EXECUTION,
                title=parent.title,
                requirement=parent.requirement,
                docs=[DocInput(d.path, d.description) for d in parent.docs],
                skills=parent.skills,
                deps=[child.id],
                node_id=rest_id,
                _row_check=False,
            )
            rest.acceptance_criteria = parent.acceptance_criteria
            rest.artifacts = parent.artifacts
            rest.notes = parent.notes
            rest.docs = [d.model_copy() for d in parent.docs]  # statuses kept
            parent.acceptance_criteria = []
            self._log(
                parent.id,
                "split",
                f"{parent.id} becomes a planning node: {child.id} first, then the rest of "
                f"its work in {rest.id}",
                rest=rest.id,
            )
        self.state.focus = child.id
        return child

    def reference(
        self,
        *,
        node_id: str,
        target: str,
        action: RefAction,
        description: str | None = None,
        expected_version: int | None = None,
    ) -> list[DocRef]:
        self._require_init()
        action = enum_value("action", RefAction, action)
        node = self.node(node_id)
        self._version(node, expected_version)
        if node.terminal:
            raise WorkspaceError(
                "NODE_TERMINAL", f"{node.id} is {node.status} (final)", arg="node_id"
            )
        if action is RefAction.ADD:
            path = self.doc_check("target", target)
            if node.doc(path) is not None:
                raise WorkspaceError(
                    "REFERENCE_EXISTS", f"{node.id} already references {path!r}", arg="target"
                )
            desc = fields.line("description", description or "", "description", required=False)
            ref = DocRef(path=path, description=desc)
            fields.check_list("docs", [*node.docs, ref])
            node.docs.append(ref)
            self._index([ref])
            self._log(node.id, "reference", f"add reference: {path}", action="add", path=path)
            return node.docs
        path = normalise("target", target)
        found = node.doc(path)
        if found is None:
            have = ", ".join(d.path for d in node.docs) or "(none)"
            raise WorkspaceError(
                "REFERENCE_NOT_FOUND",
                f"{node.id} does not reference {path!r} (it references: {have})",
                arg="target",
            )
        if action is RefAction.REMOVE:
            node.docs.remove(found)
        else:
            found.status = DocStatus.EXPIRED if action is RefAction.EXPIRE else DocStatus.ACTIVE
        if description is not None and action is not RefAction.REMOVE:
            found.description = fields.line(
                "description", description, "description", required=False
            )
        self._log(
            node.id,
            "reference",
            f"{action.value} reference: {path}",
            action=action.value,
            path=path,
        )
        return node.docs

    def update(
        self,
        *,
        node_id: str,
        notes: str | None = None,
        artifacts: Sequence[str] | None = None,
        conclusion: str | None = None,
        expected_version: int | None = None,
    ) -> Node:
        self._require_init()
        node = self.node(node_id)
        self._version(node, expected_version)
        if node.terminal:
            raise WorkspaceError(
                "NODE_TERMINAL",
                f"{node.id} is {node.status}: terminal nodes are final (create a new node "
                "with `supersedes` to reopen)",
                arg="node_id",
            )
        if notes is None and artifacts is None and conclusion is None:
            raise WorkspaceError(
                "NOTHING_TO_UPDATE", "give notes, artifacts or conclusion", arg="node_id"
            )
        what = []
        if notes is not None:
            node.notes = fields.text("notes", notes, "notes")
            what.append("notes")
        if artifacts is not None:
            fields.check_list("artifacts", artifacts)
            node.artifacts = [
                fields.line(f"artifacts[{i}]", a, "path") for i, a in enumerate(artifacts)
            ]
            what.append("artifacts")
        if conclusion is not None:
            node.conclusion = fields.text("conclusion", conclusion, "conclusion")
            what.append("conclusion")
        self._log(node.id, "update", f"updated {', '.join(what)}", fields=what)
        return node

    # ------------------------------------------------------------------ transitions

    def _authorise(
        self, rows: list[Row], source: NodeStatus | None, target: NodeStatus, type: NodeType
    ) -> Actor:
        by = self.authority.label()
        if not rows:
            legal = ", ".join(legal_targets(source, type)) or "none (terminal)"
            raise IllegalTransition(
                str(source or "–"), target.value, by, f"not in the table; legal from there: {legal}"
            )
        for row in rows:
            actor = self.authority.acts_as(row)
            if actor is not None:
                return actor
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
    ) -> Node:
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
        rows = find_rows(node.status, to, node.type)
        actor = self._authorise(rows, node.status, to, node.type)
        row = next(r for r in rows if self.authority.acts_as(r) is actor)
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
        self._move(node, to, actor, rsn, ev, row)
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
                    d for d in node.deps if self.state.nodes[d].status is not NodeStatus.DONE
                ]
                raise WorkspaceError(
                    "NOT_READY",
                    f"{node.id} waits for deps that are not DONE: {', '.join(waiting)}",
                    arg="node_id",
                )
            busy = [
                n.id
                for n in self.state.nodes.values()
                if n.status is NodeStatus.IN_PROGRESS
                and n.kind is NodeKind.EXECUTION
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
        elif g is Guard.RETRY:
            if node.adjust_count >= MAX_ADJUSTS:
                raise WorkspaceError(
                    "ADJUST_CAP",
                    f"{node.id} was adjusted {node.adjust_count} times; it can only FAIL now",
                    arg="to",
                )
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

    def bench_not_ready(self, bench: Node) -> str | None:
        """agent-loop §5.5 conditions 1, 2 and 4 (condition 3, the workspace ref against
        the last checked ref, is the CHECK phase's to verify)."""
        nodes = self.state.nodes
        scope = bench.deps or [
            c
            for c in (nodes[bench.parent_id].children if bench.parent_id else [])
            if c != bench.id and nodes[c].type is NodeType.TASK
        ]
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
        return None

    def _move(
        self, node: Node, to: NodeStatus, actor: Actor, reason: str, evidence: str, row: Row
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
            elif effect is Effect.ATTEMPT:
                node.attempt += 1
            elif effect is Effect.ADJUST:
                node.adjust_count += 1
            elif effect is Effect.CHECKPOINT:
                node.checkpoint_ref = evidence or None
            elif effect is Effect.CHECKED:
                node.checked_ref = evidence or None
        who = self.authority.who
        self._log(
            node.id,
            "transition",
            f"{source} → {to} by {actor} ({who}): {reason}",
            **{"from": source.value, "to": to.value, "by": actor.value, "who": who},
            reason=reason,
            evidence=evidence,
        )

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
        waiting = [d for d in node.deps if self.state.nodes[d].status is not NodeStatus.DONE]
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

    # ------------------------------------------------------------------ rules and index

    def add_rule(self, text: str, source: dict[str, Any]) -> Rule | None:
        """A rule (single line); `None` when the same rule exists (never duplicated)."""
        self._require_init()
        value = fields.line("rule", text, "rule")
        if any(r.text == value for r in self.state.rules):
            return None
        fields.check_list("rules", [*self.state.rules, value])
        rule = Rule(text=value, source=source, created_at=self.now)
        self.state.rules.append(rule)
        self._log(None, "rule", f"rule added: {value}", source=source)
        return rule

    def remove_rule(self, text: str) -> Rule:
        self._require_init()
        value = text.strip()
        found = next((r for r in self.state.rules if r.text == value), None)
        if found is None:
            have = "; ".join(r.text for r in self.state.rules) or "(none)"
            raise WorkspaceError("RULE_NOT_FOUND", f"no rule {value!r} (rules: {have})", arg="rule")
        self.state.rules.remove(found)
        self._log(None, "rule", f"rule removed: {value}")
        return found

    def index_add(self, path: str, description: str = "") -> DocRef:
        self._require_init()
        norm = self.doc_check("path", path)
        desc = fields.line("description", description, "description", required=False)
        if self.state.index_doc(norm) is not None:
            raise WorkspaceError("DOC_EXISTS", f"{norm!r} is in the index already", arg="path")
        ref = DocRef(path=norm, description=desc)
        self.state.index.append(ref)
        self._log(None, "doc", f"indexed: {norm}", paths=[norm])
        return ref

    def index_remove(self, path: str) -> DocRef:
        self._require_init()
        norm = normalise("path", path)
        ref = self._indexed(norm)
        users = [n.id for n in self.state.nodes.values() if n.doc(norm) is not None]
        if users:
            raise WorkspaceError(
                "DOC_IN_USE",
                f"{norm!r} is referenced by {', '.join(users)}; remove those references "
                "first, or expire the doc",
                arg="path",
            )
        self.state.index.remove(ref)
        self._log(None, "doc", f"removed from the index: {norm}", paths=[norm])
        return ref

    def index_status(self, path: str, status: DocStatus, description: str | None = None) -> DocRef:
        self._require_init()
        ref = self._indexed(normalise("path", path))
        ref.status = status
        if description is not None:
            ref.description = fields.line("description", description, "description", required=False)
        self._log(None, "doc", f"{status.value}: {ref.path}", paths=[ref.path])
        return ref

    def _indexed(self, path: str) -> DocRef:
        ref = self.state.index_doc(path)
        if ref is None:
            raise WorkspaceError("DOC_NOT_INDEXED", f"{path!r} is not in the index", arg="path")
        return ref

    # ------------------------------------------------------------------ finish

    def finish(self) -> Change:
        """Derive, check, version: the change to write. A result that breaks an
        invariant the input kept is refused (nothing is written)."""
        refresh_planning(self.state)
        before = set(problems(self.before))
        new = [p for p in problems(self.state) if p not in before]
        if new:
            raise WorkspaceError("INVARIANT", "; ".join(new))
        for nid, node in self.state.nodes.items():
            old = self.before.nodes.get(nid)
            if old is None:
                continue
            if old != node:
                node.version = old.version + 1
                node.updated_at = self.now
                if node.kind is NodeKind.PLANNING and old.status != node.status:
                    self._log(
                        nid,
                        "derived",
                        f"{old.status} → {node.status} (derived from its children)",
                        **{"from": old.status.value, "to": node.status.value},
                    )
        return Change(self.before, self.state, self.log)


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
