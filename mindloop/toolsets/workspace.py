"""The `workspace` toolset: the node (to-do) tree, its docs and the user's rules, as tools.

Every tool checks its call against the workspace as it is now (so a mistake gets its
error at once, naming the argument), and a tool that changes something returns a store
effect that runs the same command again inside the transaction that records the result
(decision 5): the change and the result commit together, or neither does. If the
workspace changed in between, the effect's outcome replaces the result (an id assigned
then, or the error; then nothing was written). The first call on a task initialises its
workspace, with the start scan.

Arguments are strict (`ToolArgs`: an unknown argument is an error) and every enum is
closed: `action: "archive"` is refused naming add, remove, expire, activate (upstream's
silent success on an unknown action is impossible).

What a call may do follows its authority (`transitions.Authority`): a dialog without
phases acts for the phases (`Authority.chat`); the work loop builds the toolset with its
phase's authority (`workspace_tools(authority_for=...)`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mindloop.i18n import Lang
from mindloop.store import Store, loop_state
from mindloop.store import workspace as ws_rows
from mindloop.store.retries import RetryRows
from mindloop.tools.base import (
    EffectResult,
    StartDetached,
    StoreEffect,
    Tool,
    ToolContext,
    ToolOutput,
)
from mindloop.tools.offload import run_blocking
from mindloop.tools.pathguard import relative_to_rtws, rtws_root
from mindloop.toolsets import search
from mindloop.toolsets.workspace_args import (
    DocArg,
    DocLookupArgs,
    NodeAddDepsArgs,
    NodeCreateArgs,
    NodeDispatchArgs,
    NodeGetArgs,
    NodeListArgs,
    NodeReferenceArgs,
    NodeSplitArgs,
    NodeTransitionArgs,
    NodeUpdateArgs,
    RuleAddArgs,
)
from mindloop.workspace import api, repo
from mindloop.workspace.commands import Change, CriterionInput, DocInput, Session
from mindloop.workspace.context import node_context
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.fields import LIMITS
from mindloop.workspace.models import (
    MAIN,
    ROOT_ID,
    DocRef,
    DocStatus,
    Node,
    NodeKind,
    NodeStatus,
    NodeType,
    RefAction,
    SelfCheck,
)
from mindloop.workspace.ref import CheckMarks, since_checks, workspace_ref
from mindloop.workspace.state import WorkspaceState, is_ready
from mindloop.workspace.transitions import REF_TARGETS, Actor, Authority

TOOLSET = "workspace"
ROOT_ONLY_TOOLS: frozenset[str] = frozenset({"rule_add"})
NODE_SINK = "workspace.node"  # the reply sink of dispatched nodes (`dialogs/node_sink.py`)
LOOKUP_HITS = 5


@dataclass(frozen=True)
class StoreWorkspaceAccess:
    """`WorkspaceAccess` over the runtime's store (reads outside any transaction)."""

    store: Store
    member_ids: frozenset[str] = frozenset()
    node_budgets: tuple[int, int] = (12, 30)  # `loop.nodes`: step_budget, max_step_budget

    def load(self, task_path: str) -> WorkspaceState:
        return repo.load(self.store, task_path)

    def log(self, task_path: str) -> list[Any]:
        return repo.log(self.store, task_path)

    def user_message(self, dialog_id: str, quote: str) -> int | None:
        return ws_rows.user_message_with(self.store, dialog_id, quote)

    def members(self) -> frozenset[str]:
        return self.member_ids

    def adjust_cycles(self, task_path: str, node_id: str) -> int:
        return sum(1 for r in RetryRows(self.store).of_node(task_path, node_id) if r.level == "L3")

    def bench_checks(self, task_path: str) -> CheckMarks:
        state = loop_state.get(self.store, task_path)
        if state is None:
            return CheckMarks()
        checking = state.targets if state.phase is loop_state.Phase.CHECK and state.in_phase else ()
        return CheckMarks(loop_state.checks(self.store, state.root_id), frozenset(checking))

    def loop_entry(self, dialog_id: str) -> int | None:
        state = loop_state.by_root(self.store, dialog_id)
        return None if state is None else state.pass_entry or state.entry

    def step_budgets(self) -> tuple[int, int]:
        return self.node_budgets


AuthorityFor = Callable[[ToolContext], Authority]


