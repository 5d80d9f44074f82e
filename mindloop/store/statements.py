"""The store's SQL, built once at import.

SQLAlchemy caches a statement's compiled form under the statement's cache key, and a
statement object memoises that key; building a statement per call (`insert().values(...)`)
recomputes it every time, which cost more than the SQLite work itself. So every statement
the store runs is built here once, with bound parameters, and executed with a parameter
dict. Only `mindloop.store.store` imports this module.
"""

from __future__ import annotations

import sqlalchemy as sa

from mindloop.store import schema as t

_d, _m, _p, _r, _q = t.dialogs.c, t.messages.c, t.pending_tellasks.c, t.responses.c, t.questions.c


def _by(col: sa.ColumnElement[object], name: str) -> sa.ColumnElement[bool]:
    return col == sa.bindparam(name)


# ---------------------------------------------------------------------- writes

INSERT_DIALOG = sa.insert(t.dialogs)
INSERT_MESSAGE = sa.insert(t.messages)
INSERT_GENERATION = sa.insert(t.generations)
INSERT_EVENT = sa.insert(t.events)
INSERT_PENDING = sa.insert(t.pending_tellasks)
INSERT_RESPONSE = sa.insert(t.responses)
INSERT_QUESTION = sa.insert(t.questions)
INSERT_SESSION = sa.insert(t.sessions)
INSERT_REMINDER = sa.insert(t.reminders)
INSERT_TASKDOC_CHANGE = sa.insert(t.taskdoc_changes)
# The SET clause comes from the parameter keys (other than the `_id` of the WHERE).
UPDATE_DIALOG = sa.update(t.dialogs).where(_by(_d.id, "_id"))
DELETE_PENDING = sa.delete(t.pending_tellasks).where(_by(_p.id, "_id"))
MARK_DELIVERED = (
    sa.update(t.responses)
    .where(_r.id.in_(sa.bindparam("ids", expanding=True)))
    .values(delivered=True)
)
CLOSE_QUESTION = (
    sa.update(t.questions)
    .where(_by(_q.id, "_id"), _q.status == "open")
    .values(
        status=sa.bindparam("_status"),
        answer=sa.bindparam("_answer"),
        answered_at=sa.bindparam("ts"),
    )
)
DISCARD_QUESTIONS = (
    sa.update(t.questions)
    .where(_by(_q.dialog_id, "_dialog"), _q.status == "open")
    .values(status="discarded", answered_at=sa.bindparam("ts"))
)
DELETE_REMINDERS = sa.delete(t.reminders).where(_by(t.reminders.c.dialog_id, "dialog_id"))

# Claims: one driver per dialog across processes. A claim may be taken when the dialog has
# none, when the taker already holds it, or when it expired (its owner died); taking it
# marks the dialog running in the same conditional update. Plain SQL that PostgreSQL runs
# alike (there the update locks the row; SQLite holds the write lock since BEGIN IMMEDIATE).
_claimable = sa.or_(
    _d.claim_owner.is_(None),
    _d.claim_owner == sa.bindparam("_owner"),
    _d.claim_expires < sa.bindparam("_now"),
)
CLAIM_DIALOG = (
    sa.update(t.dialogs)
    .where(_by(_d.id, "_id"), _claimable)
    .values(
        status="running",
        needs_drive=False,
        claim_owner=sa.bindparam("_owner"),
        claim_expires=sa.bindparam("_expires"),
        updated_at=sa.bindparam("_now"),
    )
    # The record as it now stands: the drive that took the claim needs it, and reading
    # it here saves a statement at every drive's start.
    .returning(*t.dialogs.c)
)
# A claim taken ahead of the drive by the process that posted the message and drives it
# next (`chat`): others leave the dialog alone; its status and mark to drive stay.
RESERVE_DIALOG = (
    sa.update(t.dialogs)
    .where(_by(_d.id, "_id"), _claimable)
    .values(claim_owner=sa.bindparam("_owner"), claim_expires=sa.bindparam("_expires"))
)
RENEW_CLAIM = (
    sa.update(t.dialogs)
    .where(_by(_d.id, "_id"), _by(_d.claim_owner, "_owner"))
    .values(claim_expires=sa.bindparam("_expires"))
)
RELEASE_CLAIM = (
    sa.update(t.dialogs)
    .where(_by(_d.id, "_id"), _by(_d.claim_owner, "_owner"))
    .values(claim_owner=None, claim_expires=None)
)
# A drive ends: the dialog's final status (and whatever else the caller sets) and the
# release of the claim (only if `_owner` still holds it) in one statement.
_held = _d.claim_owner == sa.bindparam("_owner")
SETTLE_DIALOG = (
    sa.update(t.dialogs)
    .where(_by(_d.id, "_id"))
    .values(
        claim_owner=sa.case((_held, None), else_=_d.claim_owner),
        claim_expires=sa.case((_held, None), else_=_d.claim_expires),
    )
)
# A claim whose owner is known to be dead (a process of this host that is gone) expires
# at once, so recovery need not wait out its time.
EXPIRE_CLAIM = (
    sa.update(t.dialogs)
    .where(_by(_d.id, "_id"), _by(_d.claim_owner, "_owner"))
    .values(claim_expires=0.0)
)
# Every claim held: of the dialogs running, and those reserved ahead of their drive.
HELD_CLAIMS = sa.select(_d.id, _d.claim_owner).where(_d.claim_owner.is_not(None))

