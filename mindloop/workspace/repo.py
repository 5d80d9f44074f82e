"""A workspace value from the store, and a `Change` written back (inside the caller's
transaction).

`load` reads the workspace's stamp (`ws_meta.stamp`, a new unique token at every `write`:
`unique.token`)
and returns the value it holds for this store when it was read or written at that stamp
(a per-store cache, kept from each write's change itself): the loop reads the workspace
several times per phase, and a full read validates every node. A value written in a
transaction that then rolls back carries a stamp the store never shows again, so it is
never returned; nor is one read while another process wrote (the stamp is read first).
A cached value is shared: read it, never change it in place.

`write` re-reads nothing: the session that produced the change ran on a state loaded in
the same transaction (which holds the write lock), and every node update still carries
the version it expects, so a write that raced anyway is refused (`WriteConflict`) and the
transaction rolls back whole. The node rows and the meta row (with its stamp) are written
once per transaction, just before it reads anything or commits (`_HeldBack`): a step's
calls, the phase they end and the count of its steps move one node and restamp the
workspace several times in one transaction. After the commit the files the change touched
are rewritten (`projector.stage`).

A tool's change is computed before its result's transaction (a check, then the same
change committed with the result: `api.commit_checked`); a step's later calls are
computed on the earlier calls' changes, before any commits. `follows` says when such a
change can be written as is: the store still holds exactly what the earlier call's write
left, and that write completed nothing in place (log ids, rule ids) that the later call
had copied before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from mindloop.i18n import Lang
from mindloop.store import Store
from mindloop.store import workspace as rows
from mindloop.workspace import unique
from mindloop.workspace.commands import Change
from mindloop.workspace.errors import WriteConflict
from mindloop.workspace.models import DocRef, LogEntry, Node, Rule
from mindloop.workspace.per_store import PerStore
from mindloop.workspace.report import is_report, report_ref
from mindloop.workspace.state import NodeMap, WorkspaceState


class _Written(NamedTuple):
    """The last change this store wrote of a workspace: the stamp it wrote, its value (the
    change's `after`, whose nodes and lists a tool step's later calls share), and what
    `write` completed in place in it and in the values it followed (a step's earlier
    calls): the log ids of nodes' transitions (`patched`) and new rules' ids (`rules`),
    which a copy taken before those writes lacks."""

    stamp: str
    value: WorkspaceState
    patched: frozenset[str]
    rules: bool


@dataclass
class _Held:
    """What this process holds of one store's workspaces, by task: the value at its stamp
    (`load`'s cache), the last change written (`follows`), and the last value known
    committed (`known`)."""

    values: dict[str, WorkspaceState] = field(default_factory=dict)
    written: dict[str, _Written] = field(default_factory=dict)
    committed: dict[str, WorkspaceState] = field(default_factory=dict)


_held = PerStore(_Held).of  # the store's (made on first use)


def load(
    store: Store, task_path: str, *, cached: bool = True, stamp: str | None = None
) -> WorkspaceState:
    """The task's workspace (an empty, uninitialised one if it has none yet). With
    `cached`, a value shared with other readers when the store's stamp says it is current
    (one indexed read instead of the whole workspace): never change it in place (a
    command session works on `state.cow()`). Without, a full read of one's own.

    `stamp`: the stamp the caller has just read for the same purpose (e.g. the rules of
    the same request, `RulesText.last_stamp`): the value held at it is returned without
    reading the stamp again; if none is held, the workspace is read as it is now."""
    if not cached:
        return _read(store, task_path)
    held = _held(store)
    found = held.values.get(task_path)
    if found is not None and found.stamp == (stamp or rows.stamp(store, task_path)):
        return found
    state = _read(store, task_path)
    if state.exists:
        held.values[task_path] = state
        _known_once_committed(store, held, state)
    return state


def known(store: Store, task_path: str) -> WorkspaceState | None:
    """The last value of the workspace this process read or wrote that is committed
    (another process may have written since: nothing is read to tell), or None. For a
    check whose commit tells again, as a tool's check is (`api.commit_checked` writes the
    change only if the workspace is still at this value's stamp). Shared: never change it
    in place."""
    return _held(store).committed.get(task_path)


def _known_once_committed(store: Store, held: _Held, state: WorkspaceState) -> None:
    # at once outside a transaction; inside one, once it commits (never if it rolls back)
    store.after_commit(
        f"workspace-known:{state.task}", lambda: held.committed.__setitem__(state.task, state)
    )


def follows(store: Store, change: Change, stamp: str | None) -> bool:
    """Whether `change` was computed on the value the store's last write of the workspace
    left, that write's `stamp` is still the store's (the stamp just read), and none of the
    records `write` completed in place is one the change took (copied before the write):
    then writing it writes what running its command again would. Such a change is a tool
    step's later call, computed on the earlier calls' changes before they committed
    (`toolsets.workspace._step_applied`: the value keeps their nodes and lists)."""
    before = change.before
    last = _held(store).written.get(before.task)
    if last is None or stamp is None or last.stamp != stamp or last.rules or not before.exists:
        return False
    value = last.value
    return (
        before.nodes is value.nodes
        and before.index is value.index
        and before.rules is value.rules
        and before.offered is value.offered
        and before.focus == value.focus
        and before.lang == value.lang
        and before.created_at == value.created_at
        and last.patched.isdisjoint(change.after.touched())
    )


def held(store: Store, task_path: str, stamp: str) -> WorkspaceState | None:
    """The value this store holds for the workspace at `stamp` (a stamp just read), if
    any: nothing is read."""
    found = _held(store).values.get(task_path)
    return found if found is not None and found.stamp == stamp else None


def _read(store: Store, task_path: str) -> WorkspaceState:
    # the stamp is read with the meta row, before the rest: a write committed in between
    # makes the value newer than its stamp says, and that stamp is gone: never hit again
    found = rows.load(store, task_path)
    if found is None:
        return WorkspaceState(task=task_path)
    meta = found.meta
    lang: Lang = "zh" if meta["lang"] == "zh" else "en"
    return WorkspaceState(
        task=task_path,
        lang=lang,
        nodes={r["node_id"]: Node.model_validate(r["data"]) for r in found.nodes},
        index=[
            DocRef(path=d["path"], description=d["description"], status=d["status"])
            for d in found.docs
        ],
        rules=[
            Rule(id=r["id"], text=r["text"], source=r["source"] or {}, created_at=r["created_at"])
            for r in found.rules
        ],
        focus=meta["focus"],
        offered=[DocRef.model_validate(d) for d in meta["offered"] or []],
        created_at=meta["created_at"],
        exists=True,
        stamp=meta["stamp"] or "",
    )


def _entries(found: list[dict[str, Any]]) -> list[LogEntry]:
    return [
        LogEntry(
            id=r["id"],
            node_id=r["node_id"],
            at=r["at"],
            actor=r["actor"],
            kind=r["kind"],
            text=r["text"],
            data=r["data"] or {},
        )
        for r in found
    ]


def log(store: Store, task_path: str) -> list[LogEntry]:
    """The task's whole log, oldest first."""
    return _entries(rows.log(store, task_path))


def node_log(store: Store, task_path: str, node_id: str | None) -> list[LogEntry]:
    """One node's log (None: the workspace's own rows), oldest first."""
    return _entries(rows.node_log(store, task_path, node_id))


LogLine = rows.LogLine  # (node_id, at, actor, text): what the projections show of a row


def log_lines(store: Store, task_path: str, node_id: str | None = "") -> list[LogLine]:
    """The log's rows as the projections show them, oldest first: the whole log, or one
    node's with `node_id` (None: the workspace's own rows)."""
    return rows.log_lines(store, task_path, node_id)


def _node_row(node: Node) -> dict[str, Any]:
    # the record without its fields at None: each defaults to None (a test holds the models
    # to it), so it reads back the same, and its JSON has no `null` (the store's encoder
    # serialises a document with one a second time, to tell it from NaN)
    return {
        "parent_id": node.parent_id,
        "status": node.status.value,
        "version": node.version,
        "data": node.model_dump(mode="json", exclude_none=True),
        "updated_at": node.updated_at,
    }


class _Meta:
    """What a transaction's writes set of one workspace's meta row, merged: each field as
    the last write that set it left it."""

    __slots__ = ("focus", "focus_moved", "offered", "stamp", "updated_at")

    def __init__(self, stamp: str, focus: str) -> None:
        self.stamp = stamp
        self.focus = focus  # as every write leaves it (what `update_meta` sets)
        self.focus_moved = False
        self.offered: list[DocRef] | None = None  # None: as stored
        self.updated_at: float | None = None  # None: as stored (a restamp only)


class _HeldBack:
    """The node rows and meta rows a transaction's workspace writes changed, written once
    each before it reads anything or commits (`Store.deferred`): a step's calls, the phase
    it ends and the count of its steps move a node and restamp the workspace several
    times in one transaction. The transaction holds the write lock from its start, so a
    node row checked at the flush is what it was at the write (each node's first write
    in the transaction carries the version it expects; a later write of the same node is
    checked against the earlier one here, as the row would be)."""

    __slots__ = ("metas", "nodes", "store")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.nodes: dict[tuple[str, str], tuple[int, Node]] = {}  # (task, id) -> (expected, node)
        self.metas: dict[str, _Meta] = {}

    def node(self, task: str, nid: str, expected: int, node: Node) -> None:
        key = (task, nid)
        held = self.nodes.get(key)
        if held is None:
            self.nodes[key] = (expected, node)
        elif held[1].version != expected:
            raise WriteConflict(nid, expected)
        else:
            self.nodes[key] = (held[0], node)

    def meta(
        self,
        task: str,
        stamp: str,
        *,
        focus: str,
        offered: list[DocRef] | None = None,
        focus_moved: bool = False,
        updated_at: float | None = None,
    ) -> None:
        m = self.metas.get(task)
        if m is None:
            m = self.metas[task] = _Meta(stamp, focus)
        m.stamp, m.focus = stamp, focus
        m.focus_moved = m.focus_moved or focus_moved
        if offered is not None:
            m.offered = offered
        if updated_at is not None:
            m.updated_at = updated_at
        rows.stamped(self.store, task, stamp)  # what `rows.stamp` reads in the meantime

    def __call__(self) -> None:
        store = self.store
        for (task, nid), (expected, node) in self.nodes.items():
            if not rows.update_node(store, task, nid, expected, **_node_row(node)):
                raise WriteConflict(nid, expected)
        for task, m in self.metas.items():
            if m.updated_at is None:
                rows.restamp(store, task, m.stamp)
            elif m.offered is not None:  # restamps it too
                offered = [d.model_dump(mode="json") for d in m.offered]
                rows.update_meta(
                    store,
                    task,
                    focus=m.focus,
                    offered=offered,
                    updated_at=m.updated_at,
                    stamp=m.stamp,
                )
            elif m.focus_moved:  # the focus alone
                rows.focus_meta(store, task, focus=m.focus, updated_at=m.updated_at, stamp=m.stamp)
            else:
                rows.touch_meta(store, task, updated_at=m.updated_at, stamp=m.stamp)


def _held_back(store: Store) -> _HeldBack:
    return store.deferred("workspace-rows", lambda: _HeldBack(store))


def write(store: Store, change: Change) -> None:
    """Write what `change` did (in the caller's transaction; the node and meta rows once
    per transaction, before it reads anything or commits: `_HeldBack`)."""
    with store.tx():
        _write(store, change)


def _write(store: Store, change: Change) -> None:
    before, after = change.before, change.after
    task = after.task
    now = max([e.at for e in change.log], default=after.created_at)
    stamp = unique.token()  # this write's (see the module doc)
    if not before.exists and after.exists:
        rows.insert_meta(
            store,
            {
                "task_path": task,
                "lang": after.lang,
                "focus": after.focus,
                "offered": [d.model_dump(mode="json") for d in after.offered],
                "created_at": after.created_at,
                "updated_at": now,
                "stamp": stamp,
            },
        )
    # log rows first: a node's worklog refs name the transitions it went through, and
    # its check report is the row of CHECK's verdict (`workspace.report`)
    refs: dict[str, list[int]] = {}
    reports: dict[str, int] = {}
    log_ids = rows.insert_logs(
        store,
        [
            {
                "task_path": task,
                "node_id": entry.node_id,
                "at": entry.at,
                "actor": entry.actor,
                "kind": entry.kind,
                "text": entry.text,
                "data": entry.data,
            }
            for entry in change.log
        ],
    )
    for entry, rid in zip(change.log, log_ids, strict=True):
        if entry.node_id is not None and entry.kind == "transition":
            refs.setdefault(entry.node_id, []).append(rid)
            if is_report(entry.data):
                reports[entry.node_id] = rid
    for nid, r in refs.items():
        node = after.nodes.get(nid)
        if node is not None:
            node.worklog_refs = [*node.worklog_refs, *r]
            if nid in reports:
                node.check_report_ref = report_ref(reports[nid])
    seq = len(before.nodes)
    changed = change.changed_nodes
    change.changed = changed  # what the files of the change show (`projector.stage`)
    held_back: _HeldBack | None = None
    for nid in changed:
        node = after.nodes[nid]
        old = before.peek(nid)
        if old is None:
            rows.insert_node(
                store, {"task_path": task, "node_id": nid, "seq": seq, **_node_row(node)}
            )
            seq += 1
        else:
            if held_back is None:
                held_back = _held_back(store)
            held_back.node(task, nid, old.version, node)
    index_moved = after.index is not before.index and before.index != after.index
    if index_moved:
        rows.replace_docs(
            store,
            task,
            [
                {"path": d.path, "description": d.description, "status": d.status.value}
                for d in after.index
            ],
        )
    if after.rules is not before.rules:  # taken by the session: some may be gone
        kept = {r.id for r in after.rules if r.id}
        for rule in before.rules:
            if rule.id not in kept:
                rows.delete_rule(store, rule.id)
    new_rules = False
    for rule in after.rules:
        if not rule.id:
            new_rules = True
            rule.id = rows.insert_rule(
                store,
                {
                    "task_path": task,
                    "text": rule.text,
                    "source": rule.source,
                    "created_at": rule.created_at,
                },
            )
    offered_moved = after.offered is not before.offered and before.offered != after.offered
    moved = before.focus != after.focus or offered_moved
    rules_moved = new_rules or (after.rules is not before.rules and before.rules != after.rules)
    meta = before.exists and (moved or bool(change.log))
    if meta:
        (held_back or _held_back(store)).meta(
            task,
            stamp,
            focus=after.focus,
            offered=after.offered if offered_moved else None,
            focus_moved=before.focus != after.focus,
            updated_at=now,
        )
    wrote = not before.exists or changed or change.log or index_moved or rules_moved or moved
    if after.exists and wrote:
        if before.exists and not meta:
            (held_back or _held_back(store)).meta(task, stamp, focus=after.focus)
        taken = after.nodes  # the value's own dict (a session's view is a new one)
        nodes = taken.view() if type(taken) is NodeMap else dict(taken)
        held = _held(store)
        held.values[task] = value = WorkspaceState(
            task=task,
            lang=after.lang,
            nodes=nodes,
            index=after.index,
            rules=after.rules,
            focus=after.focus,
            offered=after.offered,
            created_at=after.created_at,
            exists=True,
            stamp=stamp,
        )
        _known_once_committed(store, held, value)
        last = held.written.get(task)
        patched, rules = frozenset(refs), new_rules
        if last is not None and before.nodes is last.value.nodes:  # a step's later call:
            patched, rules = patched | last.patched, rules or last.rules  # what it copied
        held.written[task] = _Written(stamp, after, patched, rules)


def commit(
    store: Store,
    change: Change,
    *,
    rtws: Path | None = None,
    project: Callable[[Store, Path, Change], None] | None = None,
) -> None:
    """`write` the change and hand it to `project(store, rtws, change)` (when both are
    given), which stages the files it touched and writes them once the transaction
    commits (`projector.stage`)."""
    write(store, change)
    if rtws is not None and project is not None:
        project(store, rtws, change)