def chat_authority(ctx: ToolContext) -> Authority:
    """A dialog without phases acts for the phases; a work-loop phase acts as itself (a
    phase that is no actor of the transition table, SELF_IMPROVE, moves no node). The
    work loop's ADJUST sends a node back to work only on an accepted ADJUST cycle (a
    RetryRecord, agent-loop §5.4 and §8.3: `retry_propose`); its CHECK tests a BENCH node
    only if nothing changed since its scope's checks (agent-loop §5.5 condition 3, as
    routing judges it: the loop's record of its checks)."""
    who = f"@{ctx.member}"
    if ctx.phase is None:
        return Authority.chat(who)
    actor = Actor.__members__.get(ctx.phase)
    if actor is None:
        return Authority(frozenset(), who)
    access = ctx.workspace
    cycles = access.adjust_cycles if actor is Actor.ADJUST and access is not None else None
    gate = None
    if actor is Actor.CHECK and access is not None and ctx.task_path:
        task = ctx.task_path
        gate = since_checks(_rtws(ctx), lambda: access.bench_checks(task))
    return Authority.phase(actor, who, adjust_cycles=cycles, since_checks=gate)


# ---------------------------------------------------------------------- shared


def _rtws(ctx: ToolContext) -> Path:
    """The context's rtws as a Path (as it is given, not made again: a call needs it a few
    times)."""
    rtws = ctx.rtws
    return rtws if isinstance(rtws, Path) else Path(rtws)


def _docs(items: list[DocArg] | None) -> list[DocInput]:
    return [DocInput(d.path, d.description) for d in items or []]


def _task(ctx: ToolContext) -> str | ToolOutput:
    if not ctx.task_path:
        return ToolOutput("Error: no task is bound to this dialog (no task path).", is_error=True)
    if ctx.workspace is None:
        return ToolOutput("Error: the workspace store is not available here.", is_error=True)
    return ctx.task_path


def _first_use(change: Change) -> str:
    """What the first call on a task adds to its result: the start scan's offer."""
    if change.before.exists:
        return ""
    offered = change.after.offered
    found = ", ".join(d.path for d in offered) or "none"
    return (
        f"\n[workspace] The workspace of {change.after.task} was created. The start scan "
        f"found these docs (offered, not dispatched: give them to nodes with `docs` or "
        f"node_reference): {found}."
    )


Describe = Callable[[Any, Change], str]