# Deleting a dialog tree (`Store.delete_tree`): every row that names one of its dialogs.
# The tree's dialogs held by a live claim (some process drives them) stop the deletion.
_ids: sa.BindParameter[list[str]] = sa.bindparam("ids", expanding=True)
TREE_IDS = sa.select(_d.id).where(_by(_d.root_id, "root_id"))
TREE_DRIVEN = sa.select(_d.id).where(
    _by(_d.root_id, "root_id"),
    _d.status == "running",
    _d.claim_owner.is_not(None),
    _d.claim_expires >= sa.bindparam("_now"),
)
DELETE_TREE_ROWS = (
    sa.delete(t.messages).where(_m.dialog_id.in_(_ids)),
    sa.delete(t.generations).where(t.generations.c.dialog_id.in_(_ids)),
    sa.delete(t.events).where(t.events.c.dialog_id.in_(_ids)),
    sa.delete(t.pending_tellasks).where(sa.or_(_p.caller_id.in_(_ids), _p.side_id.in_(_ids))),
    sa.delete(t.responses).where(sa.or_(_r.caller_id.in_(_ids), _r.side_id.in_(_ids))),
    sa.delete(t.questions).where(sa.or_(_q.dialog_id.in_(_ids), _q.root_id.in_(_ids))),
    sa.delete(t.sessions).where(
        sa.or_(t.sessions.c.root_id.in_(_ids), t.sessions.c.dialog_id.in_(_ids))
    ),
    sa.delete(t.reminders).where(t.reminders.c.dialog_id.in_(_ids)),
    sa.delete(t.waits).where(t.waits.c.dialog_id.in_(_ids)),
    sa.delete(t.wait_events).where(t.wait_events.c.dialog_id.in_(_ids)),
    sa.delete(t.tasks).where(t.tasks.c.root_id.in_(_ids)),  # a loop root's binding
    sa.delete(t.dialogs).where(_d.id.in_(_ids)),
)

# ---------------------------------------------------------------------- reads

