"""The store's tables (SQLAlchemy Core) and forward migrations.

Only `mindloop.store` touches these tables. The schema is versioned: `MIGRATIONS[i]`
upgrades version i to i+1; a fresh database runs them all. Never edit a shipped
migration: append a new one.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

metadata = sa.MetaData()

schema_version = sa.Table(
    "schema_version", metadata, sa.Column("version", sa.Integer, nullable=False)
)

dialogs = sa.Table(
    "dialogs",
    metadata,
    sa.Column("id", sa.String, primary_key=True),
    sa.Column("root_id", sa.String, nullable=False, index=True),
    sa.Column("parent_id", sa.String, nullable=True),
    sa.Column("member", sa.String, nullable=False),
    sa.Column("task_path", sa.String, nullable=False),
    sa.Column("kind", sa.String, nullable=False),  # root | side | fbr
    sa.Column("status", sa.String, nullable=False),
    sa.Column("course", sa.Integer, nullable=False, default=1),
    sa.Column("needs_drive", sa.Boolean, nullable=False, default=False),
    sa.Column("session_key", sa.String, nullable=True),
    sa.Column("assignment", sa.JSON, nullable=True),
    sa.Column("title", sa.String, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    # v2: who drives the dialog (a process's owner id) and until when (epoch seconds)
    sa.Column("claim_owner", sa.String, nullable=True),
    sa.Column("claim_expires", sa.Float, nullable=True),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dialog_id", sa.String, nullable=False),
    sa.Column("course", sa.Integer, nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("generation_id", sa.Integer, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_messages_dialog_course", "dialog_id", "course", "id"),
)

generations = sa.Table(
    "generations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dialog_id", sa.String, nullable=False, index=True),
    sa.Column("provider", sa.String, nullable=False),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float, nullable=True),
    sa.Column("input_tokens", sa.Integer, nullable=True),
    sa.Column("output_tokens", sa.Integer, nullable=True),
    sa.Column("finish_reason", sa.String, nullable=True),
    sa.Column("error", sa.String, nullable=True),
    # v4: what it cost in US dollars (None: no known price; see `providers.pricing`)
    sa.Column("cost_usd", sa.Float, nullable=True),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dialog_id", sa.String, nullable=True, index=True),
    sa.Column("type", sa.String, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("ts", sa.Float, nullable=False),
)

pending_tellasks = sa.Table(
    "pending_tellasks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("caller_id", sa.String, nullable=False, index=True),
    sa.Column("side_id", sa.String, nullable=False),
    sa.Column("call_id", sa.String, nullable=False),
    sa.Column("call_type", sa.String, nullable=False),
    sa.Column("headline", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

responses = sa.Table(
    "responses",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("caller_id", sa.String, nullable=False, index=True),
    sa.Column("side_id", sa.String, nullable=False),
    sa.Column("call_id", sa.String, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("delivered", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

questions = sa.Table(
    "questions",
    metadata,
    sa.Column("id", sa.String, primary_key=True),
    sa.Column("dialog_id", sa.String, nullable=False, index=True),
    sa.Column("root_id", sa.String, nullable=False),
    sa.Column("headline", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("call_id", sa.String, nullable=False),
    sa.Column("course", sa.Integer, nullable=False),
    sa.Column("asked_at", sa.Float, nullable=False),
    sa.Column("answered_at", sa.Float, nullable=True),
    sa.Column("answer", sa.Text, nullable=True),
    sa.Column("status", sa.String, nullable=False),  # open | answered | discarded
)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("root_id", sa.String, primary_key=True),
    sa.Column("key", sa.String, primary_key=True),
    sa.Column("dialog_id", sa.String, nullable=False),
)

reminders = sa.Table(
    "reminders",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dialog_id", sa.String, nullable=False, index=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

taskdoc_changes = sa.Table(
    "taskdoc_changes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_path", sa.String, nullable=False),
    sa.Column("section", sa.String, nullable=False),
    sa.Column("actor_member", sa.String, nullable=False),
    sa.Column("actor_dialog", sa.String, nullable=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("hash_before", sa.String, nullable=True),
    sa.Column("hash_after", sa.String, nullable=False),
    sa.Column("content_before", sa.Text, nullable=True),
    sa.Column("content_after", sa.Text, nullable=False),
    sa.Index("ix_taskdoc_changes_section", "task_path", "section", "id"),
)


waits = sa.Table(
    "waits",
    metadata,
    sa.Column("id", sa.String, primary_key=True),
    sa.Column("dialog_id", sa.String, nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("key", sa.String, nullable=False),
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("blocks", sa.Boolean, nullable=False),  # the dialog is not driven meanwhile
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("due_at", sa.Float, nullable=True),
    sa.Column("status", sa.String, nullable=False),  # open | resolved | cancelled | expired
    sa.Column("resolution", sa.JSON, nullable=True),
    sa.Column("resolved_at", sa.Float, nullable=True),
    # `_waits_and_approvals`: the workspace node it belongs to
    # (None: the dialog itself), how it combines with the node's other waits (all | any),
    # what the task looked like when it was opened (staleness), reminders sent so far.
    sa.Column("node", sa.String, nullable=True),
    sa.Column("mode", sa.String, nullable=False, server_default="all"),
    sa.Column("snapshot", sa.JSON, nullable=True),
    sa.Column("reminders", sa.Integer, nullable=False, server_default="0"),
    sa.Index("ix_waits_dialog_status", "dialog_id", "status"),
    sa.Index("ix_waits_status_due", "status", "due_at"),
    sa.Index("ix_waits_kind_key", "kind", "key"),
)

_V1_TABLES = [
    schema_version,
    dialogs,
    messages,
    generations,
    events,
    pending_tellasks,
    responses,
    questions,
    sessions,
    reminders,
    taskdoc_changes,
]


# The tables every mindloop database has had since v1: a database with a schema_version
# table but without these is someone else's.
BASE_TABLES = frozenset(table.name for table in _V1_TABLES)


def _v0_to_v1(conn: sa.Connection) -> None:
    """Initial schema. Lists its tables explicitly so later tables never leak into it."""
    metadata.create_all(conn, tables=_V1_TABLES)


def _add_columns(conn: sa.Connection, table: sa.Table, names: list[str]) -> None:
    """`ALTER TABLE … ADD COLUMN` for those of `names` the table lacks (a fresh database
    gets today's columns from v1's `create_all` already). Portable: the column's DDL is
    compiled by the connection's dialect."""
    have = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
    for name in names:
        if name not in have:
            ddl = sa.schema.CreateColumn(table.c[name]).compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {ddl}"))


