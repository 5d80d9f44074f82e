"""The reply sink of dispatched workspace nodes (`toolsets.workspace.NODE_SINK`).

`node_dispatch` opens a detached side dialog bound to the node; its final reply reaches
this sink inside the reply's transaction: the node moves (WAIT → COMPLETE, or
CHECK_FAILED with what the member found missing as blockers) in that transaction, and a
note saying so joins the dispatching dialog's inbox, next to the engine's note with the
reply itself. Nothing here may lose a reply: a node that cannot take it (cancelled,
re-dispatched) is logged and said so in the note.
"""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.tree import DetachedReply, Sink
from mindloop.dialogs.waits import NOTE
from mindloop.store import ResponseRecord, Store
from mindloop.workspace.api import member_reply
from mindloop.workspace.errors import WorkspaceError


def node_sink(rtws: Path) -> Sink:
    def sink(store: Store, reply: DetachedReply) -> None:
        p = reply.payload
        try:
            note = member_reply(
                store,
                rtws,
                p["task"],
                node_id=p["node_id"],
                dispatch_id=p["dispatch_id"],
                ok=reply.status == "completed",
                text=reply.text,
                side_id=reply.side_id,
                member=reply.member,
            )
        except WorkspaceError as exc:  # refused before anything was written
            note = (
                f"[workspace] The reply of @{reply.member} for node {p.get('node_id')} was "
                f"not applied: {exc}"
            )
        store.add_response(
            ResponseRecord(
                caller_id=reply.caller_id,
                side_id=reply.caller_id,
                call_id=f"{reply.side_id}:node",
                data={"kind": NOTE, "text": note},
            )
        )

    return sink
