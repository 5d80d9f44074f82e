"""How a dialog's last drive ended, from the event log (`drive_end` rows, written when a
drive settles): what `mindloop status TASK` says about a loop root that stopped short —
on an error, with that error — instead of only the loop's own status. One indexed read
of one row; nothing on the engine's path."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from mindloop.events.types import EventType
from mindloop.store import schema as t
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store

_e = t.events.c
LAST_DRIVE_END = (
    sa.select(_e.data)
    .where(_e.dialog_id == sa.bindparam("dialog_id"), _e.type == EventType.DRIVE_END.value)
    .order_by(_e.id.desc())
    .limit(1)
)


def last_drive_end(store: Store, dialog_id: str) -> dict[str, Any] | None:
    """The `drive_end` record of the dialog's last drive (`reason`, `steps`, `error`), or
    None when it was never driven."""
    rows = store._rows(LAST_DRIVE_END, {"dialog_id": dialog_id})
    if not rows:
        return None
    data = rows[0][0]
    found = json.loads(data) if isinstance(data, str) else data
    return found if isinstance(found, dict) else None


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
