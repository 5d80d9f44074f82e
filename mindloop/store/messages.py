"""One stored message by its id: what a reader that kept only an id (the loop's entry
message, `loop_state.entry_message_id`) reads back, whatever course the dialog is in now.
"""

from __future__ import annotations

import sqlalchemy as sa

from mindloop.store import schema as t
from mindloop.store.records import MessageRecord
from mindloop.store.statements import prebuilt
from mindloop.store.store import Store

_m = t.messages.c
_BY_ID = sa.select(t.messages).where(
    _m.dialog_id == sa.bindparam("dialog_id"), _m.id == sa.bindparam("id")
)


def message_by_id(store: Store, dialog_id: str, message_id: int) -> MessageRecord | None:
    """The message `message_id` of `dialog_id`, or None."""
    found = store._records(MessageRecord, _BY_ID, {"dialog_id": dialog_id, "id": message_id})
    return found[0] if found else None


prebuilt(globals())  # the SQLite dialect runs these on the DBAPI connection
