"""Every change to a workspace, as commands on a copy of its value.

A `Session` starts from a `WorkspaceState`, checks each command completely before it
changes anything (so a refused command changes nothing), logs what it did, and `finish()`
derives the planning statuses, checks the invariants against the input's, bumps the
versions of the nodes that changed and returns the `Change` the store writes
(`repo.py`). The same commands serve the tools, the dispatch sink, the CLI and the Python
API: one way to create a node, one way to move it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mindloop.workspace import fields
from mindloop.workspace.docs import normalise
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.invariants import cycle_starts, problems, problems_near
from mindloop.workspace.models import (
    MAIN,
    ROOT_ID,
    Criterion,
    DocRef,
    DocStatus,
    Node,
    NodeKind,
    NodeStatus,
    NodeType,
    RefAction,
    Rule,
)
from mindloop.workspace.moves import MAX_ADJUSTS, Moves, ParsedReply, parse_reply
from mindloop.workspace.session import (
    Change,
    CriterionInput,
    DocInput,
    dir_name,
    enum_value,
    syntax_only,
)
from mindloop.workspace.state import WorkspaceState, find_cycle, refresh_planning
from mindloop.workspace.transitions import (
    Actor,
    find_rows,
)

__all__ = [
    "MAX_ADJUSTS",
    "Change",
    "CriterionInput",
    "DocInput",
    "ParsedReply",
    "Session",
    "dir_name",
    "enum_value",
    "parse_reply",
    "syntax_only",
]


class Session(Moves):
    """Commands on one workspace on behalf of one authority (see `transitions`)."""

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
                self.index_taken().append(DocRef(path=ref.path, description=ref.description))
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

    def _deps(self, arg: str, deps: Sequence[str], node_id: str) -> list[str]:
        fields.check_list(arg, deps)
        out: list[str] = []
        for i, d in enumerate(deps):
            dep = self.read_node(d, f"{arg}[{i}]")
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
        # a cycle the session closed runs through an edge it added (`cycle_starts`): only
        # then is the whole tree searched, for the cycle the error names
        starts = cycle_starts(self.state, self.before, self.state.touched())
        cycle = find_cycle(self.state) if starts and find_cycle(self.state, starts) else None
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
        step_budget: int | None = None,
    ) -> Node:
        self._require_init()
        kind = enum_value("kind", NodeKind, kind)
        if step_budget is not None and step_budget < 1:
            raise WorkspaceError(
                "INVALID_VALUE", f"step_budget must be >= 1, got {step_budget}", arg="step_budget"
            )
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
        if type is NodeType.TASK and any(self.read_node(d).type is NodeType.BENCH for d in dep_ids):
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
            old = self.read_node(supersedes, "supersedes")
            if not old.terminal:
                raise WorkspaceError(
                    "INVALID_SUPERSEDES",
                    f"{old.id} is {old.status}; only a terminal node is superseded",
                    arg="supersedes",
                )
        status = NodeStatus.NEW
        if kind is NodeKind.EXECUTION:
            status = NodeStatus.WAIT if type is NodeType.BENCH else NodeStatus.NEW
            by = self._authorise(find_rows(None, status, type), None, status, type)
        else:
            # a planning node's status is derived (invariant 7), but creating one is a
            # plan change all the same: the creation row's actors only (PLAN, ADJUST)
            new, task = NodeStatus.NEW, NodeType.TASK
            by = self._authorise(find_rows(None, new, task), None, new, task)
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
        if step_budget is not None:
            node.step_budget = step_budget
        self.state.nodes[nid] = node
        parent.children.append(nid)
        self._check_cycle("deps")
        self._index(refs)
        self._log(
            nid,
            "create",
            f"created {kind.value.lower()} node {nid} {t!r} under {parent.id}",
            by=by.value,
            docs=[d.path for d in refs],
        )
        if kind is NodeKind.EXECUTION:  # a planning node's status is derived, not set
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
        # a split creates TASK nodes: the creation row's actors only (PLAN, ADJUST), as
        # `create_node` checks it below; checked here too, before the parent changes
        new, task = NodeStatus.NEW, NodeType.TASK
        self._authorise(find_rows(None, new, task), None, new, task)
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
            step_budget=parent.step_budget,  # the parts of a split node keep its budget
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
                step_budget=parent.step_budget,
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

    def add_deps(
        self, *, node_id: str, deps: Sequence[str], expected_version: int | None = None
    ) -> list[str]:
        """Add deps to an existing node (PLAN, ADJUST): e.g. a BENCH node created before
        the last node it tests (agent-loop §5.5: it runs when all its deps are DONE), or
        ADJUST's fix nodes added to a failed BENCH. Deps gate a node's start, so the node
        must not have started (NEW, WAIT and not dispatched, CHECK_FAILED, ADJUSTING);
        the result must keep invariant 5 and the DAG. Returns the deps it added."""
        self._require_init()
        node = self.node(node_id)
        self._version(node, expected_version)
        if not (self.authority.actors & {Actor.PLAN, Actor.ADJUST}):
            raise WorkspaceError(
                "NOT_ALLOWED",
                f"only PLAN or ADJUST change a node's deps ({self.authority.label()} may not)",
                arg="node_id",
            )
        open_ = (NodeStatus.NEW, NodeStatus.WAIT, NodeStatus.CHECK_FAILED, NodeStatus.ADJUSTING)
        if node.status not in open_ or node.dispatch is not None:
            at_work = " (dispatched, at work)" if node.dispatch is not None else ""
            raise WorkspaceError(
                "NODE_STARTED",
                f"{node.id} is {node.status}{at_work}: deps gate a node's start; add them to "
                "a node that has not started (or create a new node with `supersedes`)",
                arg="node_id",
            )
        wanted = self._deps("deps", deps, node.id)
        added = [d for d in wanted if d not in node.deps]
        if not added:
            raise WorkspaceError(
                "NOTHING_TO_UPDATE", f"{node.id} depends on {', '.join(wanted)} already", arg="deps"
            )
        if node.type is NodeType.TASK:
            bench = [d for d in added if self.read_node(d).type is NodeType.BENCH]
            if bench:
                raise WorkspaceError(
                    "TASK_DEPENDS_ON_BENCH",
                    f"TASK {node.id} may not depend on BENCH {', '.join(bench)} (invariant 5)",
                    arg="deps",
                )
        node.deps = [*node.deps, *added]
        self._check_cycle("deps")
        self._log(node.id, "deps", f"deps added: {', '.join(added)}", added=added)
        return added

    # ------------------------------------------------------------------ rules and index

    def add_rule(self, text: str, source: dict[str, Any]) -> Rule | None:
        """A rule (single line); `None` when the same rule exists (never duplicated)."""
        self._require_init()
        value = fields.line("rule", text, "rule")
        if any(r.text == value for r in self.state.rules):
            return None
        fields.check_list("rules", [*self.state.rules, value])
        rule = Rule(text=value, source=source, created_at=self.now)
        self.rules_taken().append(rule)
        self._log(None, "rule", f"rule added: {value}", source=source)
        return rule

    def remove_rule(self, text: str) -> Rule:
        self._require_init()
        value = text.strip()
        at = next((i for i, r in enumerate(self.state.rules) if r.text == value), None)
        if at is None:
            have = "; ".join(r.text for r in self.state.rules) or "(none)"
            raise WorkspaceError("RULE_NOT_FOUND", f"no rule {value!r} (rules: {have})", arg="rule")
        found = self.rules_taken().pop(at)
        self._log(None, "rule", f"rule removed: {value}")
        return found

    def index_add(self, path: str, description: str = "") -> DocRef:
        self._require_init()
        norm = self.doc_check("path", path)
        desc = fields.line("description", description, "description", required=False)
        if self.state.index_doc(norm) is not None:
            raise WorkspaceError("DOC_EXISTS", f"{norm!r} is in the index already", arg="path")
        ref = DocRef(path=norm, description=desc)
        self.index_taken().append(ref)
        self._log(None, "doc", f"indexed: {norm}", paths=[norm])
        return ref

    def index_remove(self, path: str) -> DocRef:
        self._require_init()
        norm = normalise("path", path)
        ref = self._indexed(norm)
        users = [n.id for n in self.state.view().values() if n.doc(norm) is not None]
        if users:
            raise WorkspaceError(
                "DOC_IN_USE",
                f"{norm!r} is referenced by {', '.join(users)}; remove those references "
                "first, or expire the doc",
                arg="path",
            )
        index = self.index_taken()
        ref = index.pop(next(i for i, d in enumerate(index) if d.path == ref.path))
        self._log(None, "doc", f"removed from the index: {norm}", paths=[norm])
        return ref

    def index_status(self, path: str, status: DocStatus, description: str | None = None) -> DocRef:
        self._require_init()
        ref = self._indexed(normalise("path", path))
        self.index_taken()
        ref = self._indexed(ref.path)  # the session's own entry
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
        state, before = self.state, self.before
        # only a node whose status, kind, start or links moved can move its ancestors'
        # derived statuses (a step count, a note or a conclusion cannot)
        refresh_planning(state, [n for n in state.touched() if _derives(before, state, n)])
        touched = state.touched()  # with the planning nodes the refresh took
        new: list[str] = []
        if problems_near(state, before, touched):  # usually empty
            old_problems = set(problems(before))
            new = [p for p in problems(state) if p not in old_problems]
        if new:
            raise WorkspaceError("INVARIANT", "; ".join(new))
        changed: list[str] = []
        for nid in touched:
            node = state.nodes[nid]
            old = before.peek(nid)
            if old is None:
                changed.append(nid)
                continue
            if old != node:
                changed.append(nid)
                node.version = old.version + 1
                node.updated_at = self.now
                if node.kind is NodeKind.PLANNING and old.status != node.status:
                    self._log(
                        nid,
                        "derived",
                        f"{old.status} → {node.status} (derived from its children)",
                        **{"from": old.status.value, "to": node.status.value},
                    )
        return Change(before, state, self.log, changed=changed)


def _derives(before: WorkspaceState, state: WorkspaceState, node_id: str) -> bool:
    """Whether what a planning status is derived from moved at `node_id`: a new node, or
    its status, kind, start, parent or children."""
    now, was = state.peek(node_id), before.peek(node_id)
    return (
        was is None
        or now is None
        or now.status is not was.status
        or now.kind is not was.kind
        or now.started != was.started
        or now.parent_id != was.parent_id
        or now.children != was.children
    )
