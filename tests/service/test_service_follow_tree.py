"""A run that follows one tree (what `chat` does) drives that tree only.

It ends when its tree settles. Had it started drives in other trees (another `chat`'s,
or one a killed process left), ending would cut their generations off mid-stream: paid
model calls thrown away and run again by whoever drives those trees next.
"""

from __future__ import annotations

from pathlib import Path

from mindloop import service
from tests.scenario_util import write_script, write_team


async def test_following_a_tree_leaves_other_trees_alone(rtws: Path) -> None:
    write_team(rtws, {"dev": {}})
    write_script(
        rtws,
        [
            {"contains": "slow one", "delay_ms": 600, "response": "slow answer"},
            {"contains": "quick one", "response": "quick answer"},
        ],
    )
    project = service.open_project(rtws)
    try:
        other = service.start_chat(project, "slow one").dialog  # e.g. another chat's tree
        mine = service.start_chat(project, "quick one").dialog
        report = await service.run(project, root_id=mine.id)
        assert report.last is not None and report.last.final_text == "quick answer"
        assert [r.dialog_id for r in report.drives] == [mine.id]
        untouched = service.show_dialog(project, other.id)
        assert untouched.interrupted == [] and untouched.generations == []
        assert untouched.dialog.needs_drive  # still there for whoever drives it

        await service.run(project)  # e.g. `mindloop run`: everything drivable
        done = service.show_dialog(project, other.id)
        assert [m.data["text"] for m in done.messages] == ["slow one", "slow answer"]
        assert len(done.generations) == 1 and done.interrupted == []
    finally:
        await project.aclose()


async def test_a_chat_drives_the_message_it_posted_not_a_process_beside_it(rtws: Path) -> None:
    """`chat` posts and then drives; a `run` of another process in between (a watcher's
    poll) leaves that drive to the chat, which streams it, for a new dialog and for a
    message to an existing one. A message posted without `drive_here` is anybody's."""
    write_team(rtws, {"dev": {}})
    write_script(rtws, [{"default": True, "response": "answered"}])
    chat, watcher = service.open_project(rtws), service.open_project(rtws)
    try:
        mine = service.start_chat(chat, "first", drive_here=True).dialog
        assert (await service.run(watcher)).drives == []  # the watcher's poll: nothing
        report = await service.run(chat, root_id=mine.id)
        assert [r.dialog_id for r in report.drives] == [mine.id]

        service.post(chat, mine.id, "second", drive_here=True)
        assert (await service.run(watcher)).drives == []
        report = await service.run(chat, root_id=mine.id)
        assert [r.dialog_id for r in report.drives] == [mine.id]
        assert service.show_dialog(chat, mine.id).dialog.claim_owner is None  # released

        service.post(chat, mine.id, "third")  # e.g. the web UI without driving
        assert [r.dialog_id for r in (await service.run(watcher)).drives] == [mine.id]
    finally:
        await chat.aclose()
        await watcher.aclose()
