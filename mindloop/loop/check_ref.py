"""The workspace ref a CHECK entry's nodes passed at (the BENCH rule, agent-loop §5.5).

CHECK's input shows the workspace ref at its entry; when the entry closes, the nodes it
passed are recorded at the ref then (`phase_ops.close`, and the workspace summary's
`checked_ref`). A ref stats every deliverable file (or runs git), and it is the same value
again unless something changed the files in between. What the entry did itself would:
a call of a tool that acts outside the store (not `Tool.store_only`: a shell command, a
file write), or a tellask (a side dialog working for it). When the entry did neither, its
close takes the ref its entry computed — in this process, for this input — instead of
computing it again (`at_close`).

A change made from outside the entry meanwhile (the human, another process, a member's
side dialog) is then taken as made just after the close, which it could have been: the
next look at the ref (a BENCH node's condition 3, the next CHECK) sees it either way.

The same holds one phase earlier: a DO entry that moved its node to COMPLETE recorded
the ref then (the node's `checkpoint_ref`, computed by the transition's call), and when
neither that step's calls nor the entry's later ones could change the files, the CHECK
entry that follows in the same transition shows that ref instead of computing it again
(`after_do`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.tellask.grammar import TELLASK_PREFIX
from mindloop.store import MessageRecord, Store
from mindloop.store import loop_state as ls
from mindloop.store.per_store import PerStore
from mindloop.workspace.models import NodeStatus
from mindloop.workspace.state import WorkspaceState

# per store: task -> (the CHECK entry's input id, its course, the ref it showed), of the
# latest 64 tasks checked
_shown: PerStore[tuple[int, int, str]] = PerStore(64)


def hold(store: Store, task: str, entry_input: MessageRecord, ref: str) -> None:
    """The ref a CHECK entry's input `entry_input` shows, held for its close once the
    entry has committed (the caller's transaction; nothing if it rolls back)."""

    shown = (entry_input.id, entry_input.course, ref)
    store.after_commit(f"check_ref:{task}", lambda: _shown.put(store, task, shown))


def at_close(
    rt: DialogRuntime, state: ls.LoopState, course: int, messages: Sequence[MessageRecord]
) -> str | None:
    """The ref the CHECK entry `state` showed at its entry, if what it did cannot have
    changed the files: `messages`, the root's messages since the input in its course now
    (`course`, the input's own: the whole entry), call only store-only tools and make no
    tellask. None: compute it."""
    held = _shown.get(rt.store, state.task_path)
    if held is None or (held[0], held[1]) != (state.entry_message_id, course):
        return None
    for m in messages:
        if m.kind in ("tool_call", "tool_result"):
            tool = rt.tools.get(str(m.data.get("name", "")))
            if tool is None or not tool.store_only:
                return None
        elif m.kind == "tellask_result" or (
            m.kind == "assistant" and TELLASK_PREFIX in str(m.data.get("text", ""))
        ):
            return None
    return held[2]


_TRANSITION = "node_transition"


def after_do(
    rt: DialogRuntime, state: ls.LoopState, messages: Sequence[MessageRecord], ws: WorkspaceState
) -> str | None:
    """The ref the closing DO entry `state` moved its node to COMPLETE at (its
    `checkpoint_ref`), if nothing the entry did from that step on can have changed the
    files: `messages`, the entry's, from the assistant message that made the call on,
    call only store-only tools (the transition's call succeeded) and make no tellask.
    None: compute it."""
    node = ws.peek(state.node_id) if state.node_id is not None else None
    if node is None or node.status is not NodeStatus.COMPLETE or not node.checkpoint_ref:
        return None
    failed: dict[str, bool] = {}  # call id -> its result is an error (seen after it)
    found = False  # the step that made the transition: back to its assistant message
    for m in reversed(messages):
        kind = m.kind
        if kind == "tool_result":
            failed[str(m.data.get("call_id", ""))] = bool(m.data.get("is_error"))
        elif kind == "tool_call":
            name = str(m.data.get("name", ""))
            tool = rt.tools.get(name)
            if tool is None or not tool.store_only:
                return None
            if not found and name == _TRANSITION and failed.get(str(m.data.get("id"))) is False:
                found = _completes(m, node.id)
        elif kind == "tellask_result" or (
            kind == "assistant" and TELLASK_PREFIX in str(m.data.get("text", ""))
        ):
            return None
        elif kind == "assistant" and found:
            return node.checkpoint_ref
    return None


def _completes(call: MessageRecord, node_id: str) -> bool:
    """`call` (a `node_transition` call) moves `node_id` to COMPLETE."""
    try:
        args = json.loads(str(call.data.get("arguments", "")))
    except ValueError:
        return False
    return (
        isinstance(args, dict)
        and args.get("node_id") == node_id
        and args.get("to") == NodeStatus.COMPLETE.value
    )
