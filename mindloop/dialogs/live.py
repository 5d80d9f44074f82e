"""What the engine keeps in memory for the dialogs it drives, and when it lets go.

A `LiveDialog` is a dialog's in-memory view while it is driven: its record, member, the
history as the model sees it (loaded once, then appended to), its reminders and its turn
policy. When a drive settles, its view moves to a small LRU of idle views (`IDLE_KEPT`):
a dialog driven again soon — a caller revived by its side dialogs' replies, a task's loop
root at each phase, a chat's next message — catches up with what was appended since
(one query for the new rows) instead of reloading its whole history, whose cost grows with
the dialog. The LRU is bounded, so a `run --watch` process that drove 10,000 dialogs holds
no more than one that drove 100. A reused view gets its turn policy afresh (a loop root's
phase changes between drives) and rebuilds its tool context.

A view is governed by its turn policy (`LiveCache.govern`: at each drive's start and
each segue): the policy, and the workspace node it says the dialog works on (`node`,
the work loop's DO node; None otherwise). A wait a call opens for that node is the
node's, not the dialog's (`Waits.open`); the view notes it (`node_waited`) so the policy
can end the drive on it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from mindloop.config import Config, MemberConfig
from mindloop.dialogs.history import History
from mindloop.dialogs.policy import TurnPolicy
from mindloop.dialogs.repeats import RepeatGuard
from mindloop.store import DialogRecord, Reminder, Store
from mindloop.tools.base import ToolContext
from mindloop.toolsets import CourseSwitch

ROOTS_KEPT = 1024  # root members remembered (a fixed, small amount of memory)
IDLE_KEPT = 64  # settled views kept for a next drive (least recently settled dropped)


@dataclass
class LiveDialog:
    record: DialogRecord
    member: MemberConfig
    policy: TurnPolicy
    root_member: str  # the member of the dialog's root: the Taskdoc's maintainer
    # Loaded by a drive under its claim (`Driver._sync`), then appended to.
    history: History = field(default_factory=History)
    loaded: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    course: CourseSwitch = field(default_factory=CourseSwitch)  # clear_mind's request
    reminders: list[Reminder] = field(default_factory=list)  # loaded at each drive start
    # The workspace node the dialog works on now (its policy's `work_node`, set by
    # `LiveCache.govern`): waits its calls open belong to that node and do not park the
    # dialog (`Waits.open`); the id of one opened since (the loop ends the DO entry on it).
    node: str | None = None
    node_waited: str | None = None
    users: int = 0  # drives holding (or waiting for) this view
    repeats: RepeatGuard = field(default_factory=RepeatGuard)  # identical failing calls
    # What its tool calls see, built at the first call (each call gets a copy with its
    # own call key): nothing in it changes while the view lives.
    tool_context: ToolContext | None = None

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def is_root(self) -> bool:
        return self.record.kind == "root"

    @property
    def is_fbr(self) -> bool:
        return self.record.kind == "fbr"

    def reload_history(self, store: Store) -> None:
        self.history = History.from_rows(store.history_view(self.record.id, self.record.course))
        self.loaded = True


class LiveCache:
    """Live views by dialog id; a view lives from a drive's start to its settling."""

    def __init__(
        self, store: Store, config: Config, policy_for: Callable[[DialogRecord], TurnPolicy]
    ) -> None:
        self._store = store
        self._config = config
        self._policy_for = policy_for
        self._live: dict[str, LiveDialog] = {}
        self._idle: OrderedDict[str, LiveDialog] = OrderedDict()  # settled, kept for reuse
        # Root dialog -> its member (immutable), for side dialogs' loads: a fan-out of N
        # side dialogs reads the root once, not N times. Bounded: a long watch forgets.
        self._roots: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._live)

    def get(self, dialog_id: str) -> LiveDialog | None:
        return self._live.get(dialog_id)

    def load(self, dialog_id: str) -> LiveDialog:
        """The live view of a dialog, loaded from the store if not held."""
        live = self._live.get(dialog_id)
        if live is not None:
            return live
        live = self._idle.pop(dialog_id, None)
        if live is not None:  # the drive's claim brings its record and history up to date
            self.govern(live)
            self._live[dialog_id] = live
            return live
        rec = self._store.get_dialog(dialog_id)
        root_member = rec.member if rec.kind == "root" else self._root_member(rec.root_id)
        policy = self._policy_for(rec)
        live = self._live[dialog_id] = LiveDialog(
            record=rec,
            member=self._config.member(rec.member),
            policy=policy,
            root_member=root_member,
        )
        live.node = policy.work_node(live)
        return live

    def govern(self, live: LiveDialog) -> None:
        """Give the view its turn policy as it is now (a loop root's phase changes between
        drives and segments), the node the policy works on, and a fresh tool context."""
        live.policy = self._policy_for(live.record)
        live.node = live.policy.work_node(live)
        live.node_waited = None
        live.tool_context = None

    def _root_member(self, root_id: str) -> str:
        member = self._roots.get(root_id)
        if member is None:
            member = self._roots[root_id] = self._store.get_dialog(root_id).member
            if len(self._roots) > ROOTS_KEPT:
                self._roots.popitem(last=False)
        return member

    def acquire(self, dialog_id: str) -> LiveDialog:
        """The view for a drive (loaded if not held); pair with `release`."""
        live = self.load(dialog_id)
        live.users += 1
        return live

    def release(self, live: LiveDialog) -> None:
        """A drive is done with the view: the last one out moves it to the idle views."""
        live.users -= 1
        if live.users <= 0 and self._live.get(live.id) is live:
            del self._live[live.id]
            self._idle[live.id] = live
            if len(self._idle) > IDLE_KEPT:
                self._idle.popitem(last=False)

    def evict(self, dialog_id: str) -> None:
        """Let go of a view no drive holds (others changed the dialog)."""
        self._idle.pop(dialog_id, None)
        live = self._live.get(dialog_id)
        if live is not None and live.users <= 0:
            del self._live[dialog_id]
