"""A message posted while its dialog is being driven waits for the turn in flight.

The generation in flight was requested before the message existed, so its turn answers
only what it saw; stored ahead of that turn, the new message would look answered and
never get a generation (the dialog's last message would be the turn). The message is
kept in the dialog's inbox until the drive's next step boundary, like a session's new
assignment, and gets a generation of its own. The same holds when the drive runs in
another process (`test_claims_processes.py`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from mindloop.events.types import Event, GenerationStarted
from tests.scenario_util import write_script, write_team


async def test_a_post_during_a_generation_is_answered_after_that_generation(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    write_script(
        rtws,
        [
            {"contains": "question 01", "response": "answer 01"},
            {"contains": "question 00", "delay_ms": 300, "response": "answer 00"},
        ],
    )
    rt = DialogRuntime(rtws)
    rec, _ = rt.start_root_dialog("tasks/example.tsk", "question 00", "dev", None)
    started = asyncio.Event()

    def hear(ev: Event) -> None:
        if isinstance(ev, GenerationStarted):
            started.set()

    rt.bus.subscribe(hear)
    run = asyncio.create_task(Scheduler(rt).run())
    await asyncio.wait_for(started.wait(), 10)
    rt.post_user_message(rec.id, "question 01")  # while "answer 00" is being generated
    await asyncio.wait_for(run, 10)
    said = [(m.kind, m.data["text"]) for m in rt.store.load_history(rec.id)]
    gens = rt.store.generations(rec.id)
    final = rt.store.get_dialog(rec.id)
    await rt.aclose()
    assert said == [
        ("user", "question 00"),
        ("assistant", "answer 00"),
        ("user", "question 01"),
        ("assistant", "answer 01"),
    ]
    assert len(gens) == 2
    assert (final.status, final.needs_drive, final.claim_owner) == ("idle", False, None)