class Tools:
    """The tools of one toolset instance (bound to how a call's authority is decided)."""

    def __init__(self, authority_for: AuthorityFor = chat_authority) -> None:
        self.authority_for = authority_for

    def _write(
        self,
        ctx: ToolContext,
        command: Callable[[Session], Any],
        describe: Describe,
        *,
        extra: Callable[[], tuple[Any, ...]] | None = None,
    ) -> ToolOutput:
        """Check `command` on the workspace as it is now; return its result with a store
        effect that runs it again in the result's transaction."""
        task = _task(ctx)
        if isinstance(task, ToolOutput):
            return task
        assert ctx.workspace is not None
        authority = self.authority_for(ctx)
        rtws = _rtws(ctx)
        lang = ctx.work_language
        refused: WorkspaceError | None = None
        for state in _checked_on(ctx, task):
            try:
                s = api.session_for(state, rtws, authority, lang=lang, acl=ctx.acl)
                result = command(s)
                change = s.finish()
                break
            except WorkspaceError as exc:
                refused = exc
        else:
            assert refused is not None
            return ToolOutput(str(refused), is_error=True)
        _step_applied(ctx, task, change)
        text = describe(result, change) + _first_use(change)

        def apply(store: Any) -> EffectResult | None:
            if api.commit_checked(store, rtws, change):  # nothing moved since the check
                return None
            try:
                again, applied = api.execute(
                    store, rtws, task, authority, command, lang=lang, acl=ctx.acl
                )
            except WorkspaceError as exc:
                return EffectResult(
                    f"{exc} (the workspace changed while the call ran; nothing was written)",
                    is_error=True,
                )
            now = describe(again, applied) + _first_use(applied)
            return None if now == text else EffectResult(now)

        effect = StoreEffect(apply, what=f"workspace {task}")
        return ToolOutput(text, effects=(effect, *(extra() if extra else ())))

    # ------------------------------------------------------------------ nodes

    async def node_create(self, a: NodeCreateArgs, ctx: ToolContext) -> ToolOutput:
        default, most = ctx.workspace.step_budgets() if ctx.workspace else (None, None)

        def command(s: Session) -> Node:
            if a.step_budget is not None and most is not None and a.step_budget > most:
                raise WorkspaceError(
                    "STEP_BUDGET_TOO_HIGH",
                    f"{a.step_budget} DO steps per attempt is more than "
                    f"loop.nodes.max_step_budget ({most})",
                    arg="step_budget",
                )
            return s.create_node(
                parent_id=a.parent_id,
                kind=a.kind,
                title=a.title,
                requirement=a.requirement,
                docs=_docs(a.docs),
                acceptance_criteria=[
                    CriterionInput(c.when, c.then, c.verify, c.id)
                    for c in a.acceptance_criteria or []
                ],
                type=a.type,
                deps=a.deps or [],
                skills=a.skills or [],
                assignee=a.assignee,
                can_start_immediately=a.can_start_immediately,
                supersedes=a.supersedes,
                step_budget=a.step_budget if a.step_budget is not None else default,
            )

        return self._write(ctx, command, lambda n, ch: f"created {_line(ch.after, n)}")

    async def node_split(self, a: NodeSplitArgs, ctx: ToolContext) -> ToolOutput:
        def command(s: Session) -> Node:
            return s.split_node(
                parent_id=a.parent_id,
                title=a.title,
                requirement=a.requirement,
                docs=_docs(a.docs),
                inherit_context=a.inherit_context,
            )

        def describe(n: Node, ch: Change) -> str:
            parent = ch.after.nodes[a.parent_id]
            lines = [f"split {a.parent_id}: created {_line(ch.after, n)}"]
            if ch.before.nodes[a.parent_id].kind is NodeKind.EXECUTION:
                rest = parent.children[-1]
                lines.append(
                    f"{a.parent_id} is now a planning node; the rest of its work is "
                    f"{_line(ch.after, ch.after.nodes[rest])}"
                )
            return "\n".join(lines)

        return self._write(ctx, command, describe)

    async def node_reference(self, a: NodeReferenceArgs, ctx: ToolContext) -> ToolOutput:
        def command(s: Session) -> list[DocRef]:
            return s.reference(
                node_id=a.node_id,
                target=a.target,
                action=a.action,
                description=a.description,
                expected_version=a.expected_version,
            )

        def describe(refs: list[DocRef], ch: Change) -> str:
            node = ch.after.nodes[a.node_id]
            lines = [f"{a.action.value}: {a.target} on {node.id} (version {node.version})."]
            lines.append(f"{node.id}'s doc references:")
            lines += [f"- {d.path} ({d.status.value}) {d.description}".rstrip() for d in refs]
            return "\n".join(lines) if refs else lines[0] + f" {node.id} references no docs."

        return self._write(ctx, command, describe)

    async def node_update(self, a: NodeUpdateArgs, ctx: ToolContext) -> ToolOutput:
        def command(s: Session) -> Node:
            return s.update(
                node_id=a.node_id,
                notes=a.notes,
                artifacts=a.artifacts,
                conclusion=a.conclusion,
                expected_version=a.expected_version,
            )

        return self._write(ctx, command, lambda n, ch: f"updated {_line(ch.after, n)}")

    async def node_add_deps(self, a: NodeAddDepsArgs, ctx: ToolContext) -> ToolOutput:
        def command(s: Session) -> Node:
            s.add_deps(node_id=a.node_id, deps=a.deps, expected_version=a.expected_version)
            return s.node(a.node_id)

        def describe(n: Node, ch: Change) -> str:
            added = [d for d in n.deps if d not in ch.before.nodes[n.id].deps]
            return (
                f"{n.id}: deps {', '.join(n.deps)} (added {', '.join(added)}). {_line(ch.after, n)}"
            )

        return self._write(ctx, command, describe)

    async def node_transition(self, a: NodeTransitionArgs, ctx: ToolContext) -> ToolOutput:
        # the runtime records the workspace ref at COMPLETE and DONE (agent-loop §5.1):
        # computed here, for those transitions only (off the event loop unless it is quick)
        rtws = _rtws(ctx)
        ref = (
            await run_blocking(("workspace_ref", rtws), lambda: workspace_ref(rtws))
            if a.to in REF_TARGETS
            else None
        )

        def command(s: Session) -> tuple[NodeStatus, Node]:
            before = s.node(a.node_id).status
            node = s.transition(
                node_id=a.node_id,
                to=a.to,
                reason=a.reason,
                evidence=a.evidence or "",
                workspace_ref=ref,
                self_check=[
                    SelfCheck(criterion=c.criterion, passed=c.passed, evidence=c.evidence)
                    for c in a.self_check or []
                ]
                or None,
                no_artifacts_reason=a.no_artifacts_reason,
                conclusion=a.conclusion,
                expected_version=a.expected_version,
            )
            return before, node

        def describe(r: tuple[NodeStatus, Node], ch: Change) -> str:
            before, node = r
            return f"{node.id}: {before} → {node.status}. {_line(ch.after, node)}"

        return self._write(ctx, command, describe)

    async def node_get(self, a: NodeGetArgs, ctx: ToolContext) -> ToolOutput:
        task = _task(ctx)
        if isinstance(task, ToolOutput):
            return task
        assert ctx.workspace is not None
        state = _current(ctx, task)
        if not state.exists:
            return self._write(
                ctx, lambda s: s.node(a.node_id), lambda n, ch: _details(ch.after, n, [])
            )
        node = state.nodes.get(a.node_id)
        if node is None:
            return ToolOutput(
                str(
                    WorkspaceError(
                        "UNKNOWN_NODE",
                        f"no node {a.node_id!r} (nodes: {', '.join(state.nodes)})",
                        arg="node_id",
                    )
                ),
                is_error=True,
            )
        log = [e for e in ctx.workspace.log(task) if e.node_id == node.id][-20:]
        offers = _offers(state) if node.id == ROOT_ID else []
        return ToolOutput("\n".join([_details(state, node, log), *offers]))

    async def node_list(self, a: NodeListArgs, ctx: ToolContext) -> ToolOutput:
        task = _task(ctx)
        if isinstance(task, ToolOutput):
            return task
        assert ctx.workspace is not None
        state = _current(ctx, task)

        def listing(st: WorkspaceState, offers: bool = True) -> str:
            if a.root_id not in st.nodes:
                raise WorkspaceError("UNKNOWN_NODE", f"no node {a.root_id!r}", arg="root_id")
            lines = [f"workspace of {st.task} (focus: {st.focus})"]
            lines += ["  " * d + _line(st, n) for n, d in st.walk(a.root_id, a.depth)]
            offers = offers and a.root_id == ROOT_ID  # the whole workspace's listing
            return "\n".join([*lines, *(_offers(st) if offers else [])])

        if not state.exists:  # the first use: its note names the offer (`_first_use`)
            return self._write(ctx, lambda s: None, lambda _r, ch: listing(ch.after, False))
        try:
            return ToolOutput(listing(state))
        except WorkspaceError as exc:
            return ToolOutput(str(exc), is_error=True)

    async def node_dispatch(self, a: NodeDispatchArgs, ctx: ToolContext) -> ToolOutput:
        """Give a node to its member: a detached side dialog whose first message is the
        node's context; the node waits (WAIT) and the member's reply moves it, in the
        reply's transaction (`NODE_SINK`)."""
        task = _task(ctx)
        if isinstance(task, ToolOutput):
            return task
        assert ctx.workspace is not None
        side_id = f"s{ctx.call_key[:12]}"
        members = ctx.workspace.members() or None
        message: dict[str, str] = {}

        def command(s: Session) -> Node:
            node = s.dispatch(
                node_id=a.node_id,
                dispatch_id=ctx.call_key,
                side_id=side_id,
                caller_id=ctx.dialog_id,
                member=a.member,
                members=members,
                expected_version=a.expected_version,
            )
            message["text"] = node_context(
                s.state, node.id, rtws=Path(ctx.rtws), lang=ctx.work_language, acl=ctx.acl
            )
            message["member"] = node.member or ""
            return node

        def detached() -> tuple[StartDetached]:
            # the message and member as the check run built them (the effect re-checks
            # the node; if it refuses, the side dialog is not started)
            return (
                StartDetached(
                    member=message["member"],
                    message=message["text"],
                    sink=NODE_SINK,
                    payload={"task": task, "node_id": a.node_id, "dispatch_id": ctx.call_key},
                    side_id=side_id,
                ),
            )

        def describe(n: Node, ch: Change) -> str:
            return (
                f"dispatched {n.id} to @{n.member} (side dialog {side_id}); {n.id} is WAIT "
                "until the reply, which moves it to COMPLETE or CHECK_FAILED and leaves a "
                "note here. Other work goes on meanwhile."
            )

        return self._write(ctx, command, describe, extra=detached)

    # ------------------------------------------------------------------ docs and rules

    async def doc_lookup(self, a: DocLookupArgs, ctx: ToolContext) -> ToolOutput:
        """The seed's lookup priority as code: the index; then the rtws (honouring
        .gitignore), whose hits are indexed and referenced on the node; else missing,
        and the human must be asked."""
        task = _task(ctx)
        if isinstance(task, ToolOutput):
            return task
        assert ctx.workspace is not None
        state = _current(ctx, task)
        q = " ".join(a.query.split()).casefold()
        hits = [d for d in state.index if q in d.path.casefold() or q in d.description.casefold()]
        if hits:
            return self._lookup_index(a, ctx, hits)
        found = _search_rtws(ctx, q)
        if found:
            return self._lookup_found(a, ctx, found)

        def missing(s: Session) -> None:
            s.record(a.node_id, "doc", f"doc missing: {a.query!r} (not in the index nor the rtws)")

        return self._write(
            ctx,
            missing,
            lambda _r, _ch: (
                f"MISSING: no doc matches {a.query!r} in the workspace index or the rtws. "
                "Do not guess its content: ask the human for it with a tellask "
                f"(`!?@human Where is the doc about {a.query}?`)"
                + (
                    f", or, working on {a.node_id}, reply `BLOCKED: doc about {a.query}`."
                    if a.node_id
                    else "."
                )
            ),
        )

    def _lookup_index(self, a: DocLookupArgs, ctx: ToolContext, hits: list[DocRef]) -> ToolOutput:
        shown = "\n".join(
            f"- {d.path} ({d.status.value}) {d.description}".rstrip() for d in hits[:20]
        )
        head = f"found in the workspace index ({len(hits)}):\n{shown}"
        if a.node_id is None:
            return ToolOutput(head)
        if len(hits) > LOOKUP_HITS:
            return ToolOutput(
                head + f"\nMore than {LOOKUP_HITS}: narrow the query to reference them."
            )
        usable = [d for d in hits if d.status is DocStatus.ACTIVE]

        def command(s: Session) -> list[str]:
            node = s.node(a.node_id or "", "node_id")
            added = []
            for d in usable:
                if node.doc(d.path) is None:
                    s.reference(
                        node_id=node.id,
                        target=d.path,
                        action=RefAction.ADD,
                        description=d.description,
                    )
                    added.append(d.path)
            return added

        return self._write(
            ctx,
            command,
            lambda added, _ch: (
                head
                + (
                    f"\nreferenced on {a.node_id}: {', '.join(added)}"
                    if added
                    else f"\n{a.node_id} references them already."
                )
            ),
        )

    def _lookup_found(self, a: DocLookupArgs, ctx: ToolContext, found: list[str]) -> ToolOutput:
        def command(s: Session) -> None:
            if a.node_id is not None:
                s.node(a.node_id)
            for path in found:
                if s.state.index_doc(path) is None:
                    s.index_add(path, f"found by doc_lookup: {a.query}"[: LIMITS["description"]])
                if a.node_id is not None:
                    s.reference(node_id=a.node_id, target=path, action=RefAction.ADD)

        where = f" and referenced on {a.node_id}" if a.node_id else ""
        return self._write(
            ctx,
            command,
            lambda _r, _ch: (
                "not in the index; found in the rtws, now indexed"
                + where
                + ":\n"
                + "\n".join(f"- {p}" for p in found)
            ),
        )

    async def rule_add(self, a: RuleAddArgs, ctx: ToolContext) -> ToolOutput:
        """Rules are the user's: a root dialog records one the user stated, citing them."""
        if not ctx.is_root:
            return ToolOutput(
                f"Error: rule_add is for the task's root dialog (@{ctx.maintainer}); rules are "
                "the user's, stated there. A node's own constraints go into its requirement.",
                is_error=True,
            )
        task = _task(ctx)
        if isinstance(task, ToolOutput):
            return task
        assert ctx.workspace is not None
        msg = ctx.workspace.user_message(ctx.dialog_id, a.quote)
        if msg is None:
            return ToolOutput(
                str(
                    WorkspaceError(
                        "NOT_STATED",
                        "no message of the user in this dialog contains these words; a rule "
                        "records what the user stated (quote them verbatim)",
                        arg="quote",
                    )
                ),
                is_error=True,
            )
        source = {
            "by": "user",
            "recorded_by": f"@{ctx.member}",
            "dialog": ctx.dialog_id,
            "message_id": msg,
            "quote": " ".join(a.quote.split()),
        }

        def describe(rule: Any, ch: Change) -> str:
            if rule is None:
                return f"the rule exists already: {a.rule.strip()}"
            return f"rule recorded (citing message {msg}): {rule.text}; every dialog of the task now follows it."

        return self._write(ctx, lambda s: s.add_rule(a.rule, source), describe)


