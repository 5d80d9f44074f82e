"""A registered session answers each caller its own question (issue 10, item 3).

Two side dialogs tellask the same `!tellaskSession` member one after the other while its
answer to the first is still being generated. The answer a generation produces counts
only for the tellasks that generation saw; an assignment that arrived mid-generation gets
a further generation, and its caller gets that answer.
"""

from __future__ import annotations

from pathlib import Path

from mindloop.dialogs.runtime import DialogRuntime
from mindloop.dialogs.scheduler import Scheduler
from tests.scenario_util import write_script, write_team

TEAM = {"dev": {"toolsets": ["fs"]}, "a": {}, "b": {}, "c": {}}


async def test_second_caller_of_a_busy_session_gets_its_own_answer(rtws: Path) -> None:
    write_team(rtws, TEAM)
    write_script(
        rtws,
        [
            {"member": "dev", "match": "go", "response": "!?@a ask for A\n\n!?@b ask for B\n"},
            {"member": "dev", "contains": "b done", "response": "all done"},
            {"member": "a", "contains": "ZZ-", "response": "a done"},
            {"member": "b", "contains": "ZZ-", "response": "b done"},
            {"member": "a", "contains": "ask for A", "response": "!?@c !tellaskSession s Q-A\n"},
            # b asks while c is still generating its answer to a
            {
                "member": "b",
                "contains": "ask for B",
                "delay_ms": 300,
                "response": "!?@c !tellaskSession s Q-B\n",
            },
            {"member": "c", "contains": "Q-B", "response": "ZZ-B"},
            {"member": "c", "contains": "Q-A", "delay_ms": 900, "response": "ZZ-A"},
        ],
    )
    rt = DialogRuntime(rtws)
    root = rt.create_root_dialog("tasks/example.tsk", "dev")
    rt.post_user_message(root.id, "go")
    await Scheduler(rt).run()
    by_member = {d.member: d for d in rt.store.list_dialogs(root_id=root.id)}

    def replies(member: str) -> list[str]:
        hist = rt.store.load_history(by_member[member].id)
        return [m.data["text"] for m in hist if m.kind == "tellask_result"]

    a_replies, b_replies = replies("a"), replies("b")
    assert len(a_replies) == 1 and "ZZ-A" in a_replies[0], a_replies
    assert len(b_replies) == 1 and "ZZ-B" in b_replies[0], b_replies
    c_said = [
        m.data["text"] for m in rt.store.load_history(by_member["c"].id) if m.kind == "assistant"
    ]
    assert c_said == ["ZZ-A", "ZZ-B"]
    assert rt.store.all_pending() == []
    await rt.aclose()
