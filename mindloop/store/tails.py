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
Records are handed out as copies (a caller may set fields) and kept as copies; the tail
keeps at most `KEPT` records, the oldest dropped first (a read further back goes to the
database).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field

from mindloop.store.records import MessageRecord

KEPT = 256

_id = operator.attrgetter("id")


def key(dialog_id: str, course: int) -> tuple[str, str, str, int]:
    """The memo key of a tail (its first item the table it comes from)."""
    return ("messages", "tail", dialog_id, course)


@dataclass
class Tail:
    since: int  # every message with a greater id is in `records`
    records: list[MessageRecord] = field(default_factory=list)

    @classmethod
    def read(cls, since: int, found: Iterable[MessageRecord]) -> Tail:
        """A tail from a complete read of the messages after `since`."""
        tail = cls(since)
        tail.extend(found)
        return tail

    def covers(self, after_id: int) -> bool:
        return after_id >= self.since

    def after(self, after_id: int) -> list[MessageRecord]:
        """Copies of the kept messages newer than `after_id` (`covers` it)."""
        records = self.records
        start = bisect.bisect_right(records, after_id, key=_id)  # kept in id order
        return [r.model_copy() for r in records[start:]]

    def extend(self, appended: Iterable[MessageRecord]) -> None:
        """Add messages just appended (ids above every kept one), as copies."""
        self.records += [r.model_copy() for r in appended]
        over = len(self.records) - KEPT
        if over > 0:
            self.since = self.records[over - 1].id
            del self.records[:over]