_STEP_KEY = "workspace:"


def _checked_on(ctx: ToolContext, task: str) -> Iterator[WorkspaceState]:
    """What a write's check runs on (`_current`), the next only if the command refused
    the one before: first, when the step has no earlier call on the task, the value this
    process last knew committed (`repo.known`: nothing read, not even whether another
    process wrote since), which is what the store holds unless another process wrote; then
    the workspace as stored now. A check that passed on a value the store has moved past
    is caught at its commit (`api.commit_checked`: the command runs again, its result
    replacing the check's); one refused on it is run again on the stored workspace, so a
    call is refused only for what the store holds."""
    assert ctx.workspace is not None
    if ctx.step is not None:
        pending: WorkspaceState | None = ctx.step.get(_STEP_KEY + task)
        if pending is not None:
            yield pending
            return
    access = ctx.workspace
    held = repo.known(access.store, task) if isinstance(access, StoreWorkspaceAccess) else None
    if held is not None:
        yield held
    yield access.load(task)


def _current(ctx: ToolContext, task: str) -> WorkspaceState:
    """The workspace as a call sees it: as stored, with the changes of the step's earlier
    calls applied (they commit only with the step's results, in call order), so a node
    created by one call can be the dep of the next."""
    assert ctx.workspace is not None
    if ctx.step is not None:
        pending: WorkspaceState | None = ctx.step.get(_STEP_KEY + task)
        if pending is not None:
            return pending
    return ctx.workspace.load(task)


