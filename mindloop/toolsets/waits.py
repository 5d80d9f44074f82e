"""The `waits` toolset: `wait_for`, a timer or a system event (agent-loop §6.2 WAIT_TIMER,
WAIT_SYSTEM_EVENT). It is loop-owned (DESIGN.md §8.9): no member selects it in team.yaml;
a turn policy offers it (`registry.loop_tools(WAIT_TOOLS)`).

The tool only asks: its result carries an `OpenWait` effect, registered by the engine in
the step's transaction, so the wait exists exactly when the result does. The dialog is
not driven while it waits (a wait for the node a dialog works on — the work loop's DO —
parks that node instead); the timer's due time (or the event, delivered with
`DialogRuntime.deliver`) resumes it with a note. A timer may be at most
`loop.waits.timer.max_ahead` ahead (24 h by default); an event wait times out after
`loop.waits.system_event.timeout` and the dialog reads that it did.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, model_validator

from mindloop.config.duration import format_duration
from mindloop.config.loop import WaitsConfig
from mindloop.tools.base import OpenWait, Tool, ToolContext, ToolOutput
from mindloop.tools.registry import ToolArgs, ToolRegistry

WAIT_TOOLSET = "waits"
WAIT_TOOLS = ("wait_for",)

DESCRIPTION = (
    "Pause this dialog until a time comes or a system event arrives, then continue. Give "
    "either `seconds` (or `at`, an ISO 8601 time) for a timer, or `event_type` (with an "
    "optional `filter`: keys the event must carry with these values) for an event. Say "
    "why in `reason`. Nothing else happens in this dialog meanwhile (in the work loop's DO "
    "phase, the node waits instead and other work goes on)."
)


class WaitForArgs(ToolArgs):
    seconds: float | None = Field(None, gt=0, description="Wait this many seconds.")
    at: str | None = Field(
        None, description="Wait until this time (ISO 8601; without a zone: local time)."
    )
    event_type: str | None = Field(None, min_length=1, description="Wait for this event type.")
    filter: dict[str, Any] = Field(
        default_factory=dict,
        description="With event_type: what the event must carry (`key` is the event's key).",
    )
    reason: str = Field("", description="Why you wait (shown to the human).")

    @model_validator(mode="after")
    def _one_target(self) -> WaitForArgs:
        given = [n for n in ("seconds", "at", "event_type") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of seconds, at (a timer) or event_type (an event), "
                f"got {', '.join(given) or 'none'}"
            )
        if self.filter and self.event_type is None:
            raise ValueError("filter goes with event_type")
        return self


def fire_time(args: WaitForArgs, now: float) -> float:
    """When a timer asked for with `args` fires (epoch seconds); ValueError for a time
    that cannot be read."""
    if args.seconds is not None:
        return now + args.seconds
    assert args.at is not None
    try:
        when = datetime.fromisoformat(args.at.strip())
    except ValueError:
        raise ValueError(f"at: {args.at!r} is not an ISO 8601 time") from None
    return when.timestamp()  # a naive time is local time


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def wait_tools(config: WaitsConfig | None = None) -> list[Tool[Any]]:
    limits = config or WaitsConfig()

    async def wait_for(args: WaitForArgs, ctx: ToolContext) -> ToolOutput:
        reason = args.reason.strip()
        if args.event_type is not None:
            payload = {"event_type": args.event_type, "filter": args.filter}
            text = (
                f"Waiting for the event {args.event_type!r}"
                + (f" matching {args.filter}" if args.filter else "")
                + f" (at most {format_duration(limits.system_event.timeout)})."
            )
            return ToolOutput(text, effects=(OpenWait("external", args.event_type, payload),))
        now = time.time()
        try:
            fire_at = fire_time(args, now)
        except ValueError as exc:
            return ToolOutput(str(exc), is_error=True)
        if fire_at <= now:
            return ToolOutput(f"at: {_iso(fire_at)} has passed already", is_error=True)
        if fire_at - now > limits.timer.max_ahead:
            return ToolOutput(
                f"a timer may be at most {format_duration(limits.timer.max_ahead)} ahead; "
                f"{_iso(fire_at)} is {format_duration(fire_at - now)} away",
                is_error=True,
            )
        wait = OpenWait("timer", ctx.call_key[:16], {"fire_at": fire_at, "reason": reason})
        text = f"Waiting until {_iso(fire_at)} (in {format_duration(fire_at - now)})."
        return ToolOutput(text, effects=(wait,))

    return [Tool[WaitForArgs]("wait_for", DESCRIPTION, WaitForArgs, wait_for, store_only=True)]


def add_wait_toolset(registry: ToolRegistry, config: WaitsConfig | None = None) -> None:
    """Register the loop-owned `waits` toolset (offered by turn policies only)."""
    registry.add_toolset(WAIT_TOOLSET, wait_tools(config), loop_owned=True)
