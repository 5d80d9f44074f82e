"""The workspace's use cases, for the CLI, the Python API, the tools and the runtime.

`execute` is the one way a command reaches the store: in one transaction it loads the
workspace, initialises it on first use (the root node, and the start scan recorded in
the log with the docs it found offered to the planner), runs the command, checks the
invariants and writes the difference; once the transaction commits, the projection files
it touched are rewritten (coalesced during a work loop's run: `projector.py`). The
runtime's step count (`count_steps`), which moves one node's record and nothing a check
reads, is written the same way without a command session. Reads (`show`, `node_view`,
`rules`, `docs`) never create state.

`WorkspaceApi` is the same over an rtws for people (the CLI's `rules`, `docs`, `workspace`
and `node` commands), acting as the user: rules and the doc index are theirs to manage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from mindloop.errors import MindloopError
from mindloop.i18n import Lang
from mindloop.store import Store
from mindloop.store import workspace as rows
from mindloop.taskdoc import TaskPackage
from mindloop.tools.base import Acl
from mindloop.workspace import projection, projector, repo
from mindloop.workspace.commands import Change, Session
from mindloop.workspace.docs import file_check
from mindloop.workspace.errors import WorkspaceError
from mindloop.workspace.models import DocRef, DocStatus, LogEntry, Node, Rule
from mindloop.workspace.report import find_report
from mindloop.workspace.scan import scan
from mindloop.workspace.state import WorkspaceState, is_ready
from mindloop.workspace.transitions import Authority

T = TypeVar("T")


def execute(
    store: Store,
    rtws: Path,
    task: str,
    authority: Authority,
    command: Callable[[Session], T],
    *,
    lang: Lang = "en",
    acl: Acl | None = None,
    now: float | None = None,
) -> tuple[T, Change]:
    """Run `command` on the task's workspace in one transaction (joining the caller's, if
    one is open) and rewrite the projections after the commit. A refused command raises
    `WorkspaceError` and writes nothing."""
    with store.tx():
        s = prepare(store, rtws, task, authority, lang=lang, acl=acl, now=now)
        result = command(s)
        change = s.finish()
        repo.commit(store, change, rtws=rtws, project=project)
    return result, change


def commit_checked(store: Store, rtws: Path, change: Change) -> bool:
    """Commit `change`, a command's result computed on the workspace as it was read (a
    tool's check before its result commits), if the workspace has not moved since: the
    command would compute the same change again. The workspace is still at the stamp the
    change was computed at; or still not initialised (the change initialises it); or, for
    a tool step's later call (computed on the earlier calls' changes, whose value has no
    stamp), still what the earlier call's change wrote (`repo.follows`). False (nothing
    written) when it moved: run the command again (`execute`)."""
    before = change.before
    with store.tx():
        now = rows.stamp(store, before.task)
        if not before.exists:
            current = now is None
        elif before.stamp:
            current = now == before.stamp
        else:
            current = repo.follows(store, change, now)
        if not current:
            return False
        repo.commit(store, change, rtws=rtws, project=project)
    return True


def count_steps(
    store: Store,
    rtws: Path,
    task: str,
    node_id: str,
    steps: int,
    *,
    now: float | None = None,
) -> WorkspaceState:
    """The runtime adds a closing DO entry's model `steps` to its node's `steps_used`
    (agent-loop §5.1, §8.1: the step budget) in the caller's transaction, the projections
    rewritten after the commit as `execute`'s are. A count moves one node's record and
    nothing a status, a link or an invariant is derived from, so it is written as the
    change `Session.count_steps` would make (the node's version bumped, no log row)
    without a command session and its checks. Nothing is written for no steps, or for a
    node that is missing or terminal (a terminal node's count is final). The workspace
    as it is after (shared: read it, never change it)."""
    if steps < 0:
        raise WorkspaceError("INVALID_VALUE", f"steps must be >= 0, got {steps}", arg="steps")
    with store.tx():
        state = repo.load(store, task)
        node = state.peek(node_id)
        if not steps or node is None or node.terminal:
            return state
        after = state.cow()
        taken = after.nodes[node_id]
        taken.steps_used += steps
        taken.version = node.version + 1
        taken.updated_at = time.time() if now is None else now
        change = Change(state, after, changed=[node_id])
        repo.commit(store, change, rtws=rtws, project=project)
    return after


def prepare(
    store: Store,
    rtws: Path,
    task: str,
    authority: Authority,
    *,
    lang: Lang = "en",
    acl: Acl | None = None,
    now: float | None = None,
) -> Session:
    """A session on the task's workspace as stored now, initialised on first use."""
    return session_for(repo.load(store, task), rtws, authority, lang=lang, acl=acl, now=now)


def session_for(
    state: WorkspaceState,
    rtws: Path,
    authority: Authority,
    *,
    lang: Lang = "en",
    acl: Acl | None = None,
    now: float | None = None,
) -> Session:
    """A session on `state`; a workspace used for the first time is initialised: its root
    node, and the start scan recorded in its log, the docs found offered to the planner."""
    s = Session(state, authority, doc_check=file_check(rtws, acl), now=now)
    if not state.exists:
        found = scan(rtws)
        s.init(lang=lang, offered=found.docs)
        s.record(None, "scan", found.text(), docs=[d.path for d in found.docs])
    return s


def project(store: Store, rtws: Path, change: Change) -> None:
    """Stage the files `change` touched; they are written after the commit."""
    projector.stage(store, rtws, change)


def refresh_all(store: Store, rtws: Path) -> list[str]:
    """Rewrite every workspace's projections from the store (what `mindloop run` does at
    start: a crash between a commit and its files left them behind). Returns the tasks."""
    done = []
    for task in rows.tasks(store):
        projection.write(store, rtws, task)
        done.append(task)
    return done


def workspace_problems(rtws: Path | str) -> list[str]:
    """What `mindloop check` reports of the workspaces: projections edited by hand, hand
    edits kept beside a rewritten file, projections that disagree with the store. Nothing
    when nothing was run yet (no state is created)."""
    root = Path(rtws)
    if not Store.exists_for(root):
        return []
    store = Store.for_rtws(root)
    try:
        return [p for task in rows.tasks(store) for p in projection.problems(store, root, task)]
    finally:
        store.close()


# ---------------------------------------------------------------------- views


class NodeView(BaseModel):
    """A node as `node show` and `workspace show --json` give it (derived facts added)."""

    node: Node
    depth: int = 0
    ready: bool = False
    focus: bool = False
    log: list[LogEntry] = []
    check_report: LogEntry | None = None  # the row `node.check_report_ref` names


class WorkspaceView(BaseModel):
    task: str
    exists: bool
    language: str = "en"
    focus: str | None = None
    rules: list[Rule] = []
    docs: list[DocRef] = []
    found: list[DocRef] = []
    nodes: list[NodeView] = []


def view(state: WorkspaceState) -> WorkspaceView:
    if not state.exists:
        return WorkspaceView(task=state.task, exists=False)
    return WorkspaceView(
        task=state.task,
        exists=True,
        language=state.lang,
        focus=state.focus,
        rules=state.rules,
        docs=state.index,
        found=state.offered,
        nodes=[
            NodeView(node=n, depth=d, ready=is_ready(state, n), focus=n.id == state.focus)
            for n, d in state.walk()
        ],
    )


# ---------------------------------------------------------------------- for people


class WorkspaceApi:
    """One task's workspace in an rtws, for the CLI and Python users (acting as the user).

    api = WorkspaceApi("my-project", "tasks/login.tsk")
    api.add_rule("Use type hints everywhere")
    api.add_doc("docs/auth.md", "auth design")
    print(api.show().nodes)
    """

    def __init__(
        self,
        rtws: Path | str,
        task: str,
        *,
        store: Store | None = None,
        who: str = "human",
        lang: Lang | None = None,
    ) -> None:
        self.rtws = Path(rtws).resolve()
        if not self.rtws.is_dir():
            raise MindloopError(f"rtws {self.rtws} does not exist")
        pkg = TaskPackage(self.rtws, task)
        if not pkg.exists():
            raise MindloopError(
                f"task package {pkg.rel_path} does not exist (create it with "
                f"`mindloop task new <slug>`)"
            )
        self.task = pkg.rel_path
        self.authority = Authority.user(who)
        self._store = store
        self._own = store is None
        self._lang = lang

    # the store: opened for writes (created if need be), for reads only if it exists
    def _writing(self) -> Store:
        if self._store is None:
            self._store = Store.for_rtws(self.rtws)
        return self._store

    def _reading(self) -> Store | None:
        if self._store is None and not Store.exists_for(self.rtws):
            return None
        return self._writing()

    def close(self) -> None:
        if self._own and self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> WorkspaceApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lang(self) -> Lang:
        if self._lang is None:
            from mindloop.config import ConfigError, load_config

            try:
                self._lang = load_config(self.rtws).team.work_language
            except (ConfigError, MindloopError, OSError):
                self._lang = "en"
        return self._lang

    def run(self, command: Callable[[Session], T]) -> T:
        result, _ = execute(
            self._writing(), self.rtws, self.task, self.authority, command, lang=self.lang()
        )
        return result

    # ------------------------------------------------------------------ reads

    def state(self) -> WorkspaceState:
        store = self._reading()
        return repo.load(store, self.task) if store is not None else WorkspaceState(self.task)

    def show(self) -> WorkspaceView:
        return view(self.state())

    def node_view(self, node_id: str) -> NodeView:
        state = self.state()
        s = Session(state, self.authority)
        node = s.node(node_id)
        store = self._reading()
        entries = [e for e in repo.log(store, self.task) if e.node_id == node.id] if store else []
        depth = next((d for n, d in state.walk() if n.id == node.id), 0)
        return NodeView(
            node=node,
            depth=depth,
            ready=is_ready(state, node),
            focus=state.focus == node.id,
            log=entries,
            check_report=find_report(node, entries),
        )

    def log(self) -> list[LogEntry]:
        store = self._reading()
        return repo.log(store, self.task) if store is not None else []

    def rules(self) -> list[Rule]:
        return self.state().rules

    def docs(self) -> list[DocRef]:
        return self.state().index

    # ------------------------------------------------------------------ writes

    def add_rule(self, text: str) -> Rule | None:
        """None when the same rule exists already (rules are never duplicated)."""
        return self.run(lambda s: s.add_rule(text, {"by": self.authority.who, "via": "api"}))

    def remove_rule(self, text: str) -> Rule:
        return self.run(lambda s: s.remove_rule(text))

    def add_doc(self, path: str, description: str = "") -> DocRef:
        return self.run(lambda s: s.index_add(path, description))

    def remove_doc(self, path: str) -> DocRef:
        return self.run(lambda s: s.index_remove(path))

    def expire_doc(self, path: str) -> DocRef:
        return self.run(lambda s: s.index_status(path, DocStatus.EXPIRED))

    def activate_doc(self, path: str) -> DocRef:
        return self.run(lambda s: s.index_status(path, DocStatus.ACTIVE))

    def command(self, fn: Callable[[Session], Any], *, authority: Authority | None = None) -> Any:
        """Any session command, as `authority` (default: the user), e.g. to build a tree
        from a script: `api.command(lambda s: s.create_node(...), authority=Authority.chat())`."""
        result, _ = execute(
            self._writing(),
            self.rtws,
            self.task,
            authority or self.authority,
            fn,
            lang=self.lang(),
        )
        return result


def member_reply(
    store: Store,
    rtws: Path,
    task: str,
    *,
    node_id: str,
    dispatch_id: str,
    ok: bool,
    text: str,
    side_id: str,
    member: str,
) -> str:
    """A dispatched member's final reply, applied inside the reply's transaction (the
    detached side dialog's sink): the node moves WAIT → COMPLETE, or CHECK_FAILED with
    the missing items as blockers. Returns the note for the dialog that dispatched it."""
    note, _ = execute(
        store,
        rtws,
        task,
        Authority.runtime(f"runtime (reply of @{member})"),
        lambda s: s.member_reply(
            node_id=node_id,
            dispatch_id=dispatch_id,
            ok=ok,
            text=text,
            side_id=side_id,
            member=member,
        ),
    )
    return note
