"""The newest messages of a dialog's course, kept by the store between reads.

A drive reads back what was just appended to the dialog it drives: the work loop posts
a phase's input and the drive takes it in (`messages_after` the history's last id);
closing the phase reads the entry's messages to count its steps and refusals. All of it
was written by this process a moment before, and parsing it again (the JSON of every
row, a phase input lists the whole tree) is most of such a read.

A `Tail` is the store's knowledge that *all* messages of (dialog, course) with an id
above `since` are `records`, in order. It is made by a read (`messages_after`, which is
complete by definition) and extended by this store's own appends; it lives in the
store's memo (`memo.py`) under `key`, so it is dropped whenever it might be wrong: any
other write to the messages table (its statement makes the memo forget the table), a
commit by another connection (`PRAGMA data_version`), a rollback. An append puts back
the tails of the dialogs it appended to, extended with exactly the rows it inserted.
The tail keeps each message as its row (the fields of a `MessageRecord`, a dict no one
else holds) and hands out records built from it, so every caller gets records of its own
(it may set fields): an append puts its rows as they are, where copying records would
cost a pydantic copy per message twice (in, and out again when the drive reads it back).
It keeps at most `KEPT` messages, the oldest dropped first (a read further back goes to
the database).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mindloop.store.records import MessageRecord

KEPT = 256

_id = operator.itemgetter("id")
# `MessageRecord.model_validate` without its Python frame
_validate = MessageRecord.__pydantic_validator__.validate_python


def key(dialog_id: str, course: int) -> tuple[str, str, str, int]:
    """The memo key of a tail (its first item the table it comes from)."""
    return ("messages", "tail", dialog_id, course)


@dataclass
class Tail:
    since: int  # every message with a greater id is in `rows`
    rows: list[dict[str, Any]] = field(default_factory=list)  # `MessageRecord` fields

    @classmethod
    def read(cls, since: int, found: Iterable[MessageRecord]) -> Tail:
        """A tail from a complete read of the messages after `since`."""
        tail = cls(since)
        tail.extend([r.model_dump() for r in found])
        return tail

    def covers(self, after_id: int) -> bool:
        return after_id >= self.since

    def after(self, after_id: int, limit: int | None = None) -> list[MessageRecord]:
        """Records of the kept messages newer than `after_id` (`covers` it), the first
        `limit` of them if given."""
        rows = self.rows
        start = bisect.bisect_right(rows, after_id, key=_id)  # kept in id order
        end = None if limit is None else start + limit
        return [_validate(row) for row in rows[start:end]]

    def extend(self, appended: list[dict[str, Any]]) -> None:
        """Add the rows of messages just appended (ids above every kept one), which the
        tail now holds: nobody may change them."""
        self.rows += appended
        over = len(self.rows) - KEPT
        if over > 0:
            self.since = self.rows[over - 1]["id"]
            del self.rows[:over]
