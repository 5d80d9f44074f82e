"""A SELF_IMPROVE pass: the entries that review the loop root's history at the end of a
task, one batch each (agent-loop §9.3).

When every node is terminal the task does not end after one SELF_IMPROVE entry: it
enters SELF_IMPROVE again, each entry shown the next batch of at most
`loop.self_improve.batch_messages` messages from the cursor (`loop.self_improve`), until
no batch is left; then it ends. The pass reads the history as it stood when the pass
began: its first entry's input marks the end (`LoopState.pass_until`), so the pass's
own entries — which would always leave a batch behind them — are not reviewed by it
(the next pass, after more work, reads them with the rest). The pass is one self.md run
(`loop.self_md.max_calls_per_run` changes in all, `LoopState.pass_entry`).

A pass stops early, and the task ends, when:
- an entry's batch was not processed — the cursor was not moved past it when the entry
  closed (the runtime stopped the entry after `loop.self_improve.max_consecutive_errors`
  failing calls in a row): the next pass reads it again;
- the drive cap is reached (`loop.retries.drive_steps`, `caps.drive.max_cost`): the work
  is done, so the loop does not ask the human to go on for a review; the next pass goes
  on from the cursor.
"""

from __future__ import annotations

from mindloop.loop import self_improve as si
from mindloop.loop.phases import Phase
from mindloop.store import MessageRecord, Store
from mindloop.store import loop_state as ls


def pass_end(state: ls.LoopState) -> si.SelfImproveCursor | None:
    """Where the pass a SELF_IMPROVE entry enters ends: the pass's end when it continues
    (the entry closed last was SELF_IMPROVE), None when it starts one (it reads up to
    its own input, not written yet)."""
    if state.phase is Phase.SELF_IMPROVE and state.pass_until is not None:
        return si.SelfImproveCursor(**state.pass_until)
    return None


def pass_until(state: ls.LoopState, entry_input: MessageRecord) -> dict[str, int]:
    """`LoopState.pass_until` once a SELF_IMPROVE entry posted `entry_input`."""
    end = pass_end(state)
    if end is None:  # a new pass: it ends at its first entry's input
        end = si.SelfImproveCursor(course=entry_input.course, message_id=entry_input.id)
    return {"course": end.course, "message_id": end.message_id}


def pass_entry(state: ls.LoopState, entry: int) -> int:
    """`LoopState.pass_entry` for SELF_IMPROVE entry `entry`: the pass's first entry,
    which numbers the pass as one self.md run (`loop.self_md.max_calls_per_run` counts
    the changes of the whole pass, however many batches it reads)."""
    return state.pass_entry if pass_end(state) is not None and state.pass_entry else entry


def goes_on(store: Store, state: ls.LoopState) -> bool:
    """After a SELF_IMPROVE entry closed: it processed its batch (the cursor moved past
    it) and the history before the pass's end holds another batch."""
    if state.phase is not Phase.SELF_IMPROVE or state.batch_end is None:
        return False
    if state.pass_until is None:
        return False
    cursor = si.load_cursor(store, state.root_id)
    done = si.SelfImproveCursor(**state.batch_end)
    if (cursor.course, cursor.message_id) != (done.course, done.message_id):
        return False  # the batch was not processed: the pass stops here
    more, _ = si.next_batch(store, state.root_id, cursor, 1, until=pass_end(state))
    return bool(more)