def _step_applied(ctx: ToolContext, task: str, change: Change) -> None:
    """Keep `change` for the step's later calls. Its value carries no store stamp: the
    effect of a later call, computed on it, runs its command again at commit, on the
    workspace the earlier effects have written by then."""
    if ctx.step is not None and (change.log or change.changed_nodes):
        ctx.step.put(_STEP_KEY + task, change.after.unstamped())


def _offers(state: WorkspaceState) -> list[str]:
    """The start scan's docs no node has yet (however the workspace was first touched:
    the first tool result names them only when a tool initialised it)."""
    pending = state.pending_offers()
    if not pending:
        return []
    return [
        "docs the start scan found, offered (not dispatched; give them to nodes with "
        "`docs` or node_reference): " + ", ".join(d.path for d in pending)
    ]


def _line(state: WorkspaceState, n: Node) -> str:
    parts = [f"{n.id} [{n.status}] {n.kind.value}"]
    if n.kind is NodeKind.EXECUTION and n.type is NodeType.BENCH:
        parts.append("BENCH")
    parts.append(repr(n.title))
    if n.assignee != MAIN:
        parts.append(n.assignee)
    if n.deps:
        parts.append(f"deps={','.join(n.deps)}")
    if n.docs:
        active = sum(1 for d in n.docs if d.status is DocStatus.ACTIVE)
        parts.append(f"docs={active}/{len(n.docs)}")
    if is_ready(state, n):
        parts.append("ready")
    if state.focus == n.id:
        parts.append("(focus)")
    parts.append(f"v{n.version}")
    return " ".join(parts)