def _v1_to_v2(conn: sa.Connection) -> None:
    """Claims: one driver per dialog across processes."""
    _add_columns(conn, dialogs, ["claim_owner", "claim_expires"])


def _v2_to_v3(conn: sa.Connection) -> None:
    """Waits as records (timers, approvals, external events, detached replies)."""
    metadata.create_all(conn, tables=[waits])


def _v3_to_v4(conn: sa.Connection) -> None:
    """The cost of each generation (usage and cost per dialog, tree and task)."""
    _add_columns(conn, generations, ["cost_usd"])


# ---------------------------------------------------------------- the work loop: tasks, Router
# (issue 12; DESIGN.md §8.7, §8.8). Records and statements: `store/tasks.py`,
# `store/router_log.py`.

# One loop root per task: the `*.tsk` package bound to the root dialog its loop drives,
# with the loop's own state of the task. `mindloop chat --task` roots are not listed here.
tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("id", sa.String, primary_key=True),
    sa.Column("task_path", sa.String, nullable=False, unique=True),
    sa.Column("root_id", sa.String, nullable=False, unique=True),
    sa.Column("topic", sa.Text, nullable=False),
    sa.Column("phase", sa.String, nullable=True),  # None until the loop first runs
    sa.Column("status", sa.String, nullable=False),  # ACTIVE | WAITING | DONE | FAILED
    sa.Column("status_reason", sa.Text, nullable=True),
    sa.Column("plan_reentries", sa.Integer, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),  # optimistic locking of loop writes
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    # the rest of the loop's state (`store.loop_state`): written with the fields above, in
    # one statement, at every phase entry and end
    sa.Column("loop_state", sa.JSON, nullable=True),
    sa.Index("ix_tasks_updated", "updated_at"),
)

