"""Turns stored message records into the provider-neutral messages a model sees.

`History` is the in-memory, append-only view of one dialog course: the engine loads it
once when it starts driving a dialog and then appends what it persists, so the cost of a
step never depends on how long the dialog already is.
"""

from __future__ import annotations

from collections.abc import Iterable

from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mindloop.store.records import MessageRecord

# Record kinds the model sees as user text, and how each is framed.
USER_LIKE = frozenset({"user", "note", "tellask_result"})
# Record kinds that never go back to the model.
HIDDEN = frozenset({"thinking"})


class History:
    def __init__(self, records: Iterable[MessageRecord] = ()) -> None:
        self.messages: list[ChatMessage] = []
        self.last_id = 0  # id of the newest record added (records arrive in id order)
        self._last_gen: int | None = None
        for rec in records:
            self.add(rec)

    def add(self, rec: MessageRecord) -> None:
        if rec.id:
            if rec.id <= self.last_id:
                return  # already seen
            self.last_id = rec.id
        kind = rec.kind
        if kind in HIDDEN:
            return
        msgs = self.messages
        last = msgs[-1] if msgs else None
        if kind in USER_LIKE:
            text = rec.data.get("text", "")
            if isinstance(last, UserMessage):
                # Adjacent user-side texts form one turn (providers want alternation).
                msgs[-1] = UserMessage(text=last.text + "\n\n" + text)
            else:
                msgs.append(UserMessage(text=text))
            self._last_gen = None
        elif kind == "assistant":
            msgs.append(AssistantMessage(text=rec.data.get("text", "")))
            self._last_gen = rec.generation_id
        elif kind == "tool_call":
            call = ToolCall(
                id=rec.data["id"], name=rec.data["name"], arguments=rec.data.get("arguments", "{}")
            )
            same_turn = (
                isinstance(last, AssistantMessage)
                and rec.generation_id is not None
                and rec.generation_id == self._last_gen
            )
            if same_turn and isinstance(last, AssistantMessage):
                last.tool_calls.append(call)
            else:
                msgs.append(AssistantMessage(tool_calls=[call]))
                self._last_gen = rec.generation_id
        elif kind == "tool_result":
            msgs.append(
                ToolResultMessage(
                    call_id=rec.data["call_id"],
                    name=rec.data.get("name", ""),
                    content=rec.data.get("content", ""),
                    is_error=bool(rec.data.get("is_error", False)),
                )
            )
            self._last_gen = None

    def extend(self, recs: Iterable[MessageRecord]) -> None:
        for rec in recs:
            self.add(rec)

    def __len__(self) -> int:
        return len(self.messages)