SCHEMA_VERSION = sa.select(t.schema_version.c.version)
DIALOG = sa.select(t.dialogs).where(_by(_d.id, "id"))
# `Store.list_dialogs`, by which of (root, task) it names (a scheduler that follows one
# tree lists it at every look for dialogs to drive).
_LISTED = sa.select(t.dialogs).order_by(_d.created_at, _d.id)
LIST_DIALOGS = {
    (False, False): _LISTED,
    (True, False): _LISTED.where(_by(_d.root_id, "root_id")),
    (False, True): _LISTED.where(_by(_d.task_path, "task_path")),
    (True, True): _LISTED.where(_by(_d.root_id, "root_id"), _by(_d.task_path, "task_path")),
}
HISTORY = sa.select(t.messages).where(_by(_m.dialog_id, "dialog_id")).order_by(_m.id)
HISTORY_OF_COURSE = (
    sa.select(t.messages)
    .where(_by(_m.dialog_id, "dialog_id"), _by(_m.course, "course"))
    .order_by(_m.id)
)
# Just what a model's context is built from (`History.from_rows`): a drive's start
# reads a whole course, so the columns it does not need are not read at all.
HISTORY_VIEW = (
    sa.select(_m.id, _m.kind, _m.data, _m.generation_id)
    .where(_by(_m.dialog_id, "dialog_id"), _by(_m.course, "course"))
    .order_by(_m.id)
)
MESSAGES_AFTER = (
    sa.select(t.messages)
    .where(
        _by(_m.dialog_id, "dialog_id"),
        _by(_m.course, "course"),
        _m.id > sa.bindparam("after_id"),
    )
    .order_by(_m.id)
)
COUNT_MESSAGES = sa.select(sa.func.count()).where(_by(_m.dialog_id, "dialog_id"))
MAX_GENERATION_ID = sa.select(sa.func.max(t.generations.c.id))
GENERATIONS = (
    sa.select(t.generations)
    .where(_by(t.generations.c.dialog_id, "dialog_id"))
    .order_by(t.generations.c.id)
)
# Usage: tokens and cost summed over generations (of a dialog, a tree, a task); a
# generation without a known price counts as unpriced, not as free.
_g = t.generations.c
_USAGE = (
    sa.func.count().label("generations"),
    sa.func.coalesce(sa.func.sum(_g.input_tokens), 0).label("input_tokens"),
    sa.func.coalesce(sa.func.sum(_g.output_tokens), 0).label("output_tokens"),
    sa.func.coalesce(sa.func.sum(_g.cost_usd), 0.0).label("cost_usd"),
    (sa.func.count() - sa.func.count(_g.cost_usd)).label("unpriced"),
)
_GENERATION_DIALOGS = t.generations.join(t.dialogs, _g.dialog_id == _d.id)
USAGE_OF_DIALOG = sa.select(*_USAGE).where(_by(_g.dialog_id, "id"))
USAGE_OF_TREE = sa.select(*_USAGE).select_from(_GENERATION_DIALOGS).where(_by(_d.root_id, "id"))
USAGE_OF_TASK = sa.select(*_USAGE).select_from(_GENERATION_DIALOGS).where(_by(_d.task_path, "task"))
USAGE_BY_DIALOG = sa.select(_g.dialog_id, *_USAGE).group_by(_g.dialog_id)
PENDING_FOR = sa.select(t.pending_tellasks).where(_by(_p.caller_id, "id")).order_by(_p.id)
PENDING_BY_SIDE = sa.select(t.pending_tellasks).where(_by(_p.side_id, "id")).order_by(_p.id)
ALL_PENDING = sa.select(t.pending_tellasks).order_by(_p.id)
UNDELIVERED = (
    sa.select(t.responses).where(_by(_r.caller_id, "id"), _r.delivered.is_(False)).order_by(_r.id)
)
ALL_RESPONSES = sa.select(t.responses).order_by(_r.id)
QUESTION = sa.select(t.questions).where(_by(_q.id, "id"))
OPEN_QUESTIONS_OF = (
    sa.select(t.questions)
    .where(_q.status == "open", _by(_q.dialog_id, "dialog_id"))
    .order_by(_q.asked_at)
)
SESSION = sa.select(t.sessions.c.dialog_id).where(
    _by(t.sessions.c.root_id, "root_id"), _by(t.sessions.c.key, "key")
)
SESSIONS = sa.select(t.sessions).where(_by(t.sessions.c.root_id, "root_id"))
REMINDERS = (
    sa.select(t.reminders)
    .where(_by(t.reminders.c.dialog_id, "dialog_id"))
    .order_by(t.reminders.c.position, t.reminders.c.id)
)


def _exists(table: sa.Table, *where: sa.ColumnElement[bool]) -> sa.Exists:
    return sa.exists().where(*where).select_from(table)


# The drive rule, written once: a dialog is blocked while it has an open question, an
# open blocking wait record, or a tellask pending — unless one of its own side dialogs
# asks it back (answered in-line). `WAIT_STATE` counts the same sources for one dialog
# (`tree.WaitState`), `DRIVABLE` selects the unblocked, `PARK_WAITING` parks the blocked.
_w = t.waits.c
_open_question = _exists(t.questions, _q.dialog_id == _d.id, _q.status == "open")
_open_wait = _exists(t.waits, _w.dialog_id == _d.id, _w.status == "open", _w.blocks.is_(True))
_pending = _exists(t.pending_tellasks, _p.caller_id == _d.id)
_asked_back = _exists(t.pending_tellasks, _p.side_id == _d.id, _p.call_type == "tellask_back")
_blocked = sa.or_(_open_question, _open_wait, sa.and_(_pending, ~_asked_back))