# Every Router call: what it was given, what it decided (or why it could not), its usage.
router_decisions = sa.Table(
    "router_decisions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("candidates", sa.JSON, nullable=False),
    sa.Column("status", sa.String, nullable=False),  # accepted | failed
    sa.Column("decision", sa.JSON, nullable=True),
    sa.Column("attempts", sa.JSON, nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("task_path", sa.String, nullable=True),  # the task the message went to
    sa.Column("root_id", sa.String, nullable=True),  # … and its loop root
    sa.Column("created_task", sa.Boolean, nullable=False),
    sa.Column("member", sa.String, nullable=False),
    sa.Column("provider", sa.String, nullable=False),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=True),
    sa.Column("output_tokens", sa.Integer, nullable=True),
    sa.Column("cost_usd", sa.Float, nullable=True),
)


def _v4_to_v5(conn: sa.Connection) -> None:
    """The work loop's tasks (one loop root per task) and the Router's decisions."""
    metadata.create_all(conn, tables=[tasks, router_decisions])


# ---------------------------------------------------------------- self-improve (issue 12.7)
# The outbox of outward effects (KB requests first), the receiver-side dedupe registry,
# and the cursors that make a pass (SELF_IMPROVE) resumable. Statements and records:
# `store/outbox.py`, `store/cursors.py`.