def _details(state: WorkspaceState, n: Node, log: list[Any]) -> str:
    lines = [
        _line(state, n),
        f"parent: {n.parent_id or '-'}; children: {', '.join(n.children) or '-'}",
    ]
    lines += ["requirement:", n.requirement or "-"]
    if n.acceptance_criteria:
        lines.append("acceptance criteria:")
        lines += [
            f"- {c.id}: WHEN {c.when} THEN {c.then}"
            + (f" (verify: {c.verify})" if c.verify else "")
            for c in n.acceptance_criteria
        ]
    lines.append("docs:" if n.docs else "docs: none")
    lines += [f"- {d.path} ({d.status.value}) {d.description}".rstrip() for d in n.docs]
    for label, value in (
        ("skills", ", ".join(n.skills)),
        ("artifacts", ", ".join(n.artifacts)),
        ("blockers", "; ".join(n.blockers)),
        ("notes", n.notes),
        ("conclusion", n.conclusion),
        ("supersedes", n.supersedes or ""),
    ):
        if value:
            lines.append(f"{label}: {value}")
    if n.dispatch is not None:
        lines.append(f"dispatched to @{n.dispatch.member} (side dialog {n.dispatch.side_id})")
    if n.isolate:
        lines.append("isolated: its context has no ancestor chain")
    if log:
        lines.append("log:")
        lines += [f"- {e.actor}: {e.text}" for e in log]
    return "\n".join(lines)


