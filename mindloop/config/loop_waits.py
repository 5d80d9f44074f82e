"""`loop.waits:` in team.yaml — when waits time out, remind, and go stale.

The defaults are agent-loop §6.2–6.3's (every number there is a configuration default):

    loop:
      waits:
        user_input_timeout: 48h       # a question unanswered this long: its stated default
        user_input_remind_every: 48h  #   is assumed (the user is told), else a reminder
        approval_remind_every: 72h    # an approval never times out, never auto-approves
        subagent_active_limit: 30m    # a node's side dialog: active time (its own
        subagent_wall_limit: 24h      #   questions excluded), and wall-clock time
        tool_timeout: 10m             # an async tool that did not declare its own
        system_event_timeout: 24h     # wait_for an event
        timer_max_ahead: 24h          # wait_for a time: at most this far ahead
        stale_after: 24h              # a resume after a longer wait is a staleness signal

Every value is a duration (`config.durations`): `48h`, `30m`, `90s`, or seconds.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from mindloop.config.durations import Duration

HOUR = 3_600.0


class WaitsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    user_input_timeout: Duration = 48 * HOUR
    user_input_remind_every: Duration = 48 * HOUR
    approval_remind_every: Duration = 72 * HOUR
    subagent_active_limit: Duration = 0.5 * HOUR
    subagent_wall_limit: Duration = 24 * HOUR
    tool_timeout: Duration = 10 * 60.0
    system_event_timeout: Duration = 24 * HOUR
    timer_max_ahead: Duration = 24 * HOUR
    stale_after: Duration = 24 * HOUR
