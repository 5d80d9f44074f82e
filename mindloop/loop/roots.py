"""Which task's loop a dialog belongs to: dialog -> its root -> the task whose loop root
it is (None for a free root), remembered for the life of a process.

Both facts are fixed once known: a dialog's root never changes, and a loop root is made
with its task's row in one transaction, so a root found free stays free. A local `run`
(`api.OtherDialogs`) and a scale-out worker (`fleet.FleetEngine`) ask this of every
drivable dialog at every poll; one read of the store per dialog and per root, ever.
"""

from __future__ import annotations

from mindloop.store import Store
from mindloop.store import loop_state as ls

KEEP = 10_000  # entries remembered of each kind (a long life forgets, then reads again)


class LoopRoots:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._root_of: dict[str, str] = {}
        self._task_of: dict[str, str | None] = {}

    def root(self, dialog_id: str) -> str:
        root = self._root_of.get(dialog_id)
        if root is None:
            if len(self._root_of) >= KEEP:
                self._root_of.clear()
            root = self._root_of[dialog_id] = self.store.get_dialog(dialog_id).root_id
        return root

    def task(self, dialog_id: str) -> str | None:
        """The task whose loop root `dialog_id` is, else None."""
        if dialog_id in self._task_of:
            return self._task_of[dialog_id]
        if len(self._task_of) >= KEEP:
            self._task_of.clear()
        task = None
        if self.root(dialog_id) == dialog_id:
            state = ls.by_root(self.store, dialog_id)
            task = state.task_path if state is not None else None
        self._task_of[dialog_id] = task
        return task

    def task_of_tree(self, dialog_id: str) -> str | None:
        """The task whose loop drives `dialog_id`'s tree, else None."""
        return self.task(self.root(dialog_id))
