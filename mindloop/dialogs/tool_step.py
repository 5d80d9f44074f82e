"""The tool step of a drive: run the calls a generation requested, record their results.

Every call is first put to the dialog's turn policy (`check_call`): a refused call gets
the refusal's code and message as its result, distinct from an unknown tool. Allowed
calls run through the registry (`ToolRegistry.execute`, where every failure becomes an
error result the model can read); independent calls run concurrently. The results commit
together in one lazy transaction: lost only with a power failure before the next durable
commit, which leaves the calls unanswered, as a crash during the tools does; recovery
answers them as interrupted. So a step costs one fsync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from mindloop.dialogs.claims import Claims
from mindloop.dialogs.control_tools import REMINDER_TOOLS
from mindloop.dialogs.live import LiveDialog
from mindloop.dialogs.request import RequestBuilder
from mindloop.events.bus import EventBus
from mindloop.events.types import ToolCalled, ToolResulted
from mindloop.providers.base import ToolCall
from mindloop.store import MessageRecord, Store, crash_points
from mindloop.tools.base import Tool, ToolContext, ToolOutput


class ToolStep:
    def __init__(
        self,
        store: Store,
        bus: EventBus,
        parts: RequestBuilder,
        claims: Claims,
        context_for: Callable[[LiveDialog], ToolContext],
    ) -> None:
        self.store = store
        self.bus = bus
        self.parts = parts
        self.claims = claims
        self.context_for = context_for

    async def run(
        self, live: LiveDialog, calls: Sequence[ToolCall], offered: Sequence[Tool]
    ) -> None:
        did = live.id
        ctx = self.context_for(live)
        registry = self.parts.tools
        offered_names = [t.name for t in offered]

        async def one(call: ToolCall) -> ToolOutput:
            self.bus.publish(
                ToolCalled(dialog_id=did, call_id=call.id, name=call.name, arguments=call.arguments)
            )
            refusal = None
            if registry.get(call.name) is not None:
                refusal = live.policy.check_call(live, self.parts, call.name, offered)
            if refusal is not None:
                out = ToolOutput(refusal.text(), is_error=True)
            else:  # an unknown name is answered by the registry, listing what is offered
                if crash_points.CRASH is not None:  # tests only
                    crash_points.CRASH.reached("tool.before", call.name)
                out = await registry.execute(
                    call.name,
                    call.arguments,
                    ctx,
                    allowed=None if registry.get(call.name) else offered_names,
                )
                if crash_points.CRASH is not None:
                    crash_points.CRASH.reached("tool.after", call.name)
            self.bus.publish(
                ToolResulted(
                    dialog_id=did,
                    call_id=call.id,
                    name=call.name,
                    text=out.text,
                    is_error=out.is_error,
                )
            )
            return out

        if len(calls) == 1:  # the common case: no task to schedule
            results = [await one(calls[0])]
        else:  # independent calls run concurrently
            results = list(await asyncio.gather(*(one(c) for c in calls)))
        msgs = [
            MessageRecord(
                dialog_id=did,
                course=live.record.course,
                kind="tool_result",
                data={"call_id": c.id, "name": c.name, "content": r.text, "is_error": r.is_error},
            )
            for c, r in zip(calls, results, strict=True)
        ]
        with self.store.tx(durable=False):
            # A drive that lost its claim while the tools ran records nothing: the new
            # driver answers these calls as interrupted (tools are at-least-once).
            self.claims.renew(did)
            live.history.extend(self.store.append_messages(msgs))
        if any(c.name in REMINDER_TOOLS for c in calls):
            live.reminders = self.store.reminders(did)