# (pending tellasks it made, tellask-backs its side dialogs ask it, open questions it
# asked, open blocking waits), in one round trip.
WAIT_STATE = sa.select(
    sa.select(sa.func.count()).where(_p.caller_id == sa.bindparam("id")).scalar_subquery(),
    sa.select(sa.func.count())
    .where(_p.side_id == sa.bindparam("id"), _p.call_type == "tellask_back")
    .scalar_subquery(),
    sa.select(sa.func.count())
    .where(_q.dialog_id == sa.bindparam("id"), _q.status == "open")
    .scalar_subquery(),
    sa.select(sa.func.count())
    .where(_w.dialog_id == sa.bindparam("id"), _w.status == "open", _w.blocks.is_(True))
    .scalar_subquery(),
)
# A dialog another live process holds (an unexpired claim of another owner) is neither
# drivable here nor parked from here.
DRIVABLE = (
    sa.select(_d.id)
    .where(_d.needs_drive.is_(True), _claimable, ~_blocked)
    .order_by(_d.updated_at, _d.id)
)
# Marked to drive but waiting on others: they are parked until what they wait on resolves
# (a claim reserved for their drive is dropped: whoever resolves the wait may drive them;
# the claim of a drive under way stays with it).
_reserved = _d.status != "running"
PARK_WAITING = (
    sa.update(t.dialogs)
    .where(_d.needs_drive.is_(True), _claimable, _blocked)
    .values(
        needs_drive=False,
        status="waiting",
        claim_owner=sa.case((_reserved, None), else_=_d.claim_owner),
        claim_expires=sa.case((_reserved, None), else_=_d.claim_expires),
        updated_at=sa.bindparam("_now"),
    )
)

# Wait records.
INSERT_WAIT = sa.insert(t.waits)
WAIT = sa.select(t.waits).where(_by(_w.id, "id"))
RESOLVE_WAIT = (
    sa.update(t.waits)
    .where(_by(_w.id, "_id"), _w.status == "open")
    .values(
        status=sa.bindparam("_status"),
        resolution=sa.bindparam("_resolution"),
        resolved_at=sa.bindparam("_now"),
    )
)
OPEN_WAITS_OF = (
    sa.select(t.waits)
    .where(_by(_w.dialog_id, "dialog_id"), _w.status == "open")
    .order_by(_w.created_at, _w.id)
)
DUE_WAITS = (
    sa.select(t.waits)
    .where(_w.status == "open", _w.due_at <= sa.bindparam("now"))
    .order_by(_w.due_at, _w.id)
)
NEXT_DUE = sa.select(sa.func.min(_w.due_at)).where(_w.status == "open", _w.due_at.is_not(None))

# Recovery: dialogs left running by a process that is gone (no claim, or an expired one),
# never one a live process holds.
# Whether a dialog tree has work going on or due: a dialog running (here or in another
# process) or marked to drive.
TREE_BUSY = sa.select(
    sa.exists().where(
        _by(_d.root_id, "root_id"), sa.or_(_d.status == "running", _d.needs_drive.is_(True))
    )
)
EXPIRED_RUNNING = (
    sa.select(_d.id)
    .where(
        _d.status == "running",
        sa.or_(_d.claim_expires.is_(None), _d.claim_expires < sa.bindparam("_now")),
    )
    .order_by(_d.updated_at, _d.id)
)


# Identities of the store's prebuilt statements (module constants, so their ids are
# stable): the SQLite dialect runs these on the DBAPI connection. Each module of the
# store that defines statements registers its own with `prebuilt(globals())`.
PREBUILT: set[int] = set()


def prebuilt(namespace: dict[str, object]) -> None:
    """Register a module's constant statements (call at its end with `globals()`)."""
    for v in list(namespace.values()):
        for stmt in v.values() if isinstance(v, dict) else (v,):
            if isinstance(stmt, sa.Executable):
                PREBUILT.add(id(stmt))


prebuilt(globals())
