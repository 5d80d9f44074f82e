"""Turns stored message records into the provider-neutral messages a model sees.

`History` is the in-memory, append-only view of one dialog course: the engine loads it
once when it starts driving a dialog and then appends what it persists, so the cost of a
step never depends on how long the dialog already is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mindloop.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mindloop.store.bulk import gc_paused
from mindloop.store.records import MessageRecord

# Record kinds the model sees as user text, and how each is framed.
USER_LIKE = frozenset({"user", "note", "tellask_result"})
# Record kinds that never go back to the model.
HIDDEN = frozenset({"thinking"})
# The two messages a long history is mostly made of, built by their model's validator: it
# skips `BaseModel.__init__`'s Python frame, a quarter of building a history at a drive's
# start (2,000 messages: 1.65 ms → 1.28 ms).
_user_message = UserMessage.__pydantic_validator__.validate_python
_assistant_message = AssistantMessage.__pydantic_validator__.validate_python
# and the records of a step's calls and results, the same way (each step adds them)
_tool_call = ToolCall.__pydantic_validator__.validate_python
_tool_result = ToolResultMessage.__pydantic_validator__.validate_python


class History:
    def __init__(self, records: Iterable[MessageRecord] = ()) -> None:
        self.messages: list[ChatMessage] = []
        self.last_id = 0  # id of the newest record added (records arrive in id order)
        self._last_gen: int | None = None
        # Tool calls of the latest assistant turn still without a result, and the
        # user-side texts that arrived meanwhile: held until the results are in, because
        # both wire protocols require an assistant's tool calls to be followed directly
        # by their results (a failed tellask's note is stored before the tools run).
        self._open_calls: set[str] = set()
        self._held: list[str] = []
        for rec in records:
            self.add(rec)

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, str, dict[str, Any], int | None]]) -> History:
        """From `Store.history_view` rows: a drive's start skips building whole records
        (and pauses the garbage collector while building them, see `gc_paused`)."""
        history = cls()
        add = history.add_row
        with gc_paused():
            for id, kind, data, generation_id in rows:
                add(id, kind, data, generation_id)
        return history

    def add(self, rec: MessageRecord) -> None:
        self.add_row(rec.id, rec.kind, rec.data, rec.generation_id)

    def add_row(self, id: int, kind: str, data: dict[str, Any], generation_id: int | None) -> None:
        if id:
            if id <= self.last_id:
                return  # already seen
            self.last_id = id
        if kind in HIDDEN:
            return
        msgs = self.messages
        last = msgs[-1] if msgs else None
        if kind in USER_LIKE:
            text = data.get("text", "")
            if self._open_calls:
                self._held.append(text)
                return
            if isinstance(last, UserMessage):
                # Adjacent user-side texts form one turn (providers want alternation).
                msgs[-1] = _user_message({"text": last.text + "\n\n" + text})
            else:
                msgs.append(_user_message({"text": text}))
            self._last_gen = None
        elif kind == "assistant":
            self._release_held()
            msgs.append(_assistant_message({"text": data.get("text", "")}))
            self._last_gen = generation_id
        elif kind == "tool_call":
            call = _tool_call(
                {"id": data["id"], "name": data["name"], "arguments": data.get("arguments", "{}")}
            )
            same_turn = (
                isinstance(last, AssistantMessage)
                and generation_id is not None
                and generation_id == self._last_gen
            )
            if same_turn and isinstance(last, AssistantMessage):
                last.tool_calls.append(call)
            else:
                self._release_held()
                msgs.append(_assistant_message({"tool_calls": [call]}))
                self._last_gen = generation_id
            self._open_calls.add(call.id)
        elif kind == "tool_result":
            msgs.append(
                _tool_result(
                    {
                        "call_id": data["call_id"],
                        "name": data.get("name", ""),
                        "content": data.get("content", ""),
                        "is_error": bool(data.get("is_error", False)),
                    }
                )
            )
            self._last_gen = None
            self._open_calls.discard(data["call_id"])
            if not self._open_calls:
                self._release_held()

    def _release_held(self) -> None:
        """Texts held while calls were open follow the results, as one user turn."""
        self._open_calls.clear()
        if self._held:
            held, self._held = "\n\n".join(self._held), []
            last = self.messages[-1] if self.messages else None
            if isinstance(last, UserMessage):
                self.messages[-1] = _user_message({"text": last.text + "\n\n" + held})
            else:
                self.messages.append(_user_message({"text": held}))

    @property
    def open_generation(self) -> int | None:
        """The stored generation whose tool calls still wait for results, if any."""
        return self._last_gen if self._open_calls else None

    def extend(self, recs: Iterable[MessageRecord]) -> None:
        for rec in recs:
            self.add(rec)

    def __len__(self) -> int:
        return len(self.messages)