def _search_rtws(ctx: ToolContext, query: str) -> list[str]:
    """Files of the rtws whose path contains the query (the file tools' walk: .gitignore,
    ACLs and encapsulation honoured), at most `LOOKUP_HITS`."""
    root = rtws_root(ctx)
    found: list[str] = []
    for path in search._iter_search_files(ctx, root):
        rel = relative_to_rtws(root, path)
        if query in rel.casefold():
            found.append(rel)
            if len(found) >= LOOKUP_HITS:
                break
    return found


_DESCRIPTIONS: dict[str, str] = {
    "node_create": "Create a node (a to-do item) under a planning node. Give it exactly the docs "
    "it needs: a child sees only its own docs, never its parent's.",
    "node_split": "Split an IN_PROGRESS node: the new sub-node takes the focus; "
    "inherit_context=false isolates it.",
    "node_reference": "Add, remove, expire or activate a doc reference of a node. Expired "
    "docs stay listed but never enter a prompt.",
    "node_get": "A node with its docs, criteria, conclusion and recent log.",
    "node_list": "The node tree (status, kind, assignee, deps, focus).",
    "node_update": "Set a node's notes, artifacts or conclusion.",
    "node_add_deps": "Add deps to a node that has not started: it starts only when they are "
    "DONE. Use it when a node created earlier (a BENCH acceptance test above all) must also "
    "wait for nodes created after it. The deps must stay a DAG; a TASK never depends on a "
    "BENCH.",
    "node_transition": "Move a node to another status (the transition table decides; "
    "COMPLETE needs a self-check of every criterion and artifacts or a reason; DONE, "
    "FAILED, CANCELLED need a conclusion).",
    "node_dispatch": "Give an execution node to a member: a side dialog with the node's "
    "context (requirement, criteria, rules, its active docs, its deps' results). You go "
    "on; their reply moves the node and leaves you a note.",
    "doc_lookup": "Find a doc: the workspace index first, then the project files; if "
    "nowhere, ask the human.",
    "rule_add": "Record a rule the user stated in this conversation (root dialog only); "
    "it then binds every dialog of the task.",
}


def workspace_tools(
    lang: Lang = "en", *, authority_for: AuthorityFor = chat_authority
) -> list[Tool[Any]]:
    tools = Tools(authority_for)
    specs: list[tuple[str, Any, Any]] = [
        ("node_create", NodeCreateArgs, tools.node_create),
        ("node_split", NodeSplitArgs, tools.node_split),
        ("node_reference", NodeReferenceArgs, tools.node_reference),
        ("node_get", NodeGetArgs, tools.node_get),
        ("node_list", NodeListArgs, tools.node_list),
        ("node_update", NodeUpdateArgs, tools.node_update),
        ("node_add_deps", NodeAddDepsArgs, tools.node_add_deps),
        ("node_transition", NodeTransitionArgs, tools.node_transition),
        ("node_dispatch", NodeDispatchArgs, tools.node_dispatch),
        ("doc_lookup", DocLookupArgs, tools.doc_lookup),
        ("rule_add", RuleAddArgs, tools.rule_add),
    ]
    return [
        Tool(
            name=name,
            description=_DESCRIPTIONS[name],
            args_model=model,
            run=run,
            toolset=TOOLSET,
            store_only=True,  # reads, and node changes that commit with the result
        )
        for name, model, run in specs
    ]
