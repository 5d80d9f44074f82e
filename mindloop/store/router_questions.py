"""The Router's open questions (agent-loop §3: "if ambiguous, ask through Q4H which task
should continue"): a Router run whose decision asks the human is stored with status
`asking`; the human's answer settles it — status `accepted`, with the task the message
went to and its loop root — in the transaction that posts the message there. So an open
question is a row of `router_decisions` with that status: no table of its own, and the
whole trace (message, candidates, attempts, usage, the answer's task) stays one record."""

from __future__ import annotations

import sqlalchemy as sa

from mindloop.store import schema as t
from mindloop.store.router_log import RouterRecord
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store

ASKING = "asking"
_c = t.router_decisions.c
OPEN_ROUTER_QUESTIONS = sa.select(t.router_decisions).where(_c.status == ASKING).order_by(_c.id)
ROUTER_RECORD = sa.select(t.router_decisions).where(_c.id == sa.bindparam("id"))
SETTLE_ROUTER_QUESTION = (
    sa.update(t.router_decisions)
    .where(_c.id == sa.bindparam("_id"), _c.status == ASKING)
    .values(
        status="accepted",
        task_path=sa.bindparam("task_path"),
        root_id=sa.bindparam("root_id"),
        created_task=sa.bindparam("created_task"),
    )
)


def open_router_questions(store: Store) -> list[RouterRecord]:
    """Router runs that wait for the human's choice of a task, oldest first."""
    return store._records(RouterRecord, OPEN_ROUTER_QUESTIONS)


def router_record(store: Store, record_id: int) -> RouterRecord | None:
    found = store._records(RouterRecord, ROUTER_RECORD, {"id": record_id})
    return found[0] if found else None


def settle_router_question(
    store: Store, record_id: int, *, task_path: str, root_id: str, created_task: bool
) -> bool:
    """Close an open Router question with the task its message went to (inside the
    caller's transaction); False when it was not open (answered meanwhile)."""
    params = {
        "_id": record_id,
        "task_path": task_path,
        "root_id": root_id,
        "created_task": created_task,
    }
    return store._write(SETTLE_ROUTER_QUESTION, params) == 1


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