outbox = sa.Table(
    "outbox",
    metadata,
    sa.Column("id", sa.String, primary_key=True),  # msg_id (time-ordered)
    sa.Column("kind", sa.String, nullable=False),  # kb_request
    sa.Column("call_key", sa.String, nullable=False, unique=True),  # the tool call's key
    sa.Column("idempotency_key", sa.String, nullable=False, index=True),
    sa.Column("source_dialog", sa.String, nullable=False),
    sa.Column("source_member", sa.String, nullable=False),
    sa.Column("task_path", sa.String, nullable=True),
    sa.Column("target", sa.String, nullable=False),  # the receiving member
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("status", sa.String, nullable=False),  # pending | sent | duplicate | acked | dead
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("next_attempt_at", sa.Float, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("sent_at", sa.Float, nullable=True),
    sa.Column("delivered_to", sa.String, nullable=True),  # the receiving dialog
    sa.Column("duplicate_of", sa.String, nullable=True),  # the msg_id first received
    sa.Column("acked_at", sa.Float, nullable=True),
    sa.Index("ix_outbox_status_next", "status", "next_attempt_at"),
)

received_keys = sa.Table(
    "received_keys",
    metadata,
    sa.Column("receiver", sa.String, primary_key=True),  # e.g. the KB member
    sa.Column("key", sa.String, primary_key=True),  # an idempotency key
    sa.Column("msg_id", sa.String, nullable=False),
    sa.Column("dialog_id", sa.String, nullable=False),
    sa.Column("received_at", sa.Float, nullable=False),
)

cursors = sa.Table(
    "cursors",
    metadata,
    sa.Column("scope", sa.String, primary_key=True),  # e.g. a task's loop root dialog
    sa.Column("name", sa.String, primary_key=True),  # e.g. self_improve
    sa.Column("value", sa.JSON, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)


def _self_improve_tables(conn: sa.Connection) -> None:
    """The outbox, the received-keys registry and cursors (self-improve, issue 12.7)."""
    metadata.create_all(conn, tables=[outbox, received_keys, cursors])


# ---------------------------------------------------------------------- scale-out workers
# (issue 15: `mindloop worker` processes sharing one PostgreSQL database; `store/workers.py`)

workers = sa.Table(
    "workers",
    metadata,
    sa.Column("executor_id", sa.String, primary_key=True),  # its DBOS executor id
    sa.Column("host", sa.String, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("rtws", sa.String, nullable=False),  # the rtws path as the worker sees it
    sa.Column("fingerprint", sa.String, nullable=False),  # of the rtws's configuration
    sa.Column("concurrency", sa.Integer, nullable=False),
    sa.Column("claim_owner", sa.String, nullable=False),  # its runtime's claims owner id
    sa.Column("ttl", sa.Float, nullable=False),  # dead when not heard from for this long
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
    sa.Column("stopped_at", sa.Float, nullable=True),  # stopped on its own
    sa.Column("recovered_by", sa.String, nullable=True),  # the worker that took its work
    sa.Column("recovered_at", sa.Float, nullable=True),
)


def _workers_table(conn: sa.Connection) -> None:
    """Scale-out workers: who runs, their heartbeats, who recovered a dead one's work."""
    metadata.create_all(conn, tables=[workers])


# ---------------------------------------------------------------------- task workspaces
# Nodes (to-do items), the doc index, rules and the workspace log of each task (issue 11): the
# store is authoritative, the files under `<task>.tsk/workspace/` are projections. A node
# is one JSON record (`workspace.models.Node`) with the columns queries need beside it;
# `version` is what every write expects (optimistic locking).

ws_meta = sa.Table(
    "ws_meta",
    metadata,
    sa.Column("task_path", sa.String, primary_key=True),
    sa.Column("lang", sa.String, nullable=False),
    sa.Column("focus", sa.String, nullable=False),
    sa.Column("offered", sa.JSON, nullable=False),  # docs the start scan found
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    # a new random token at every write of the workspace: a value read at this stamp is
    # current while the stamp is (a rolled-back write's token never comes back)
    sa.Column("stamp", sa.String, nullable=False, server_default=""),
)

ws_nodes = sa.Table(
    "ws_nodes",
    metadata,
    sa.Column("task_path", sa.String, primary_key=True),
    sa.Column("node_id", sa.String, primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),  # creation order within the task
    sa.Column("parent_id", sa.String, nullable=True),
    sa.Column("status", sa.String, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

ws_docs = sa.Table(
    "ws_docs",
    metadata,
    sa.Column("task_path", sa.String, primary_key=True),
    sa.Column("path", sa.String, primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("status", sa.String, nullable=False),  # active | expired
)

ws_rules = sa.Table(
    "ws_rules",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_path", sa.String, nullable=False, index=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("source", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

ws_log = sa.Table(
    "ws_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_path", sa.String, nullable=False),
    sa.Column("node_id", sa.String, nullable=True),  # None: the workspace's own log
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("actor", sa.String, nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Index("ix_ws_log_task_node", "task_path", "node_id", "id"),
)

WORKSPACE_TABLES = [ws_meta, ws_nodes, ws_docs, ws_rules, ws_log]


def _workspace_tables(conn: sa.Connection) -> None:
    """Task workspaces: nodes, doc index, rules, log (issue 11)."""
    metadata.create_all(conn, tables=WORKSPACE_TABLES)


# ---------------------------------------------------------------- loop memory and retries
# (issue 12, parts 5–6: `mindloop.store.summaries`, `mindloop.store.retries`)

# Write-back targets of agent-loop §7.3: a dialog's compactions (kind `dialog`) and a
# task's workspace summary (kind `workspace`), newest last.
summaries = sa.Table(
    "summaries",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_path", sa.String, nullable=False),
    sa.Column("dialog_id", sa.String, nullable=True),
    sa.Column("kind", sa.String, nullable=False),  # dialog | workspace
    sa.Column("course", sa.Integer, nullable=True),
    sa.Column("writer", sa.String, nullable=False),  # a phase, or `compaction`
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_summaries_dialog", "dialog_id", "kind", "id"),
    sa.Index("ix_summaries_task", "task_path", "kind", "id"),
)

# Every L2 self-repair attempt and L3 ADJUST cycle (agent-loop §8.3).
retry_records = sa.Table(
    "retry_records",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_path", sa.String, nullable=False),
    sa.Column("todo_id", sa.String, nullable=False),
    sa.Column("level", sa.String, nullable=False),  # L2 | L3
    sa.Column("entry", sa.Integer, nullable=False),  # L2: the node's DO entry
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("failure_class", sa.String, nullable=False),
    sa.Column("evidence_digest", sa.String, nullable=False),
    sa.Column("evidence_refs", sa.JSON, nullable=False),
    sa.Column("reflection", sa.Text, nullable=False),
    sa.Column("change_kind", sa.String, nullable=False),
    sa.Column("change_summary", sa.Text, nullable=False),
    sa.Column("fingerprint", sa.String, nullable=False),
    sa.Column("relaxes_acceptance", sa.Boolean, nullable=False),
    sa.Column("approval_id", sa.String, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_retry_records_node", "task_path", "todo_id", "level", "id"),
)


def _loop_memory_and_retries(conn: sa.Connection) -> None:
    """Compaction summaries and retry records (the work loop's memory and retries)."""
    metadata.create_all(conn, tables=[summaries, retry_records])


# ---------------------------------------------------------------------- waits and approvals
# (agent-loop §6: the six wait kinds, early events, staleness; `dialogs.waits`)

# Events that came before the wait they resolve (an async tool's result, a system event):
# kept until a wait of their kind and key is registered, which consumes the oldest one
# that matches (agent-loop §6.3 "Race"). `dialog_id` scopes one to a dialog (None: any).
wait_events = sa.Table(
    "wait_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("key", sa.String, nullable=False),
    sa.Column("dialog_id", sa.String, nullable=True),
    sa.Column("event", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("consumed_by", sa.String, nullable=True),  # the wait it resolved
    sa.Column("consumed_at", sa.Float, nullable=True),
    sa.Index("ix_wait_events_kind_key", "kind", "key", "consumed_by"),
)


def _waits_and_approvals(conn: sa.Connection) -> None:
    """Wait records carry their node, mode, staleness snapshot and reminder count; early
    events are kept until their wait is registered."""
    _add_columns(conn, waits, ["node", "mode", "snapshot", "reminders"])
    metadata.create_all(conn, tables=[wait_events])


# ---------------------------------------------------------------- workspace stamp
# (issue 12, loop overhead: a workspace is re-read only when its `ws_meta.stamp` moved)


def _workspace_stamp(conn: sa.Connection) -> None:
    """Workspaces carry a stamp, a new token at every write of one."""
    _add_columns(conn, ws_meta, ["stamp"])


# ---------------------------------------------------------------- loop state in its row
# (issue 12, loop overhead: a phase entry or end writes one row, not the row and a cursor)


def _loop_state_in_row(conn: sa.Connection) -> None:
    """The loop's state moves from its cursor (scope the loop root, name `loop`) into its
    task's row."""
    _add_columns(conn, tasks, ["loop_state"])
    _t, _c = tasks.c, cursors.c
    cursor = sa.and_(_c.scope == _t.root_id, _c.name == "loop")
    conn.execute(
        sa.update(tasks)
        .where(_t.loop_state.is_(None))
        .values(loop_state=sa.select(_c.value).where(cursor).scalar_subquery())
    )
    conn.execute(
        sa.delete(cursors).where(
            _c.name == "loop", _c.scope.in_(sa.select(_t.root_id).where(_t.loop_state.is_not(None)))
        )
    )


MIGRATIONS: list[Callable[[sa.Connection], None]] = [
    _v0_to_v1,
    _v1_to_v2,
    _v2_to_v3,
    _v3_to_v4,
    _v4_to_v5,
    _self_improve_tables,
    _workers_table,
    _workspace_tables,
    _loop_memory_and_retries,
    _waits_and_approvals,
    _workspace_stamp,
    _loop_state_in_row,
]
SCHEMA_VERSION = len(MIGRATIONS)
