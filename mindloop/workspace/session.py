"""A workspace session's base: its state, who acts, the log it keeps, and the inputs and
result (`Change`) every command shares. The commands themselves are `commands.Session`
(nodes, docs, rules) over `moves.Moves` (transitions, dispatch, member replies).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from mindloop.workspace.docs import DocCheck, normalise
from mindloop.workspace.errors import StaleVersion, WorkspaceError
from mindloop.workspace.models import (
    MAIN,
    MEMBER_PREFIX,
    DocRef,
    LogEntry,
    Node,
    Rule,
)
from mindloop.workspace.state import WorkspaceState, copy_index, copy_rules
from mindloop.workspace.transitions import (
    Authority,
)

_MEMBER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DIR_UNSAFE = re.compile(r'[/\\:*?"<>|\s]+')


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
    # `changed_nodes` once known: found by `Session.finish` (the nodes whose versions it
    # bumped, and the new ones), kept by `repo.write` for the files (`projector.stage`),
    # so the nodes are compared with their old selves once per change
    changed: list[str] | None = field(default=None, compare=False, repr=False)

    @property
    def changed_nodes(self) -> list[str]:
        """New nodes (in creation order) and nodes that differ from before; only the
        nodes the session took can (`WorkspaceState.touched`)."""
        if self.changed is not None:
            return self.changed
        before, after = self.before, self.after
        out = []
        for nid in after.touched():
            old = before.peek(nid)
            if old is None or old != after.peek(nid):
                out.append(nid)
        return out


def dir_name(title: str, node_id: str) -> str:
    """`<title>_<id>` with unsafe characters replaced, at most 50 characters of title."""
    safe = _DIR_UNSAFE.sub("_", title).strip("_.") or "node"
    return f"{safe[:50]}_{node_id}"


_E = TypeVar("_E", bound=StrEnum)


def enum_value(arg: str, cls: type[_E], value: str) -> _E:
    """`value` as a member of `cls`, or an error naming the allowed values (upstream's
    silent success on an unknown `action` must be impossible: flaw 3)."""
    if type(value) is cls:  # a member already (the usual call): no look-up
        return value
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


class SessionBase:
    """A session's state and the helpers every command uses."""

    def __init__(
        self,
        state: WorkspaceState,
        authority: Authority,
        *,
        doc_check: DocCheck = syntax_only,
        now: float | None = None,
    ) -> None:
        self.before = state
        self.state = state.cow()
        self.authority = authority
        self.doc_check = doc_check
        self.now = time.time() if now is None else now
        self.log: list[LogEntry] = []

    # ------------------------------------------------------------------ helpers

    def index_taken(self) -> list[DocRef]:
        """The doc index to change: the session's own from now on (the value the session
        started from shares its list until a command takes it: `WorkspaceState.cow`)."""
        state = self.state
        if state.index is self.before.index:
            state.index = copy_index(state.index)
        return state.index

    def rules_taken(self) -> list[Rule]:
        """The rules to change: the session's own from now on (as `index_taken`)."""
        state = self.state
        if state.rules is self.before.rules:
            state.rules = copy_rules(state.rules)
        return state.rules

    def node(self, node_id: str, arg: str = "node_id") -> Node:
        """The node to change (the session's copy from now on)."""
        self.read_node(node_id, arg)
        return self.state.nodes[node_id]

    def read_node(self, node_id: str, arg: str = "node_id") -> Node:
        """The node to read only (not copied: a command that changes nothing in it does
        not take it)."""
        node = self.state.peek(node_id)
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
            self.read_node(node_id)
        self._log(node_id, kind, text, **data)

    def _require_init(self) -> None:
        if not self.state.exists:
            raise WorkspaceError(
                "NO_WORKSPACE", f"the workspace of {self.state.task} is not initialised yet"
            )

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
